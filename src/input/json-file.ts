import { readFile } from "node:fs/promises";
import { InputError } from "../errors.js";

/** Reads and parses a JSON file, turning every failure into an InputError that names the file. */
export async function readJsonFile(file: string, what: string): Promise<unknown> {
  let text: string;
  try {
    text = await readFile(file, "utf8");
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    const message =
      code === "ENOENT"
        ? `${what} not found`
        : code === "EISDIR"
          ? `${what} is a directory, not a file`
          : `cannot read ${what} (${code ?? String(error)})`;
    throw new InputError([{ file, message }], "Check the path and run again.");
  }
  try {
    return JSON.parse(text);
  } catch (error) {
    throw new InputError([{ file, message: `not valid JSON: ${(error as Error).message}` }]);
  }
}
