import { createHash } from "node:crypto";
import { readFile } from "node:fs/promises";
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
    return { data: JSON.parse(text), sha256: createHash("sha256").update(text).digest("hex") };
  } catch (error) {
    throw new InputError([{ file, message: `not valid JSON: ${(error as Error).message}` }]);
  }
}
