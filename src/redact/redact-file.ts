import { existsSync } from "node:fs";
import { open, readdir, readFile, rename, rm, stat, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { LINE_MAX, type Redactor } from "./redactor.js";

/** Files larger than this are redacted piece by piece through a temporary file, not read whole. */
const MAX_BYTES = 64 * 1024 * 1024;

/**
 * Redacts a file in place, byte for byte, by the rules a log follows (RULES.md): binary content
 * survives, and only secrets and tokens are replaced. Returns whether the file changed.
 */
export async function redactFile(path: string, redactor: Redactor): Promise<boolean> {
  const info = await stat(path);
  if (!info.isFile()) return false;
  if (info.size > MAX_BYTES) return redactLargeFile(path, redactor);
  const data = await readFile(path);
  const redacted = redactor.redactBytes(data);
  if (redacted === data) return false;
  await writeFile(path, redacted);
  return true;
}

/**
 * A large file as a stream is redacted: whole lines, and a partial line once it grows past
 * LINE_MAX (RULES.md, "Partial lines"), into a temporary file that replaces it when anything changed.
 */
async function redactLargeFile(path: string, redactor: Redactor): Promise<boolean> {
  const tmp = `${path}.termorch-redacting`;
  const input = await open(path, "r");
  let changed = false;
  try {
    const output = await open(tmp, "w", 0o600);
    try {
      const state = { inKey: false };
      const buf = Buffer.alloc(CHUNK);
      let pending = Buffer.alloc(0);
      const put = async (piece: Buffer): Promise<void> => {
        const redacted = redactor.redactBytes(piece, state);
        if (redacted !== piece) changed = true;
        await output.write(redacted);
      };
      for (;;) {
        const { bytesRead } = await input.read(buf, 0, CHUNK, null);
        if (bytesRead === 0) break;
        const data = Buffer.concat([pending, buf.subarray(0, bytesRead)]);
        const nl = data.lastIndexOf(10);
        pending = Buffer.from(data.subarray(nl + 1));
        if (nl >= 0) await put(data.subarray(0, nl + 1));
        if (pending.length > LINE_MAX) {
          await put(pending);
          pending = Buffer.alloc(0);
        }
      }
      if (pending.length > 0) await put(pending);
    } finally {
      await output.close();
    }
  } finally {
    await input.close();
  }
  if (changed) await rename(tmp, path);
  else await rm(tmp, { force: true });
  return changed;
}

const CHUNK = 8 * 1024 * 1024;

/**
 * Renames every entry below `root` (files, folders, links) whose name holds a secret to its
 * redacted name, so that no file name termorch leaves in the run directory holds one (an agent
 * may name an artifact after a secret). A name already taken gets a numbered suffix. Returns how
 * many entries were renamed.
 */
export async function redactNames(root: string, redactor: Redactor): Promise<number> {
  let renamed = 0;
  for (const entry of await readdir(root, { withFileTypes: true }).catch(() => [])) {
    let name = entry.name;
    const redacted = redactor.redact(name);
    if (redacted !== name) {
      let target = redacted;
      for (let n = 2; existsSync(join(root, target)); n++) target = `${redacted}.${n}`;
      await rename(join(root, name), join(root, target));
      name = target;
      renamed++;
    }
    if (entry.isDirectory()) renamed += await redactNames(join(root, name), redactor);
  }
  return renamed;
}
