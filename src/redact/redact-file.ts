import { readFile, stat, writeFile } from "node:fs/promises";
import type { Redactor } from "./redactor.js";

/** Files larger than this are left as they are (artifacts are small; a huge one is not text). */
const MAX_BYTES = 64 * 1024 * 1024;

/**
 * Redacts a file in place. latin1 maps bytes 1:1, so binary content survives byte-exact and
 * only ASCII-spelled secrets and tokens are replaced. Returns whether the file changed.
 */
export async function redactFile(path: string, redactor: Redactor): Promise<boolean> {
  const info = await stat(path);
  if (!info.isFile() || info.size > MAX_BYTES) return false;
  const text = (await readFile(path)).toString("latin1");
  const redacted = redactor.redact(text);
  if (redacted === text) return false;
  await writeFile(path, Buffer.from(redacted, "latin1"));
  return true;
}
