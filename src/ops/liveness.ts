import { readFileSync } from "node:fs";

/** Linux's USER_HZ: the unit of process start times in /proc/<pid>/stat, 100 on every mainstream arch. */
const CLOCK_TICKS_PER_S = 100;
/** btime has a one-second resolution and ticks ten milliseconds: allow for both. */
const START_SLACK_MS = 2000;

/**
 * Whether the process that drives a run is still alive. `lastSeenMs` is a time the driver was
 * known to be alive (state.json's updated_at): a process with that pid which started later is
 * a different process that reused the pid, and the driver is gone.
 */
export function driverAlive(pid: number, lastSeenMs: number | null): boolean {
  if (!Number.isInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
  } catch (error) {
    // EPERM: it exists but belongs to someone else; only ESRCH means gone.
    if ((error as NodeJS.ErrnoException).code !== "EPERM") return false;
  }
  if (lastSeenMs === null) return true;
  const started = processStartMs(pid);
  return started === null || started <= lastSeenMs + START_SLACK_MS;
}

/** Epoch ms when a process started, from /proc; null where /proc cannot tell. */
export function processStartMs(pid: number): number | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    // The command name (field 2) may hold spaces and parentheses: count fields after the last ')'.
    const ticks = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[19]);
    const btime = /^btime (\d+)$/m.exec(readFileSync("/proc/stat", "utf8"))?.[1];
    if (!Number.isFinite(ticks) || btime === undefined) return null;
    return Number(btime) * 1000 + (ticks * 1000) / CLOCK_TICKS_PER_S;
  } catch {
    return null;
  }
}
