import { createHash } from "node:crypto";
import { existsSync } from "node:fs";
import { readdir, readFile, rm } from "node:fs/promises";
import { join } from "node:path";
import { z } from "zod";
import { RegistryEntry } from "../contract/state.js";
import { writeJsonAtomic } from "./atomic.js";
import { ensureUserDir, pastRunsDir, registryDir, registryInUserDir } from "./names.js";

export async function registerRun(
  entry: RegistryEntry,
  env?: Readonly<Record<string, string | undefined>>,
): Promise<void> {
  if (registryInUserDir(env)) await ensureUserDir();
  await writeJsonAtomic(join(registryDir(env), `${entry.run_id}.json`), entry, 0o600);
}

/**
 * Forgets a run (`clean`). Its folder, which stays with the run's logs and artifacts, is kept in
 * the list of past runs' folders that sandboxes hide (pastRunDirs).
 */
export async function unregisterRun(
  runId: string,
  env?: Readonly<Record<string, string | undefined>>,
): Promise<void> {
  const file = join(registryDir(env), `${runId}.json`);
  const entry = await readFile(file, "utf8")
    .then((text) => RegistryEntry.parse(JSON.parse(text)))
    .catch(() => null);
  if (entry) await rememberPastRun(entry.run_dir);
  await rm(file, { force: true });
}

const PastRun = z.strictObject({ run_dir: z.string() });

/** Named by its folder: a run id may be used again, by a run in another folder. */
async function rememberPastRun(runDir: string): Promise<void> {
  await ensureUserDir();
  const name = createHash("sha256").update(runDir).digest("hex").slice(0, 32);
  await writeJsonAtomic(join(pastRunsDir(), `${name}.json`), { run_dir: runDir }, 0o600);
}

/**
 * The folders of runs no longer registered that still hold a run's files (state.json); the
 * record of one that no longer does is dropped.
 */
export async function pastRunDirs(): Promise<string[]> {
  const dir = pastRunsDir();
  const names = await readdir(dir).catch(() => [] as string[]);
  const out: string[] = [];
  for (const name of names.filter((n) => n.endsWith(".json"))) {
    const runDir = await readFile(join(dir, name), "utf8")
      .then((text) => PastRun.parse(JSON.parse(text)).run_dir)
      .catch(() => null);
    if (runDir && existsSync(join(runDir, "state.json"))) out.push(runDir);
    else await rm(join(dir, name), { force: true });
  }
  return out;
}

/** Every registered run; unreadable entries are skipped. */
export async function registeredRuns(
  env?: Readonly<Record<string, string | undefined>>,
): Promise<RegistryEntry[]> {
  const dir = registryDir(env);
  const names = await readdir(dir).catch(() => [] as string[]);
  const out: RegistryEntry[] = [];
  for (const name of names.filter((n) => n.endsWith(".json"))) {
    try {
      out.push(RegistryEntry.parse(JSON.parse(await readFile(join(dir, name), "utf8"))));
    } catch {}
  }
  return out.sort((a, b) => a.started_at.localeCompare(b.started_at));
}
