import { closeSync, fstatSync, openSync, readSync } from "node:fs";
import { open } from "node:fs/promises";

/**
 * Parts of a file that may be huge (a log, a transcript): read by offset, never whole. Offsets
 * past the end give what is there; a part of a multi-byte character at a cut is the caller's.
 */

/** A position in a file: from its start, or (`null`) the last `bytes` of it. */
type From = number | null;

function startOf(size: number, from: From, bytes: number): number {
  return from ?? Math.max(0, size - bytes);
}

/** `bytes` of the open file `fd` from `from`, the file's size known. */
function readAt(fd: number, size: number, from: From, bytes: number): Buffer {
  const start = startOf(size, from, bytes);
  const buf = Buffer.alloc(Math.max(0, Math.min(bytes, size - start)));
  return buf.subarray(0, readSync(fd, buf, 0, buf.length, start));
}

/** Several parts of one file and its size, read through one descriptor; null when it cannot be opened. */
export function readPartsSync(
  path: string,
  parts: readonly { from: From; bytes: number }[],
): { size: number; parts: Buffer[] } | null {
  let fd: number;
  try {
    fd = openSync(path, "r");
  } catch {
    return null;
  }
  try {
    const size = fstatSync(fd).size;
    return { size, parts: parts.map((p) => readAt(fd, size, p.from, p.bytes)) };
  } finally {
    closeSync(fd);
  }
}

/** `bytes` of a file from `from`; its end when `from` is null. Throws when it cannot be read. */
export async function readRange(path: string, from: From, bytes: number): Promise<Buffer> {
  const fh = await open(path, "r");
  try {
    const size = (await fh.stat()).size;
    const start = startOf(size, from, bytes);
    const buf = Buffer.alloc(Math.max(0, Math.min(bytes, size - start)));
    const { bytesRead } = await fh.read(buf, 0, buf.length, start);
    return buf.subarray(0, bytesRead);
  } finally {
    await fh.close();
  }
}
