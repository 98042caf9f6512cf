import { posix } from "node:path";
import type { Logger } from "pino";
import type { Conflict, Report } from "../contract/report.js";
import type { RunState } from "../contract/state.js";
import type { LogNames } from "../fs/log-names.js";
import type { TaskJournal } from "../fs/run-state-file.js";
import type { StatusFiles } from "../fs/status-files.js";
import type { Identity } from "../git/repo.js";
import type { WorktreePool } from "../git/worktree-pool.js";
import type { RunInput } from "../input/assignments-file.js";
import type { Ledger } from "../ledger/ledger.js";
import type { Notifier } from "../notify/notifier.js";
import type { Plan } from "../plan/waves.js";
import type { Redactor } from "../redact/redactor.js";
import type { MergeOutcome, RunError } from "../report/build.js";
import type { RemoteBackend } from "../runner/task-hosts.js";
import type { TaskRunner } from "../runner/task-runner.js";
import type { RunStop } from "./stop.js";
import type { TaskPlan } from "./task-plan.js";
import type { GitRun, TaskWorkspace } from "./task-workspace.js";

export type { GitRun } from "./task-workspace.js";

import type { TaskRun } from "./task-run.js";

/** What every stage of one run shares. Built once by the runner. */
export interface RunContext {
  input: RunInput;
  runId: string;
  runDir: string;
  /** Private per-run folder (0700) in the run directory: attempt dirs. */
  privateDir: string;
  git: GitRun | null;
  /** Where attempts run (the task-runner seam). */
  runner: TaskRunner;
  /** Scale-out: the hosts whole tasks run on instead (backend bullmq); null: a local run. */
  remote: RemoteBackend | null;
  /** The git operations on the user's repository (the workspace seam). */
  workspace: TaskWorkspace;
  /** The warm pool of the repository's finished worktrees; null without a repository. */
  pool: WorktreePool | null;
  socketName: string;
  socketPath: string;
  status: StatusFiles;
  logNames: LogNames;
  redactor: Redactor;
  /** Matches the run's secret values alone (no token formats): the secrets gate's; null without secrets. */
  secretFinder: Redactor | null;
  /** Redaction pattern sources handed to the runner for the agents' logs. */
  redactSources: string[];
  /** Each task's state, as state.json, the journal and the report have it. */
  tasks: Map<string, TaskRun>;
  /** Each task's plan, resolved once from the validated input. */
  plans: Map<string, TaskPlan>;
  /** events.jsonl: every decision, hash-chained. */
  ledger: Ledger;
  /** Conflicts between a task's dependencies, found before it was launched. */
  depConflicts: Conflict[];
  verify: boolean;
  keepBranches: boolean;
  /** A fault injected by crash tests (DriveOptions.fault); the points are listed in faults.ts. */
  fault: string | null;
  /** The run was interrupted and is being resumed: leftovers of its own earlier process may exist. */
  resumed: boolean;
  /** Author and committer of termorch's commits (config `git.author`, else the repository's user). */
  identity: Identity;
  killGraceMs: number;
  maxLogBytes: number;
  processEnv: Readonly<Record<string, string | undefined>>;
  /** Whether and why the run stops early (stop.ts): cancel, fail-fast or detach. */
  stop: RunStop;
  /** Saves state.json (coalesced); resolves once a snapshot taken after the call is on disk. */
  persist: () => Promise<void>;
  /** Takes every transition of a task (see RunState), before its status file is written. */
  journal: TaskJournal;
  log: Logger;
  now: () => number;
  /** Called whenever a task changes state (progress display). */
  onChange: () => void;
  /** Tells the config's `notify` command about failed tasks and the run's end (README: Notifications). */
  notifier: Notifier;
}

/** Workspace-relative paths as repository-relative ones (the workspace may be a folder inside the repository). */
export function inRepo(ctx: Pick<RunContext, "git">, paths: readonly string[]): string[] {
  const prefix = ctx.git?.prefix;
  return prefix ? paths.map((p) => posix.join(prefix, p)) : [...paths];
}

/** Repository-relative paths as workspace-relative ones; paths outside the workspace keep a leading "../". */
export function inWorkspace(ctx: Pick<RunContext, "git">, paths: readonly string[]): string[] {
  const prefix = ctx.git?.prefix;
  return prefix ? paths.map((p) => posix.relative(prefix, p)) : [...paths];
}

/** How a run is driven; persisted in state.json so a resume drives it the same way. */
export type RunSettings = RunState["options"];

/** A run being driven: its context plus the plan, the settings and the controls of the driver. */
export interface LiveRun extends RunContext {
  settings: RunSettings;
  plan: Plan;
  order: string[];
  baseDir: string;
  startedAt: number;
  state: () => RunState;
  /** Writes state.json one last time (pending writes first) and no more after it. */
  saveFinal: (last?: RunState) => Promise<void>;
  reportOf: (
    merge: MergeOutcome,
    validation: Report["summary"]["validation"],
    peak: number,
    error: RunError | null,
    dryRun?: boolean,
  ) => Report;
}
