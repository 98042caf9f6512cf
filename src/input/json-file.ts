import { isUtf8 } from "node:buffer";
import { createHash } from "node:crypto";
import { constants } from "node:fs";
import { open } from "node:fs/promises";
import { InputError } from "../errors.js";

/** Reads and parses a JSON file, turning every failure into an InputError that names the file. */
export async function readJsonFile(file: string, what: string): Promise<unknown> {
  return (await readJsonFileWithHash(file, what)).data;
}

/** readJsonFile, plus the SHA-256 of the file's bytes (to notice a file changed under a run). */
export async function readJsonFileWithHash(
  file: string,
  what: string,
): Promise<{ data: unknown; sha256: string }> {
  let bytes: Buffer;
  try {
    bytes = await readRegularFile(file);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    const message =
      error instanceof NotRegularFile
        ? `${what} is ${error.kind}, not a file`
        : code === "ENOENT"
          ? `${what} not found`
          : `cannot read ${what} (${code ?? String(error)})`;
    throw new InputError([{ file, message }], "Check the path and run again.");
  }
  const text = jsonText(bytes);
  if (typeof text !== "string") throw new InputError([{ file, message: text.problem }]);
  let data: unknown;
  try {
    data = JSON.parse(text);
  } catch (error) {
    throw new InputError([{ file, message: `not valid JSON: ${(error as Error).message}` }]);
  }
  const broken = loneSurrogatesAt(data);
  if (broken.length > 0) {
    throw new InputError(
      broken.map((field) => ({
        file,
        field,
        message:
          "a \\uD800-\\uDFFF escape that is not half of a surrogate pair encodes no character; it would be passed on as U+FFFD, not as written",
      })),
    );
  }
  return { data, sha256: createHash("sha256").update(bytes).digest("hex") };
}

export class NotRegularFile extends Error {
  constructor(readonly kind: string) {
    super(kind);
  }
}

/**
 * A file's bytes, refused unless it is a regular file: reading a FIFO waits for a writer that may
 * never come, and a device like /dev/zero never ends. Opened without blocking (a FIFO's open
 * would wait too), then looked at through the open handle, so what is read is what was checked.
 */
export async function readRegularFile(file: string): Promise<Buffer> {
  const handle = await open(file, constants.O_RDONLY | constants.O_NONBLOCK);
  try {
    const stats = await handle.stat();
    if (!stats.isFile())
      throw new NotRegularFile(
        stats.isDirectory()
          ? "a directory"
          : stats.isFIFO()
            ? "a named pipe (FIFO)"
            : stats.isCharacterDevice() || stats.isBlockDevice()
              ? "a device"
              : stats.isSocket()
                ? "a socket"
                : "something else",
      );
    return await handle.readFile();
  } finally {
    await handle.close();
  }
}

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;
const LONE_SURROGATES = new RegExp(LONE_SURROGATE.source, "g");

/**
 * The JSON paths of the strings (keys or values) holding a lone UTF-16 surrogate, which valid
 * UTF-8 can carry only as a `\uD800`-style escape; such a key is shown with the
 * surrogate as its escape. Iterative: input may nest deeper than the call stack.
 */
export function loneSurrogatesAt(data: unknown): string[] {
  const found: string[] = [];
  const stack: Array<[unknown, string]> = [[data, ""]];
  while (stack.length > 0) {
    const [value, path] = stack.pop()!;
    if (typeof value === "string") {
      if (LONE_SURROGATE.test(value)) found.push(path || "(root)");
    } else if (Array.isArray(value)) {
      for (let i = value.length - 1; i >= 0; i--) stack.push([value[i], `${path}[${i}]`]);
    } else if (value !== null && typeof value === "object") {
      for (const [k, v] of Object.entries(value).reverse()) {
        const key = k.replace(LONE_SURROGATES, (c) => `\\u${c.charCodeAt(0).toString(16).toUpperCase()}`);
        const at = path ? `${path}.${key}` : key;
        if (key !== k) found.push(at);
        else stack.push([v, at]);
      }
    }
  }
  return found;
}

/**
 * The text of a JSON file: UTF-8 (RFC 8259), a leading byte order mark ignored. Anything else is
 * refused with where it goes wrong: decoding leniently would turn a stray byte into U+FFFD and
 * run a command or path that differs from what the file says.
 */
export function jsonText(bytes: Uint8Array): string | { problem: string } {
  const at = (offset: number): string => {
    let line = 1;
    let start = 0;
    for (let i = 0; i < offset; i++) {
      if (bytes[i] === 0x0a) {
        line++;
        start = i + 1;
      }
    }
    return `line ${line}, byte ${offset - start + 1} (offset ${offset} in the file)`;
  };
  if ((bytes[0] === 0xff && bytes[1] === 0xfe) || (bytes[0] === 0xfe && bytes[1] === 0xff)) {
    return { problem: "encoded as UTF-16 (it starts with a UTF-16 byte order mark); save it as UTF-8" };
  }
  if (!isUtf8(bytes)) {
    const offset = invalidUtf8At(bytes);
    const byte = (bytes[offset] ?? 0).toString(16).toUpperCase().padStart(2, "0");
    return {
      problem: `not valid UTF-8: byte 0x${byte} at ${at(offset)} is not part of a well-formed character; save the file as UTF-8 (non-ASCII characters may also be written as \\uXXXX escapes)`,
    };
  }
  const nul = bytes.indexOf(0);
  if (nul >= 0) {
    // Never valid in JSON text; most often a UTF-16 file without a byte order mark.
    return { problem: `a NUL byte at ${at(nul)} (UTF-16?); JSON files must be UTF-8` };
  }
  const text = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString("utf8");
  return text.startsWith("\uFEFF") ? text.slice(1) : text;
}

/** Offset of the first byte that is not part of well-formed UTF-8, or -1 when there is none. */
export function invalidUtf8At(bytes: Uint8Array): number {
  for (let i = 0; i < bytes.length; ) {
    const lead = bytes[i]!;
    if (lead < 0x80) {
      i++;
      continue;
    }
    const more =
      lead >= 0xc2 && lead <= 0xdf
        ? 1
        : lead >= 0xe0 && lead <= 0xef
          ? 2
          : lead >= 0xf0 && lead <= 0xf4
            ? 3
            : 0;
    if (more === 0) return i;
    let cp = lead & (0x3f >> more);
    for (let k = 1; k <= more; k++) {
      const next = bytes[i + k];
      if (next === undefined || (next & 0xc0) !== 0x80) return i;
      cp = (cp << 6) | (next & 0x3f);
    }
    // Overlong forms, UTF-16 surrogates and code points past U+10FFFF are not UTF-8 either.
    const min = [0, 0x80, 0x800, 0x10000][more]!;
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return i;
    i += more + 1;
  }
  return -1;
}
