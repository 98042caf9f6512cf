import { existsSync, statSync } from "node:fs";
import { readdir } from "node:fs/promises";
import { isAbsolute, join, resolve } from "node:path";
import { ClaimRecord } from "../contract/claim.js";
import type { RegistryEntry, RunState } from "../contract/state.js";
import type { QueuedRunView } from "../contract/status-view.js";
import { InputError } from "../errors.js";
import { readJsonRecord } from "../fs/json-record.js";
import { registryDir } from "../fs/names.js";
import { registeredRuns } from "../fs/registry.js";
import { type JournalReaders, readRunStateFile } from "../fs/run-state-file.js";
import { driverAlive } from "./liveness.js";

type Env = Readonly<Record<string, string | undefined>>;

/** A run as the operator commands find it: through the registry, a daemon home, or its directory. */
export interface OpsRun {
  runId: string;
  runDir: string;
  /** state.json, when the run directory still holds this run's state. */
  state: RunState | null;
  entry: RegistryEntry | null;
  /** Why `state` is null. */
  problem: string | null;
  /**
   * The repository of the run that now owns the run directory, when a later run in the same folder
   * replaced this one's state.json: it ran the same assignments file, so it is the same workspace.
   */
  siblingRepo: string | null;
}

/** What a run's driver is doing; `interrupted`: state.json says running but its driver is gone. */
export type RunPhase = "running" | "reported" | "interrupted";

/** The phase of a run with readable state. */
export function phaseOf(state: RunState): RunPhase {
  if (state.phase === "reported") return "reported";
  return driverAlive(state.pid, state.updated_at) ? "running" : "interrupted";
}

/**
 * Reads `<runDir>/state.json`; a missing or unreadable one is a problem, not an exception.
 * `journals`: a live view's readers, which parse only what a journal gained since the last view.
 */
export async function readRunState(
  runDir: string,
  journals?: JournalReaders,
): Promise<{ state: RunState } | { problem: string }> {
  const read = readRunStateFile(runDir, journals);
  if (read.ok) return { state: read.state };
  if (read.problem !== "missing") return { problem: `${read.path} is ${read.problem}` };
  return {
    problem: existsSync(runDir)
      ? `no state.json in ${runDir} (not a run directory, or the run never started)`
      : `its run directory ${runDir} is gone`,
  };
}

async function fromEntry(entry: RegistryEntry): Promise<OpsRun> {
  const read = await readRunState(entry.run_dir);
  const base = { runId: entry.run_id, runDir: entry.run_dir, entry, siblingRepo: null };
  if ("problem" in read) return { ...base, state: null, problem: read.problem };
  if (read.state.run_id !== entry.run_id) {
    return {
      ...base,
      state: null,
      problem: `its run directory ${entry.run_dir} now holds run ${read.state.run_id} (a later run in the same folder replaced its state.json and report)`,
      siblingRepo: read.state.git?.root ?? null,
    };
  }
  return { ...base, state: read.state, problem: null };
}

/** Every run in the per-user registry, oldest first. */
export async function registryRuns(env: Env): Promise<OpsRun[]> {
  return Promise.all((await registeredRuns(env)).map(fromEntry));
}

/** Every run of a daemon home (`<home>/runs/<run_id>/`), oldest first. */
export async function homeRuns(home: string, env: Env): Promise<OpsRun[]> {
  const runsDir = join(home, "runs");
  let names: string[];
  try {
    names = await readdir(runsDir);
  } catch {
    throw new InputError(
      [{ file: runsDir, message: "no runs folder here: not a termorch daemon home" }],
      "Pass the folder given to `termorch daemon --home`.",
    );
  }
  const entries = new Map((await registeredRuns(env)).map((e) => [e.run_id, e]));
  const runs: OpsRun[] = [];
  for (const name of names.sort()) {
    const dir = join(runsDir, name);
    if (!statSync(dir, { throwIfNoEntry: false })?.isDirectory()) continue;
    // A claimed assignments file whose run has not started yet has no state: not a run to show.
    if (!existsSync(join(dir, "state.json"))) continue;
    runs.push(await fromDir(dir, entries));
  }
  return runs.sort((a, b) => (a.state?.started_at ?? 0) - (b.state?.started_at ?? 0));
}

/**
 * The runs of a daemon home that are claimed and not started: a run folder with its claim and
 * neither state.json nor a report (a file refused before it started has its report).
 */
export async function homeQueued(home: string): Promise<QueuedRunView[]> {
  const runsDir = join(home, "runs");
  const names = await readdir(runsDir).catch(() => [] as string[]);
  const out: QueuedRunView[] = [];
  for (const name of names.sort()) {
    const dir = join(runsDir, name);
    if (!existsSync(join(dir, "claim.json"))) continue;
    if (existsSync(join(dir, "state.json")) || existsSync(join(dir, "execution_report.json"))) continue;
    const claim = await readJsonRecord(ClaimRecord, join(dir, "claim.json"));
    out.push({
      run_id: name,
      run_dir: dir,
      source: claim?.source ?? null,
      claimed_at: claim?.claimed_at ?? null,
    });
  }
  return out.sort((a, b) => (a.claimed_at ?? "").localeCompare(b.claimed_at ?? ""));
}

async function fromDir(dir: string, entries: Map<string, RegistryEntry>): Promise<OpsRun> {
  const read = await readRunState(dir);
  if ("problem" in read)
    return { runId: dir, runDir: dir, state: null, entry: null, problem: read.problem, siblingRepo: null };
  return {
    runId: read.state.run_id,
    runDir: dir,
    state: read.state,
    entry: entries.get(read.state.run_id) ?? null,
    problem: null,
    siblingRepo: null,
  };
}

/** A run with its state: what a command that answers about one run needs. */
export type StartedRun = OpsRun & { state: RunState };

/**
 * resolveRun for a command that needs the run's state (MCP wait, report, logs, status; logs):
 * a run the registry names without one (its folder gone, or now another run's) is an InputError
 * that says what to do, not an empty answer that looks like a run still to come.
 */
export async function startedRun(ref: string, env: Env, cwd: string): Promise<StartedRun> {
  const run = await resolveRun(ref, env, cwd);
  if (run.state) return { ...run, state: run.state };
  throw unreadableRun(run);
}

/** The error for a run found without readable state: its problem, and the way on. */
export function unreadableRun(run: Pick<OpsRun, "runId" | "runDir" | "problem">): InputError {
  const gone = !existsSync(run.runDir);
  return new InputError(
    [
      {
        message: `run ${run.runId}: ${run.problem ?? "its state cannot be read"}${gone ? " (deleted or moved; the run registry still names it)" : ""}`,
      },
    ],
    gone
      ? `If it was moved, name the run by its folder's new path. Otherwise forget it: termorch clean ${run.runId} removes what the run left and its registry entry (--force when it keeps something).`
      : "Name the run by a run id that `termorch status` lists, or by a folder that holds its state.json.",
  );
}

/**
 * Finds one run from what the operator typed: a run directory (anything with a `/`, or an
 * existing folder that is not a registered id) or a registered run id. Unknown: InputError (exit 2).
 */
export async function resolveRun(ref: string, env: Env, cwd: string): Promise<OpsRun> {
  const entries = await registeredRuns(env);
  const byId = entries.find((e) => e.run_id === ref);
  const looksLikePath = ref.includes("/") || ref === "." || ref === "..";
  if (byId && !looksLikePath) return fromEntry(byId);
  const dir = isAbsolute(ref) ? ref : resolve(cwd, ref);
  if (existsSync(join(dir, "state.json"))) {
    const run = await fromDir(dir, new Map(entries.map((e) => [e.run_id, e])));
    if (run.state) return run;
    throw new InputError([{ file: join(dir, "state.json"), message: run.problem ?? "unreadable" }]);
  }
  const known = entries.map((e) => e.run_id);
  throw new InputError(
    [
      {
        message: `no run "${ref}": not a run id in the registry (${registryDir(env)}${known.length ? `: ${known.slice(-10).join(", ")}` : ", which is empty"}) and ${existsSync(dir) ? `${dir} has no state.json` : `no folder ${dir}`}`,
      },
    ],
    "Pass a run id that `termorch status` lists, or a run directory (where state.json is).",
  );
}
