import { readdirSync, readFileSync } from "node:fs";

/** Whether a process of this pid exists (EPERM: it does, as another user's; only ESRCH means gone). */
export function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}

/** Linux's USER_HZ: the unit of process start times in /proc/<pid>/stat, 100 on every mainstream arch. */
const CLOCK_TICKS_PER_S = 100;

/**
 * The fields of /proc/<pid>/stat after the command name (field 2), which may hold spaces and
 * parentheses: so they are counted after the last ')'. Index 0 is field 3 (the state).
 */
function statFields(pid: number): string[] | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  } catch {
    return null;
  }
}

/**
 * The machine's boot time (epoch s), read once: it does not change while the machine runs, and
 * /proc/stat, which the kernel writes out with every CPU's and interrupt's counters at each read,
 * was most of what a live view's check of a run's driver cost.
 */
let bootTime: number | null | undefined;

function bootTimeS(): number | null {
  if (bootTime === undefined) {
    try {
      const btime = /^btime (\d+)$/m.exec(readFileSync("/proc/stat", "utf8"))?.[1];
      bootTime = btime === undefined ? null : Number(btime);
    } catch {
      bootTime = null;
    }
  }
  return bootTime;
}

/** Epoch ms when a process started, from /proc; null where /proc cannot tell. */
export function processStartMs(pid: number): number | null {
  const ticks = Number(statFields(pid)?.[19]);
  const btime = bootTimeS();
  if (!Number.isFinite(ticks) || btime === null) return null;
  return btime * 1000 + (ticks * 1000) / CLOCK_TICKS_PER_S;
}

/** A process's parent pid; null where /proc cannot tell. */
export function parentPid(pid: number): number | null {
  const ppid = Number(statFields(pid)?.[1]);
  return Number.isInteger(ppid) ? ppid : null;
}

/** Whether a process has ended and only waits to be reaped (a zombie); false where /proc cannot tell. */
export function isDefunct(pid: number): boolean {
  const state = statFields(pid)?.[0];
  return state === "Z" || state === "X";
}

/** A process's environment (`NAME=value` entries); null where it cannot be read. */
export function environOf(pid: number): string[] | null {
  try {
    return readFileSync(`/proc/${pid}/environ`, "utf8").split("\0");
  } catch {
    return null;
  }
}

/** The pids /proc lists (Linux); none elsewhere. */
export function allPids(): number[] {
  try {
    return readdirSync("/proc")
      .filter((name) => /^\d+$/.test(name))
      .map(Number);
  } catch {
    return [];
  }
}
