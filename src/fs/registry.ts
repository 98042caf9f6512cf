import { readdir, readFile, rm } from "node:fs/promises";
import { join } from "node:path";
import { RegistryEntry } from "../contract/state.js";
import { writeJsonAtomic } from "./atomic.js";
import { ensureUserDir, registryDir, registryInUserDir } from "./names.js";

export async function registerRun(
  entry: RegistryEntry,
  env?: Readonly<Record<string, string | undefined>>,
): Promise<void> {
  if (registryInUserDir(env)) await ensureUserDir();
  await writeJsonAtomic(join(registryDir(env), `${entry.run_id}.json`), entry, 0o600);
}

export async function unregisterRun(
  runId: string,
  env?: Readonly<Record<string, string | undefined>>,
): Promise<void> {
  await rm(join(registryDir(env), `${runId}.json`), { force: true });
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
