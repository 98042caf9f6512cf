import { constants, existsSync } from "node:fs";
import { type FileHandle, open, readdir, rename, rm } from "node:fs/promises";
import { join } from "node:path";
import { LINE_MAX, type Redactor } from "./redactor.js";

/** Files larger than this are redacted piece by piece, not read whole. */
const MAX_BYTES = 64 * 1024 * 1024;

/**
 * Redacts a file in place, byte for byte, by the rules a log follows (RULES.md): binary content
 * survives, and only secrets and tokens are replaced. Returns whether the file changed. A link
 * (an agent's, in its artifacts) or anything but a regular file is left alone, never followed:
 * redacting through a link would rewrite whatever file it names. A changed file is replaced by a
 * new one (renamed over it), so a read-only file is redacted too and nothing is written through.
 */
export async function redactFile(path: string, redactor: Redactor): Promise<boolean> {
  let input: FileHandle;
  try {
    input = await open(path, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ELOOP") return false;
    throw error;
  }
  const tmp = `${path}.termorch-redacting`;
  let changed = false;
  try {
    const info = await input.stat();
    if (!info.isFile()) return false;
    // A small file is redacted whole; a large one as a stream.
    const whole = info.size <= MAX_BYTES ? await input.readFile() : null;
    const redacted = whole && redactor.redactBytes(whole);
    if (whole && redacted === whole) return false;
    const output = await freshFile(tmp);
    try {
      if (redacted) await output.write(redacted);
      else changed = await redactStream(input, output, redactor);
    } finally {
      await output.close();
    }
    changed ||= redacted !== null;
  } finally {
    await input.close();
  }
  if (changed) await rename(tmp, path);
  else await rm(tmp, { force: true });
  return changed;
}

/** A new file of termorch's own at `path`, whatever stood there removed first. */
async function freshFile(path: string): Promise<FileHandle> {
  await rm(path, { recursive: true, force: true });
  return open(path, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o600);
}

/**
 * `input` redacted into `output` as a stream: whole lines, and a partial line once it grows past
 * LINE_MAX (RULES.md, "Partial lines"). Answers whether anything was replaced.
 */
async function redactStream(input: FileHandle, output: FileHandle, redactor: Redactor): Promise<boolean> {
  let changed = false;
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
  return changed;
}

/** Read at a time; a file is redacted as a stream whatever its size. */
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
