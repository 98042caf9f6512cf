import { existsSync, readFileSync, rmdirSync, rmSync, writeFileSync } from "node:fs";
import { basename, isAbsolute, join } from "node:path";
import { pollUntil } from "../concurrency/poll-until.js";

/** The name the pane supervisor gives an agent's cgroup (supervisor.pl: enter_cgroup). */
const CGROUP_NAME = /^termorch-[0-9a-f]{1,64}$/;

/**
 * The cgroup a supervisor recorded in `record` (one line: its path), when it still exists. Only a
 * folder the supervisor could have made: never a path a damaged file points elsewhere. The record
 * of a cgroup that is gone is removed.
 */
export function recordedCgroup(record: string): string | null {
  let path: string;
  try {
    path = readFileSync(record, "utf8").trim();
  } catch {
    return null;
  }
  if (!isAbsolute(path) || path.includes("\0") || !CGROUP_NAME.test(basename(path))) return null;
  if (existsSync(join(path, "cgroup.events"))) return path;
  if (!existsSync(path)) rmSync(record, { force: true });
  return null;
}

/** The processes in a cgroup (none when it cannot be read). */
export function cgroupProcs(path: string): number[] {
  try {
    return readFileSync(join(path, "cgroup.procs"), "utf8")
      .split("\n")
      .filter(Boolean)
      .map(Number)
      .filter((n) => Number.isInteger(n) && n > 1);
  } catch {
    return [];
  }
}

/**
 * SIGKILLs everything in a cgroup: through `cgroup.kill` (atomic against forks) where the kernel
 * has it (Linux 5.14), else each process `cgroup.procs` lists.
 */
export function killCgroup(path: string): void {
  try {
    writeFileSync(join(path, "cgroup.kill"), "1\n");
    return;
  } catch {}
  for (const pid of cgroupProcs(path)) {
    try {
      process.kill(pid, "SIGKILL");
    } catch {}
  }
}

/**
 * Ends what an attempt left in its recorded cgroup (TERM, then KILL after `graceMs`), removes
 * the cgroup and then its record. For attempts whose supervisor could not do it itself (it was
 * killed): the cgroup still holds whatever the agent started, whatever its session or parent.
 * Returns how many processes were there, or null when there was no cgroup to end.
 */
export async function endRecordedCgroup(record: string, graceMs: number): Promise<number | null> {
  const path = recordedCgroup(record);
  if (path === null) return null;
  const found = cgroupProcs(path);
  for (const pid of found) {
    try {
      process.kill(pid, "SIGTERM");
    } catch {}
  }
  if (found.length > 0) await pollUntil(() => cgroupProcs(path).length === 0, graceMs, 50);
  const removed = await pollUntil(
    () => {
      try {
        rmdirSync(path);
        return true;
      } catch {
        killCgroup(path);
        return !existsSync(path);
      }
    },
    2000,
    20,
  );
  if (removed) rmSync(record, { force: true });
  return found.length;
}
