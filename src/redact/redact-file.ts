import { constants, existsSync } from "node:fs";
import { type FileHandle, open, readdir, rename, rm } from "node:fs/promises";
import { join } from "node:path";
import { LINE_MAX, type Redactor } from "./redactor.js";

/** Files larger than this are redacted piece by piece through a temporary file, not read whole. */
const MAX_BYTES = 64 * 1024 * 1024;

/**
 * Redacts a file in place, byte for byte, by the rules a log follows (RULES.md): binary content
 * survives, and only secrets and tokens are replaced. Returns whether the file changed. A link
 * (an agent's, in its artifacts) or anything but a regular file is left alone, never followed:
 * redacting through a link would rewrite whatever file it names.
 */
export async function redactFile(path: string, redactor: Redactor): Promise<boolean> {
  let file: FileHandle;
  try {
    file = await open(path, constants.O_RDWR | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ELOOP") return false;
    throw error;
  }
  try {
    const info = await file.stat();
    if (!info.isFile()) return false;
    if (info.size > MAX_BYTES) return await redactLargeFile(path, file, redactor);
    const data = await file.readFile();
    const redacted = redactor.redactBytes(data);
    if (redacted === data) return false;
    await file.truncate(0);
    await file.write(redacted, 0, redacted.length, 0);
    return true;
  } finally {
    await file.close();
  }
}

/**
 * A large file as a stream is redacted: whole lines, and a partial line once it grows past
 * LINE_MAX (RULES.md, "Partial lines"), into a temporary file that replaces it when anything changed.
 */
async function redactLargeFile(path: string, input: FileHandle, redactor: Redactor): Promise<boolean> {
  const tmp = `${path}.termorch-redacting`;
  let changed = false;
  // Whatever stands at the temporary name goes first: the new file is termorch's own.
  await rm(tmp, { recursive: true, force: true });
  const flags = constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW;
  const output = await open(tmp, flags, 0o600);
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
