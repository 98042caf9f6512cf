import { pidAlive, processStartMs } from "../fs/proc.js";

/** btime has a one-second resolution and ticks ten milliseconds: allow for both. */
const START_SLACK_MS = 2000;

/**
 * Whether the process that drives a run is still alive. `lastSeenMs` is a time the driver was
 * known to be alive (state.json's updated_at): a process with that pid which started later is
 * a different process that reused the pid, and the driver is gone.
 */
export function driverAlive(pid: number, lastSeenMs: number | null): boolean {
  if (!Number.isInteger(pid) || pid <= 0 || !pidAlive(pid)) return false;
  if (lastSeenMs === null) return true;
  const started = processStartMs(pid);
  return started === null || started <= lastSeenMs + START_SLACK_MS;
}
