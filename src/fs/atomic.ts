import { mkdirSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { mkdir, readdir, rename, rm, writeFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import { pidAlive } from "./proc.js";

let counter = 0;
/** A temp name beside `path`: pid + counter is unique on the machine without drawing random bytes. */
function tempBeside(path: string): string {
  counter += 1;
  return join(dirname(path), `.${process.pid}.${counter}.tmp`);
}

const TEMP = /^\.(\d+)\.\d+\.tmp$/;

/**
 * Removes the temp files an atomic write left in `dir` when its process died between writing
 * and renaming (a SIGKILL): those of processes that are gone. Returns their names.
 */
export async function removeStrayTemps(dir: string): Promise<string[]> {
  let names: string[];
  try {
    names = await readdir(dir);
  } catch {
    return [];
  }
  const stray = names.filter((n) => {
    const pid = Number(TEMP.exec(n)?.[1]);
    return Number.isInteger(pid) && pid > 0 && pid !== process.pid && !pidAlive(pid);
  });
  await Promise.all(stray.map((n) => rm(join(dir, n), { force: true })));
  return stray;
}

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
  if (makeDir) await mkdir(dirname(path), { recursive: true });
  const tmp = tempBeside(path);
  try {
    await writeFile(tmp, data, { mode });
    await rename(tmp, path);
  } catch (error) {
    await rm(tmp, { force: true });
    throw error;
  }
}

/**
 * The same for the small files a run rewrites at every task transition (status files,
 * state.json). Synchronous on purpose: each is three syscalls of microseconds, where the
 * promise API adds a FileHandle, a thread-pool round trip and ~0.1 ms of main-thread CPU per
 * call; with hundreds of short tasks that CPU is most of termorch's overhead (BENCHMARKS.md).
 */
export function writeFileAtomicSync(
  path: string,
  data: string | Uint8Array,
  mode = 0o644,
  makeDir = true,
): void {
  if (makeDir) mkdirSync(dirname(path), { recursive: true });
  const tmp = tempBeside(path);
  try {
    writeFileSync(tmp, data, { mode });
    renameSync(tmp, path);
  } catch (error) {
    rmSync(tmp, { force: true });
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
