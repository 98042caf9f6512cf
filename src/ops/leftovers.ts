import { existsSync, readdirSync, realpathSync, rmdirSync, rmSync } from "node:fs";
import { join } from "node:path";
import { pollUntil } from "../concurrency/poll-until.js";
import { cgroupProcs, killCgroup, recordedCgroup } from "../fs/cgroup.js";
import { cgroupRecordsOf, privateDirOf } from "../fs/private-dir.js";
import { allPids, environOf, isDefunct, parentPid } from "../fs/proc.js";

/** What was still running of a finished run, and what of it could not be ended. */
export interface Leftovers {
  /** Processes ended (TERM, then KILL). */
  ended: number;
  /** Agent cgroups removed. */
  cgroups: string[];
  /** What survived, with why. */
  kept: Array<{ what: string; why: string }>;
}

/**
 * Ends every process a finished run left running: those in its agents' cgroups (each attempt's
 * supervisor records its agent's cgroup in `.termorch/<run>/cgroups/`, a record that outlives a
 * killed supervisor and the end of the run), and, where /proc can tell, every process whose
 * environment says it belongs to this run: both `TERMORCH_RUN_ID` and `TERMORCH_RUN_DIR` (agents
 * and gates get both), so that another run with the same id, in another run directory, is
 * never touched. The environment finds them whatever session or parent they have; what cleared
 * or replaced its environment is out of reach.
 */
export async function endLeftovers(o: {
  runDir: string;
  runId: string;
  graceMs: number;
}): Promise<Leftovers> {
  const out: Leftovers = { ended: 0, cgroups: [], kept: [] };
  const records = cgroupRecordsOf(privateDirOf(o.runDir, o.runId));
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
    if (!(await pollUntil(() => find().length === 0, o.graceMs, 50))) {
      for (const c of cgroups) killCgroup(c.path);
      signal(find(), "SIGKILL");
      await pollUntil(() => find().length === 0, 2000, 50);
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

/** The agent cgroups the run's supervisors recorded and did not remove themselves. */
function recordedCgroups(records: string): Array<{ path: string; record: string }> {
  const found: Array<{ path: string; record: string }> = [];
  for (const name of safeReaddir(records)) {
    const record = join(records, name);
    const path = recordedCgroup(record);
    if (path !== null) found.push({ path, record });
  }
  return found;
}

/** Live processes whose environment marks them as this run's (Linux /proc; none elsewhere). */
function taggedProcesses(o: { runDir: string; runId: string }): number[] {
  const runTag = `TERMORCH_RUN_ID=${o.runId}`;
  const dirPrefix = "TERMORCH_RUN_DIR=";
  // The run directory as this command named it may differ in spelling (a symlink) from the
  // run's own: both are compared resolved.
  const resolved = (path: string): string => {
    try {
      return realpathSync(path);
    } catch {
      return path;
    }
  };
  const runDirs = new Set([o.runDir, resolved(o.runDir)]);
  const ours = (dir: string): boolean => runDirs.has(dir) || runDirs.has(resolved(dir));
  return allPids().filter((pid) => {
    const env = environOf(pid);
    if (!env?.includes(runTag) || isDefunct(pid)) return false;
    const dir = env.find((e) => e.startsWith(dirPrefix))?.slice(dirPrefix.length);
    return dir !== undefined && ours(dir);
  });
}

/** This process and its ancestors: never ended (clean may run inside an agent of the very run). */
function ancestorsOfSelf(): Set<number> {
  const out = new Set<number>([process.pid]);
  let pid: number | null = process.pid;
  for (let i = 0; i < 64 && pid !== null && pid > 1; i++) {
    pid = parentPid(pid);
    if (pid !== null) out.add(pid);
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

function safeReaddir(dir: string): string[] {
  try {
    return readdirSync(dir);
  } catch {
    return [];
  }
}
