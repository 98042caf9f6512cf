import { randomBytes } from "node:crypto";
import { mkdir, rename, rm, writeFile } from "node:fs/promises";
import { dirname, join } from "node:path";

/**
 * Writes a file so that readers see either the old content or the new one, never a torn
 * write: a temp file in the same folder (same filesystem), then rename.
 */
export async function writeFileAtomic(
  path: string,
  data: string | Uint8Array,
  mode = 0o644,
  /** false when the caller knows the folder exists (a hot path: one syscall less). */
  makeDir = true,
): Promise<void> {
  const dir = dirname(path);
  if (makeDir) await mkdir(dir, { recursive: true });
  const tmp = join(dir, `.${randomBytes(6).toString("hex")}.tmp`);
  try {
    await writeFile(tmp, data, { mode });
    await rename(tmp, path);
  } catch (error) {
    await rm(tmp, { force: true });
    throw error;
  }
}

export async function writeJsonAtomic(
  path: string,
  value: unknown,
  mode = 0o644,
  makeDir = true,
): Promise<void> {
  await writeFileAtomic(path, `${JSON.stringify(value, null, 2)}\n`, mode, makeDir);
}
