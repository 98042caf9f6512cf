import { join, posix } from "node:path";
import type { Logger } from "pino";
import type { RefsSnapshot } from "../contract/merge-journal.js";
import type { Conflict, Report } from "../contract/report.js";
import type { RunState } from "../contract/state.js";
import type { LogNames } from "../fs/log-names.js";
import { taskWorktree } from "../fs/names.js";
import type { TaskJournal } from "../fs/run-state-file.js";
import type { StatusFiles } from "../fs/status-files.js";
import type { Identity } from "../git/repo.js";
import type { ResolvedTask, RunInput } from "../input/assignments-file.js";
import type { Ledger } from "../ledger/ledger.js";
import type { Plan } from "../plan/waves.js";
import type { Redactor } from "../redact/redactor.js";
import type { MergeOutcome, RunError } from "../report/build.js";
import type { TmuxServer } from "../tmux/server.js";
import type { TaskRun } from "./task-run.js";

/** The git side of a run, when the workspace is a repository. */
export interface GitRun {
  root: string;
  /** Workspace HEAD at run start: every task without dependencies starts here. */
  baseCommit: string;
  /** The branch checked out at start (`refs/heads/...`), or null when HEAD was detached. */
  targetRef: string | null;
  /** Where the workspace sits inside the repository ("" at its root, else e.g. "packages/app"). */
  prefix: string;
  /**
   * The repository's refs, listed together with `baseCommit` (a new run; a resume reads them
   * back from the run's refs.json instead).
   */
  refsAtStart?: RefsSnapshot;
}

/** What every stage of one run shares. Built once by the runner. */
export interface RunContext {
  input: RunInput;
  runId: string;
  runDir: string;
  /** Private per-run folder (0700) in the run directory: attempt dirs. */
  privateDir: string;
  git: GitRun | null;
  tmux: TmuxServer;
  socketName: string;
  socketPath: string;
  status: StatusFiles;
  logNames: LogNames;
  redactor: Redactor;
  /** Redaction pattern sources handed to the in-pane wrapper. */
  redactSources: string[];
  tasks: Map<string, TaskRun>;
  /** events.jsonl: every decision, hash-chained. */
  ledger: Ledger;
  /** Tasks whose agent is live right now. */
  running: Set<string>;
  /** Conflicts between a task's dependencies, found before it was launched. */
  depConflicts: Conflict[];
  resolved: Map<string, ResolvedTask>;
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
  signal: AbortSignal;
  /** Aborted when the driving process leaves the run to a later resume (daemon shutdown). */
  detach: AbortSignal;
  /** Saves state.json (coalesced); resolves once a snapshot taken after the call is on disk. */
  persist: () => Promise<void>;
  /** Takes every transition of a task (see RunState), before its status file is written. */
  journal: TaskJournal;
  log: Logger;
  now: () => number;
  /** Called whenever a task changes state (progress display). */
  onChange: () => void;
}

/**
 * Where a task works: its worktree, or the workspace itself when that is not a repository.
 * Worktrees live outside both the workspace and the run directory, so a run directory inside
 * the repository never holds nested checkouts (test runners would find every test twice) and
 * files an agent writes never land under the run directory. The path is deterministic, so a
 * dry run can show the exact argv.
 */
export function taskCwd(ctx: Pick<RunContext, "git" | "runId" | "input">, taskId: string): string {
  return ctx.git ? join(taskWorktree(ctx.runId, taskId), ctx.git.prefix) : ctx.input.workspace;
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
  /** Set by the caller's signal or `termorch cancel`: the run ends with exit 130. */
  cancel: AbortController;
  /** Stops launching (cancel or --fail-fast). */
  stopper: AbortController;
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
