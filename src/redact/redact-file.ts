import { readFile, stat, writeFile } from "node:fs/promises";
import type { Redactor } from "./redactor.js";

/** Files larger than this are left as they are (artifacts are small; a huge one is not text). */
const MAX_BYTES = 64 * 1024 * 1024;

/**
 * Redacts a file in place, byte for byte, by the rules a log follows (RULES.md): binary content
 * survives, and only secrets and tokens are replaced. Returns whether the file changed.
 */
export async function redactFile(path: string, redactor: Redactor): Promise<boolean> {
  const info = await stat(path);
  if (!info.isFile() || info.size > MAX_BYTES) return false;
  const data = await readFile(path);
  const redacted = redactor.redactBytes(data);
  if (redacted === data) return false;
  await writeFile(path, redacted);
  return true;
}
