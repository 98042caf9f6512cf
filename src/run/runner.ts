import { availableParallelism } from "node:os";
import { dirname, resolve } from "node:path";
import type PQueue from "p-queue";
import pino, { type Logger } from "pino";
import type { PredictedCollision } from "../contract/collision.js";
import { Config } from "../contract/config.js";
import { DEFAULT_GATE_FIX_ATTEMPTS, DEFAULT_REDO_ATTEMPTS } from "../contract/merge-policy.js";
import type { RunState } from "../contract/state.js";
import { InputError, LockedError, TermorchError } from "../errors.js";
import { acquireLock, type WorkspaceLock } from "../fs/lock.js";
import { readRunStateFile } from "../fs/run-state-file.js";
import { commitIdentity, TERMORCH_IDENTITY } from "../git/repo.js";
import { checkAgentBinaries } from "../input/agent-binaries.js";
import { loadAssignments, type RunInput } from "../input/assignments-file.js";
import { checkCollisions, collisionsOf } from "../input/collision-check.js";
import { loadConfig, loadConfigOrProblems, removedSettings } from "../input/config-file.js";
import { checkSandboxes } from "../input/sandbox-check.js";
import { checkStartCommits } from "../input/start-commits.js";
import type { NotifyDelivery } from "../notify/notifier.js";
import { collisionText } from "../plan/collisions.js";
import { skippedMerge } from "../report/build.js";
import type { RemoteBackend } from "../runner/task-hosts.js";
import type { TaskRunner } from "../runner/task-runner.js";
import { remoteExecutor } from "../scale/remote-executor.js";
import { budgetOf, budgetSpent, spendOf, spentOf } from "../spend/budget.js";
import { localExecutor } from "../task/execute.js";
import type { TaskExecutor } from "../task/executor.js";
import { gitWorkspace } from "../task/git-workspace.js";
import { planRun, type RunSettings } from "../task/run-plan.js";
import { runRedaction } from "../task/run-redaction.js";
import type { TaskRun } from "../task/task-run.js";
import type { GitRun, TaskWorkspace } from "../task/workspace.js";
import { TmuxRunner } from "../tmux/runner.js";
import { TmuxServer } from "../tmux/server.js";
import {
  type BackendChoice,
  type BackendKind,
  backendKindOf,
  checkMergePolicy,
  checkRemote,
  connectBackend,
} from "./backend.js";
import { type BudgetFlags, budgetAtResume, reopen, reopened } from "./budget-resume.js";
import {
  type DetachedResult,
  type DriveHooks,
  drive,
  internalError,
  type StartInfo,
  startInfo,
} from "./drive.js";
import { type OpenRun, openRun } from "./open-run.js";
import { errorOf, notWrittenNote, type RunResult, writeErrorReport, writeReport } from "./report-file.js";
import { looseReportBlocker, planRunDir, prepareRunDir, type RunDirPlan, runDirOf } from "./run-dir.js";
import { freshRunId } from "./run-id.js";
import { runReport } from "./run-report.js";
import type { ScheduleMode } from "./schedule.js";
import { checkStoppedRun } from "./stop-resume.js";

export type { RunSettings } from "../task/run-plan.js";
export type { DetachedResult, StartInfo } from "./drive.js";
export { internalError } from "./drive.js";
export type { RunResult } from "./report-file.js";

/** What the caller of a run hears of it, besides its result. */
export interface RunHooks {
  /** Warnings about the input that do not stop the run (e.g. a removed config key); default: the logger's warn. */
  onNotice?: (message: string) => void;
  /** Called once the run is planned, before anything starts. */
  onStart?: (info: StartInfo) => void;
  /** Called on every task state change with the current tasks (progress display). */
  onProgress?: (tasks: readonly Readonly<TaskRun>[], elapsedMs: number) => void;
  /**
   * Called once the report is written, before the clean-up after the merge (worktrees into the
   * pool, branches deleted): the daemon answers in its outbox here, so the answer never waits
   * for the clean-up.
   */
  onReport?: (result: RunResult) => Promise<void>;
}

/** The parts a test (or the daemon) puts in place of the real ones. */
export interface RunSeams {
  /** Where attempts run; default: the local tmux runner on the run's socket. Tests inject a fake. */
  runner?: TaskRunner;
  /** The git operations on the workspace; default: git's. Tests inject one without processes. */
  workspace?: TaskWorkspace;
  /** Where the config's `notify` events go; default: its command. Tests inject a recorder. */
  notify?: NotifyDelivery;
  /** A crash-test fault (faults.ts): injected by tests, never taken from the environment. */
  fault?: string | null;
}

/** What the caller of a run can observe and steer (both `run` and `resume`). */
export interface DriveOptions {
  /** Aborting cancels the run: running sessions are ended, the report is still written (exit 130). */
  signal?: AbortSignal;
  /** Aborting leaves the run to a later resume: agents keep running, no report (daemon shutdown). */
  detach?: AbortSignal;
  /** A host-wide limit shared by several runs (the daemon): each task also takes a slot here. */
  hostQueue?: PQueue;
  env?: Readonly<Record<string, string | undefined>>;
  cwd?: string;
  logger?: Logger;
  /** Wait for another run's workspace lock instead of failing with exit 4. */
  wait?: boolean;
  /** Scale-out: the backend chosen on the command line, and how to reach its workers (docs/SCALING.md). */
  backend?: BackendChoice;
  hooks?: RunHooks;
  seams?: RunSeams;
}

/** What the command line sets over the assignments file's `mode` and the run's defaults. */
export interface RunOverrides {
  /** Overrides the assignment's `mode.dry_run` when set. */
  dryRun?: boolean;
  /** Overrides the assignment's `mode.verify` when set. */
  verify?: boolean;
  maxParallel?: number;
  schedule?: ScheduleMode;
  failFast?: boolean;
  /** After the report: close successful sessions and keep failed ones (default), keep all, or close all. */
  sessions?: "default" | "keep" | "clean";
  keepBranches?: boolean;
  allowDirty?: boolean;
}

export interface RunOptions extends DriveOptions {
  assignmentsFile: string;
  configFile?: string;
  /** Run directory; default: `baseDir`. */
  outDir?: string;
  /**
   * The folder the run acts as if the assignments file were in (`workspace_dir` is relative to
   * it, and it is the default run directory); default: the file's own folder.
   */
  baseDir?: string;
  /** Run id to use instead of the file's `run_id` (the daemon names runs by their folder). */
  runId?: string;
  overrides?: RunOverrides;
}

/** What preparing a new run found before anything of it starts. */
interface Prepared {
  input: RunInput;
  backend: BackendKind;
  remote: RemoteBackend | null;
  git: GitRun | null;
  lock: WorkspaceLock | null;
  dryRun: boolean;
  /** Where its run directory goes; null for a dry run (which writes its report only where that harms nothing). */
  dir: RunDirPlan | null;
}

/** `termorch run`: validate, plan, run every task in tmux, collect, merge, report (docs/ARCHITECTURE.md: the pipeline). */
export async function runAssignments(opts: RunOptions): Promise<RunResult | DetachedResult> {
  const startedAt = Date.now();
  const env = opts.env ?? process.env;
  const cwd = opts.cwd ?? process.cwd();
  const file = resolve(cwd, opts.assignmentsFile);
  const baseDir = opts.baseDir ? resolve(cwd, opts.baseDir) : dirname(file);
  const requestedDir = resolve(cwd, opts.outDir ?? baseDir);
  const log = opts.logger ?? pino({ level: "silent" });

  const held: { lock: WorkspaceLock | null } = { lock: null };
  let prepared: Prepared;
  try {
    prepared = await prepareNewRun(opts, { file, requestedDir, baseDir, env, cwd, log, startedAt }, held);
  } catch (error) {
    await held.lock?.release();
    // A locked workspace writes nothing: the run directory may be the holder's.
    if (!(error instanceof TermorchError) || error instanceof LockedError) throw error;
    const runId = opts.runId ?? (error instanceof InputError ? error.runId : null);
    return writeErrorReport(requestedDir, startedAt, errorOf(error), { runId });
  }
  const { input, git, remote, dryRun, dir, lock } = prepared;
  let runDir = dir ? runDirOf(dir, input.runId) : requestedDir;
  let own = false;
  try {
    const socket = env.TERMORCH_TMUX_SOCKET || input.config.tmux.socket || "termorch";
    const runner = runnerFor(socket, input, opts);
    // Branches, worktrees and sessions are named by run id: a re-run of the same file must not
    // collide with what an earlier run kept for inspection, so it gets a suffix.
    const runId = dir
      ? await freshRunId(
          input.runId,
          git,
          runner,
          dir.kind === "apart" ? { apart: (id) => runDirOf(dir, id) } : { folder: dir.dir },
          env,
        )
      : input.runId;
    if (dir) {
      runDir = prepareRunDir(dir, runId);
      own = true;
      // Whoever finds the workspace locked is told the run id and folder this run really has.
      await lock?.update({ run_id: runId, run_dir: runDir });
    }
    const redaction = runRedaction(input, env);
    const o = await openRun(
      planRun({
        input,
        git,
        runId,
        runDir,
        baseDir,
        cwd,
        settings: settingsOf(opts, input, prepared.backend, remote),
        identity: git ? await commitIdentity(git.root, input.config.git.author) : TERMORCH_IDENTITY,
        env,
        redactSources: redaction.redactor.sources,
        startedAt,
        fault: opts.seams?.fault ?? null,
        resumed: false,
      }),
      { ...openOptions(opts, runner, log), redaction, restored: null },
    );
    if (dryRun) {
      opts.hooks?.onStart?.(startInfo(o, remote, { dryRun: true, resumed: false, keptApartFrom: null }));
      const report = runReport(o.run, o.recorder, o.ports.redactor, {
        merge: skippedMerge("dry run"),
        validation: "skipped",
        peak: 0,
        error: null,
        cancelled: o.stop.cancelled,
        stopped: null,
        collisions: collisionsOf(input).map((c) => ({ ...c, actual: null })),
        socket: null,
        dryRun: true,
      });
      // Never over another run's files, never into the user's work tree.
      const blocker = await looseReportBlocker(runDir);
      if (blocker === null) return writeReport(runDir, report, { html: false });
      return {
        report,
        reportPath: null,
        exitCode: report.exit_code,
        runDir,
        notWritten: notWrittenNote(blocker),
      };
    }
    return await drive(
      o,
      remote,
      executorOf(o, remote),
      driveHooks(opts),
      false,
      dir?.kind === "apart" ? dir.requested : null,
    );
  } catch (error) {
    if (error instanceof TermorchError) throw error;
    // Something broke before the run could report for itself: the caller still gets a report.
    return writeErrorReport(runDir, startedAt, internalError(error), { own });
  } finally {
    await lock?.release();
  }
}

/**
 * Validation, the backend, the workspace lock, the run directory and the workspace's git side,
 * in that order: an error of the input (exit 2) or a locked workspace (exit 4) stops the run
 * before anything of it starts. The lock, once taken, is in `held` for the caller to release.
 */
async function prepareNewRun(
  opts: RunOptions,
  at: {
    file: string;
    requestedDir: string;
    baseDir: string;
    env: Readonly<Record<string, string | undefined>>;
    cwd: string;
    log: Logger;
    startedAt: number;
  },
  held: { lock: WorkspaceLock | null },
): Promise<Prepared> {
  const { env, cwd } = at;
  let input = await loadAssignments(
    at.file,
    await loadConfigOrProblems(opts.configFile, env, cwd),
    at.startedAt,
    at.baseDir,
  );
  if (opts.runId) input = { ...input, runId: opts.runId };
  const backend = backendKindOf(input, opts.backend);
  checkMergePolicy(input, backend);
  const collisions = checkCollisions(input);
  // A worker checks its own PATH: the agents need not be installed where the coordinator runs.
  if (backend === "local") {
    checkAgentBinaries(input, env);
    checkSandboxes(input, env);
  }
  notice(opts, at.log, input, collisions);
  const dryRun = opts.overrides?.dryRun ?? input.assignments.mode.dry_run;
  // Before anything starts: an unreachable Redis or a missing remote is an error of the input (exit 2).
  const remote = dryRun ? null : await connectBackend(input, backend, opts.backend);
  try {
    return await prepareConnected(opts, at, held, { input, backend, remote, dryRun });
  } catch (error) {
    // What stops the run here leaves no connection open behind it (a Redis client keeps the process alive).
    await remote?.hosts.close();
    throw error;
  }
}

/** The rest of a new run's preparation, its backend connected. */
async function prepareConnected(
  opts: RunOptions,
  at: { requestedDir: string },
  held: { lock: WorkspaceLock | null },
  { input, backend, remote, dryRun }: Pick<Prepared, "input" | "backend" | "remote" | "dryRun">,
): Promise<Prepared> {
  if (remote) await checkRemote(input, remote);
  // Two runs never work on one workspace at once (exit 4, or wait with --wait). The workspace
  // and the run directory are looked at once the lock is held: a run that waited starts from
  // the current HEAD, and finds the folder as the run it waited for left it.
  if (!dryRun) held.lock = await lockWorkspace(input.workspace, input.runId, at.requestedDir, opts);
  // A dry run writes its report only where that harms nothing; a real run needs a folder of its own.
  const dir = dryRun ? null : await planRunDir(at.requestedDir, opts.outDir !== undefined);
  const git = await (opts.seams?.workspace ?? gitWorkspace).inspect(
    input.workspace,
    input.assignments.environment.worktree_include,
    opts.overrides?.allowDirty ?? false,
    dryRun,
    input.file,
    input.assignments.environment.worktree_copy,
  );
  await checkStartCommits(input, git);
  if (remote && !git)
    throw new InputError(
      [
        {
          file: input.file,
          field: "environment.workspace_dir",
          message: `backend bullmq moves code through git, but the workspace ${input.workspace} is not a git repository`,
        },
      ],
      "Run it locally (without --backend bullmq), or make the workspace a git repository.",
    );
  return { input, backend, remote, git, lock: held.lock, dryRun, dir };
}

/** How the run is driven, from the command line, the assignment and the config, in that order. */
function settingsOf(
  opts: RunOptions,
  input: RunInput,
  backend: BackendKind,
  remote: RemoteBackend | null,
): RunSettings {
  const over = opts.overrides ?? {};
  // Key by key: an assignments file that names only the mode keeps the config's bound.
  const merge = input.assignments.mode.merge ?? {};
  const config = input.config.merge ?? {};
  return {
    max_parallel:
      over.maxParallel ??
      input.assignments.environment.resource_limits.max_parallel ??
      input.config.defaults.max_parallel ??
      // Workers bound their own parallelism: every ready task is queued for them.
      (remote ? Math.max(1, input.assignments.tasks.length) : availableParallelism()),
    schedule: over.schedule ?? "eager",
    fail_fast: over.failFast ?? false,
    verify: over.verify ?? input.assignments.mode.verify,
    sessions: over.sessions ?? "default",
    keep_branches: over.keepBranches ?? false,
    allow_dirty: over.allowDirty ?? false,
    backend,
    on_conflict: merge.on_conflict ?? config.on_conflict ?? "halt",
    redo_attempts: merge.redo_attempts ?? config.redo_attempts ?? DEFAULT_REDO_ATTEMPTS,
    on_gate_failure: merge.on_gate_failure ?? config.on_gate_failure ?? "halt",
    gate_fix_attempts: merge.gate_fix_attempts ?? config.gate_fix_attempts ?? DEFAULT_GATE_FIX_ATTEMPTS,
    budget: budgetOf(input.assignments.environment.resource_limits),
    on_budget: input.assignments.environment.resource_limits.on_budget ?? "stop",
  };
}

/** Where the run's tasks execute: on the workers of its backend, or in this host's tmux. */
function executorOf(o: OpenRun, remote: RemoteBackend | null): TaskExecutor {
  return remote
    ? remoteExecutor(o.run, o.ports, o.stop, o.recorder, remote)
    : localExecutor(o.run, o.ports, o.stop, o.recorder);
}

function driveHooks(opts: DriveOptions): DriveHooks {
  return { ...opts.hooks, ...(opts.hostQueue ? { hostQueue: opts.hostQueue } : {}) };
}

function openOptions(opts: DriveOptions, runner: TaskRunner, log: Logger) {
  return {
    runner,
    log,
    ...(opts.seams?.workspace ? { workspace: opts.seams.workspace } : {}),
    ...(opts.seams?.notify ? { notify: opts.seams.notify } : {}),
    ...(opts.signal ? { signal: opts.signal } : {}),
    ...(opts.detach ? { detach: opts.detach } : {}),
    ...(opts.hooks?.onProgress ? { onProgress: opts.hooks.onProgress } : {}),
  };
}

export interface ResumeOptions extends DriveOptions {
  runDir: string;
  /** A raised budget (`--max-cost-usd`, `--max-tokens`): a run its budget stopped goes on. */
  budget?: BudgetFlags;
}

/**
 * `termorch resume`: finishes a run whose driver was interrupted (SIGKILL, reboot, daemon
 * restart) from its state.json. Finished tasks are kept, live sessions re-adopted, tasks that
 * ended meanwhile finalised from their exit records; nothing that finished runs again.
 */
export async function resumeRun(opts: ResumeOptions): Promise<RunResult | DetachedResult> {
  const env = opts.env ?? process.env;
  const cwd = opts.cwd ?? process.cwd();
  const runDir = resolve(cwd, opts.runDir);
  const log = opts.logger ?? pino({ level: "silent" });
  const first = await readState(runDir);
  const loaded = first.config_file
    ? await loadConfig(first.config_file, env, first.cwd)
    : { config: Config.parse({}), file: null };
  const input = await loadAssignments(first.assignments_file, loaded, first.started_at, first.base_dir);
  notice(opts, log, input);
  // The one change a resume takes from the file or its flags: a raised budget.
  const budget = budgetAtResume(runDir, first, input, opts.budget ?? {});
  budget.check(first);
  // Its tasks run where they ran: a run on workers reconnects to them (its jobs are found by id).
  const remote = await connectBackend(input, first.options.backend, {
    ...opts.backend,
    kind: first.options.backend,
  });
  const lock = await lockWorkspace(input.workspace, first.run_id, runDir, opts);
  try {
    // Read again under the lock: whoever held it may have finished or advanced the run meanwhile.
    const state = await readState(runDir);
    budget.check(state);
    if (state.stopped !== null) await checkStoppedRun(state);
    const git = state.git
      ? {
          root: state.git.root,
          baseCommit: state.git.base_commit,
          targetRef: state.git.target_ref,
          prefix: state.git.prefix,
        }
      : null;
    const resumedInput = { ...input, runId: state.run_id };
    const runner = runnerFor(state.socket, input, opts);
    const redaction = runRedaction(resumedInput, env);
    const planned = planRun({
      input: resumedInput,
      git,
      runId: state.run_id,
      runDir,
      baseDir: state.base_dir,
      cwd: state.cwd,
      settings: {
        ...state.options,
        budget: budget.budget,
        on_budget: budget.onBudget ?? state.options.on_budget,
      },
      identity: git ? await commitIdentity(git.root, input.config.git.author) : TERMORCH_IDENTITY,
      env,
      redactSources: redaction.redactor.sources,
      startedAt: state.started_at,
      fault: opts.seams?.fault ?? null,
      resumed: true,
    });
    // A task its own budget stopped stays stopped: only the run's budget was raised.
    const reopening = new Set(
      budget.changed
        ? reopened(
            state.tasks,
            (t) => budgetSpent(planned.plans.get(t.id)?.budget, spentOf(spendOf(t)), "") === null,
          )
        : [],
    );
    const o = await openRun(planned, {
      ...openOptions(opts, runner, log),
      redaction,
      restored: state.tasks.map((t) => (reopening.has(t.id) ? reopen(t) : t)),
      restoredMerge: state.merge,
    });
    await o.ports.ledger.append("run.resumed", {
      pid: process.pid,
      ...(state.stopped === null ? {} : { stopped: state.stopped }),
      tasks: state.tasks.map((t) => ({ id: t.id, state: t.state, attempts: t.attempts })),
    });
    if (budget.changed) {
      await o.ports.ledger.append("run.budget_raised", {
        from: state.options.budget,
        to: budget.budget,
        reopened: [...reopening],
      });
      // Into the journal now (a resume after a crash finds them open), their old ends' status files gone.
      for (const id of reopening) o.recorder.checkpoint(id);
      await o.recorder.clearStatusFiles(reopening);
    }
    return await drive(o, remote, executorOf(o, remote), driveHooks(opts), true);
  } finally {
    await lock.release();
  }
}

export async function readState(runDir: string): Promise<RunState> {
  const read = readRunStateFile(runDir);
  if (read.ok) return read.state;
  if (read.problem === "missing")
    throw new InputError(
      [{ file: read.path, message: "no state.json here: not a run directory, or the run never started" }],
      "Pass the run directory of an interrupted run.",
    );
  if (read.problem.startsWith("not JSON"))
    throw new InputError(
      [{ file: read.path, message: "state.json is not valid JSON (damaged)" }],
      "The run cannot be resumed; its report, logs and ledger are still there.",
    );
  throw new InputError([{ file: read.path, message: `run state is ${read.problem}` }]);
}

function notice(
  opts: DriveOptions,
  log: Logger,
  input: RunInput,
  collisions: readonly PredictedCollision[] = [],
): void {
  const messages = [...removedSettings(input.config, input.configFile), ...collisions.map(collisionText)];
  for (const message of messages) opts.hooks?.onNotice ? opts.hooks.onNotice(message) : log.warn(message);
}

/** The run's tmux runner on `socket`, or the one a test injected. */
export function runnerFor(socket: string, input: RunInput, opts: Pick<DriveOptions, "seams">): TaskRunner {
  return (
    opts.seams?.runner ??
    new TmuxRunner(
      new TmuxServer({
        socket,
        historyLimit: input.config.defaults.history_limit,
        size: input.config.defaults.session_size as `${number}x${number}`,
      }),
    )
  );
}

function lockWorkspace(
  workspace: string,
  runId: string,
  runDir: string,
  opts: DriveOptions,
): Promise<WorkspaceLock> {
  return acquireLock(
    workspace,
    { run_id: runId, run_dir: runDir },
    {
      wait: opts.wait ?? false,
      // Waiting ends on cancel and on detach (a daemon shutting down) alike.
      signal: AbortSignal.any([opts.signal, opts.detach].filter((s): s is AbortSignal => s !== undefined)),
    },
  );
}
