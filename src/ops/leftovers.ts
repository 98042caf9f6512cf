import { existsSync, readdirSync, readFileSync, rmdirSync, rmSync, writeFileSync } from "node:fs";
import { basename, isAbsolute, join } from "node:path";

/** What was still running of a finished run, and what of it could not be ended. */
export interface Leftovers {
  /** Processes ended (TERM, then KILL). */
  ended: number;
  /** Agent cgroups removed. */
  cgroups: string[];
  /** What survived, with why. */
  kept: Array<{ what: string; why: string }>;
}

const CGROUP_NAME = /^termorch-[0-9a-f]{1,64}$/;

/**
 * Ends every process a finished run left running: those in its agents' cgroups (each attempt's
 * wrapper records its agent's cgroup in `.termorch/<run>/cgroups/`, a record that outlives a
 * killed wrapper and the end of the run), and, where /proc can tell, every process whose environment says it belongs to this
 * run: `TERMORCH_RUN_ID`, plus an artifacts folder in this run directory (agents, task gates) or
 * a workspace in this run's worktree folder (run-level gates). The environment finds them
 * whatever session or parent they have; what cleared or replaced its environment is out of reach.
 */
export async function endLeftovers(o: {
  runDir: string;
  runId: string;
  worktrees: string;
  graceMs: number;
}): Promise<Leftovers> {
  const out: Leftovers = { ended: 0, cgroups: [], kept: [] };
  const records = join(o.runDir, ".termorch", o.runId, "cgroups");
  const cgroups = recordedCgroups(records);
  const spare = ancestorsOfSelf();
  const find = (): number[] => {
    const pids = new Set<number>();
    for (const c of cgroups) for (const pid of cgroupProcs(c.path)) pids.add(pid);
    for (const pid of taggedProcesses(o)) pids.add(pid);
    return [...pids].filter((p) => !spare.has(p));
  };
  const first = find();
  out.ended = first.length;
  if (first.length > 0) {
    signal(first, "SIGTERM");
    if (!(await until(() => find().length === 0, o.graceMs))) {
      for (const c of cgroups) {
        try {
          writeFileSync(join(c.path, "cgroup.kill"), "1\n");
        } catch {}
      }
      signal(find(), "SIGKILL");
      await until(() => find().length === 0, 2000);
    }
    const left = find();
    if (left.length > 0)
      out.kept.push({ what: `processes ${left.join(", ")}`, why: "still running after SIGKILL" });
  }
  for (const c of cgroups) {
    try {
      if (existsSync(c.path)) rmdirSync(c.path);
      rmSync(c.record, { force: true });
      out.cgroups.push(c.path);
    } catch (error) {
      out.kept.push({ what: `cgroup ${c.path}`, why: (error as Error).message });
    }
  }
  try {
    rmdirSync(records);
  } catch {}
  return out;
}

/** The agent cgroups the run's wrappers recorded and did not remove themselves. */
function recordedCgroups(records: string): Array<{ path: string; record: string }> {
  const found: Array<{ path: string; record: string }> = [];
  for (const name of safeReaddir(records)) {
    const record = join(records, name);
    let path: string;
    try {
      path = readFileSync(record, "utf8").trim();
    } catch {
      continue;
    }
    // Only a folder the wrapper could have made: never a path a damaged file points elsewhere.
    if (!isAbsolute(path) || path.includes("\0") || !CGROUP_NAME.test(basename(path))) continue;
    if (existsSync(join(path, "cgroup.events"))) found.push({ path, record });
    else if (!existsSync(path)) rmSync(record, { force: true });
  }
  return found;
}

function cgroupProcs(path: string): number[] {
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

/** Live processes whose environment marks them as this run's (Linux /proc; none elsewhere). */
function taggedProcesses(o: { runDir: string; runId: string; worktrees: string }): number[] {
  const out: number[] = [];
  const runTag = `TERMORCH_RUN_ID=${o.runId}`;
  const artifacts = `TERMORCH_ARTIFACTS_DIR=${join(o.runDir, "artifacts")}/`;
  const workspace = `TERMORCH_WORKSPACE=${o.worktrees}/`;
  for (const name of safeReaddir("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    let env: string[];
    try {
      if (/^\S+ \(.*\) [ZX] /s.test(readFileSync(`/proc/${name}/stat`, "utf8"))) continue;
      env = readFileSync(`/proc/${name}/environ`, "utf8").split("\0");
    } catch {
      continue;
    }
    if (!env.includes(runTag)) continue;
    if (env.some((e) => e.startsWith(artifacts) || e.startsWith(workspace))) out.push(Number(name));
  }
  return out;
}

/** This process and its ancestors: never ended (clean may run inside an agent of the very run). */
function ancestorsOfSelf(): Set<number> {
  const out = new Set<number>([process.pid]);
  let pid = process.pid;
  for (let i = 0; i < 64 && pid > 1; i++) {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
      pid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
      out.add(pid);
    } catch {
      break;
    }
  }
  return out;
}

function signal(pids: number[], sig: NodeJS.Signals): void {
  for (const pid of pids) {
    try {
      process.kill(pid, sig);
    } catch {}
  }
}

async function until(check: () => boolean, ms: number): Promise<boolean> {
  const end = Date.now() + ms;
  for (;;) {
    if (check()) return true;
    if (Date.now() >= end) return false;
    await new Promise((r) => setTimeout(r, 50));
  }
}

function safeReaddir(dir: string): string[] {
  try {
    return readdirSync(dir);
  } catch {
    return [];
  }
}
