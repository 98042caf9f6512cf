import { closeSync, constants, fstatSync, openSync, readSync } from "node:fs";
import { errorText, InputError } from "../errors.js";

/** An objective longer than this is no objective but a document: the planner's prompt quotes it whole. */
export const MAX_OBJECTIVE_BYTES = 64 * 1024;

const HINT =
  "Write what you want done in a Markdown or text file (a few paragraphs), and run termorch plan again; nothing was started.";

/**
 * The objective `termorch plan` is given, read through no link: refused when it is not a regular
 * file, over MAX_OBJECTIVE_BYTES, binary (a NUL byte, or not UTF-8), or empty.
 */
export function readObjective(path: string): string {
  const refuse = (message: string): never => {
    throw new InputError([{ file: path, message }], HINT);
  };
  let fd: number;
  try {
    fd = openSync(path, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    return refuse(
      code === "ELOOP"
        ? "the objective is a symbolic link; give the file itself"
        : code === "ENOENT"
          ? "the objective does not exist"
          : `the objective cannot be read: ${errorText(error)}`,
    );
  }
  let bytes: Buffer;
  try {
    const st = fstatSync(fd);
    if (!st.isFile()) return refuse("the objective is not a regular file");
    if (st.size > MAX_OBJECTIVE_BYTES)
      return refuse(`the objective is ${st.size} bytes, over termorch's bound of ${MAX_OBJECTIVE_BYTES}`);
    bytes = Buffer.alloc(MAX_OBJECTIVE_BYTES + 1);
    const n = readSync(fd, bytes, 0, bytes.length, 0);
    if (n > MAX_OBJECTIVE_BYTES)
      return refuse(`the objective is over termorch's bound of ${MAX_OBJECTIVE_BYTES} bytes`);
    bytes = bytes.subarray(0, n);
  } finally {
    closeSync(fd);
  }
  if (bytes.includes(0)) return refuse("the objective is a binary file (it holds a NUL byte)");
  let text: string;
  try {
    text = new TextDecoder("utf-8", { fatal: true }).decode(bytes);
  } catch {
    return refuse("the objective is not UTF-8 text");
  }
  if (text.trim() === "") return refuse("the objective is empty");
  return text;
}
