import { existsSync, type FSWatcher, readdirSync, watch } from "node:fs";
import { mkdir, rm } from "node:fs/promises";
import { availableParallelism } from "node:os";
import { dirname, join, resolve } from "node:path";
import type PQueue from "p-queue";
import pino, { type Logger } from "pino";
import { agentEnvironment } from "../agent/environment.js";
import { Config } from "../contract/config.js";
import type { RunState } from "../contract/state.js";
import { errorText, InputError, LockedError, TermorchError } from "../errors.js";
import { removeStrayTemps } from "../fs/atomic.js";
import { acquireLock, type WorkspaceLock } from "../fs/lock.js";
import { LogNames } from "../fs/log-names.js";
import { sessionPrefix } from "../fs/names.js";
import { outputLogOf } from "../fs/output-log.js";
import { registerRun } from "../fs/registry.js";
import { readRunStateFile, TaskJournal } from "../fs/run-state-file.js";
import { SnapshotWriter } from "../fs/state-store.js";
import { StatusFiles } from "../fs/status-files.js";
import { commitIdentity, TERMORCH_IDENTITY } from "../git/repo.js";
import { WorktreePool } from "../git/worktree-pool.js";
import { checkAgentBinaries } from "../input/agent-binaries.js";
import { loadAssignments, type RunInput } from "../input/assignments-file.js";
import { loadConfig, loadConfigOrProblems, removedSettings } from "../input/config-file.js";
import { Ledger } from "../ledger/ledger.js";
import { commandDelivery, Notifier, type NotifyDelivery } from "../notify/notifier.js";
import { buildGraph } from "../plan/graph.js";
import { planWaves } from "../plan/waves.js";
import type { Redactor } from "../redact/redactor.js";
import { buildReport, type RunError, skippedMerge } from "../report/build.js";
import type { RemoteBackend } from "../runner/task-hosts.js";
import type { TaskRunner } from "../runner/task-runner.js";
import { TmuxRunner } from "../tmux/runner.js";
import { TmuxServer } from "../tmux/server.js";
import { type BackendChoice, type BackendKind, backendKindOf, connectBackend } from "./backend.js";
import { cleanUpMerged } from "./clean-up.js";
import type { GitRun, LiveRun, RunContext, RunSettings } from "./context.js";
import { dispatch } from "./dispatch.js";
import { killPoint, pausePoint } from "./faults.js";
import { clearMergeIntent } from "./merge-intent.js";
import { integrationBranchOf } from "./merge-recovery.js";
import { type MergeStageResult, mergeStage } from "./merge-stage.js";
import { snapshotRefs } from "./ref-watch.js";
import { errorOf, notWrittenNote, type RunResult, writeErrorReport, writeReport } from "./report-file.js";
import { looseReportBlocker, planRunDir, prepareRunDir, type RunDirPlan, runDirOf } from "./run-dir.js";
import { runRedaction } from "./run-redaction.js";
import type { ScheduleMode } from "./schedule.js";
import { RunStop, type StopReason } from "./stop.js";
import { attemptDirOf } from "./task-exec.js";
import { planTasks } from "./task-plan.js";
import { newTaskRun, type TaskRun } from "./task-run.js";
import type { TaskWorkspace } from "./task-workspace.js";
import { rewriteStatusFiles } from "./transition.js";
import { freshRunId, gitWorkspace } from "./workspace.js";

export type { RunSettings } from "./context.js";

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
  /** Warnings about the input that do not stop the run (e.g. a removed config key); default: the logger's warn. */
  onNotice?: (message: string) => void;
  /** Where attempts run; default: the local tmux runner on the run's socket. Tests inject a fake. */
  runner?: TaskRunner;
  /** Scale-out: the backend chosen on the command line, and how to reach its workers (docs/SCALING.md). */
  backend?: BackendChoice;
  /** The git operations on the workspace; default: git's. Tests inject one without processes. */
  workspace?: TaskWorkspace;
  /** Where the config's `notify` events go; default: its command. Tests inject a recorder. */
  notify?: NotifyDelivery;
  /** A crash-test fault (faults.ts): injected by tests, never taken from the environment. */
  fault?: string | null;
  /** Called once the run is planned, before anything starts. */
  onStart?: (info: StartInfo) => void;
  /** Called on every task state change with the current tasks (progress display). */
  onProgress?: (tasks: readonly TaskRun[], elapsedMs: number) => void;
  /**
   * Called once the report is written, before the clean-up after the merge (worktrees into the
   * pool, branches deleted): the daemon answers in its outbox here, so the answer never waits
   * for the clean-up.
   */
  onReport?: (result: RunResult) => Promise<void>;
}

export interface RunOptions extends DriveOptions {
  assignmentsFile: string;
  configFile?: string;
  /** Run directory; default: the assignments file's folder. */
  outDir?: string;
  /** Folder `workspace_dir` is relative to; default: the assignments file's folder. */
  baseDir?: string;
  /** Run id to use instead of the file's `run_id` (the daemon names runs by their folder). */
  runId?: string;
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

/** What a run announces once planned: enough to find its files and attach to its sessions. */
export interface StartInfo {
  runId: string;
  runDir: string;
  socket: string;
  tasks: number;
  waves: number;
  dryRun: boolean;
  sessionPrefix: string;
  resumed: boolean;
  /**
   * The folder the run directory would have been, had it not been inside a git work tree:
   * the run's files went to `runDir` under it instead, which git ignores.
   */
  keptApartFrom: string | null;
  /** The run id the file asked for, when it was in use and the run got a suffixed one instead. */
  renamedFrom: string | null;
  /** The run's redactor (its secrets and patterns), for whatever the caller prints from now on. */
  redactor: Redactor;
  /** Scale-out: the backend its tasks run on (e.g. `bullmq redis://…`); null when they run in local tmux. */
  hosts: string | null;
}

export type { RunResult } from "./report-file.js";

/** A run left to a later resume (detach): no report yet. */
export interface DetachedResult {
  detached: true;
  runId: string;
  runDir: string;
}

/** `termorch run`: validate, plan, run every task in tmux, collect, merge, report (docs/ARCHITECTURE.md: the pipeline). */
export async function runAssignments(opts: RunOptions): Promise<RunResult | DetachedResult> {
  const startedAt = Date.now();
  const env = opts.env ?? process.env;
  const cwd = opts.cwd ?? process.cwd();
  const file = resolve(cwd, opts.assignmentsFile);
  const requestedDir = resolve(cwd, opts.outDir ?? dirname(file));
  const baseDir = opts.baseDir ? resolve(cwd, opts.baseDir) : dirname(file);
  const log = opts.logger ?? pino({ level: "silent" });

  let input: RunInput;
  let backend: BackendKind = "local";
  let remote: RemoteBackend | null = null;
  let git: GitRun | null = null;
  let lock: WorkspaceLock | null = null;
  let dryRun = false;
  let plan: RunDirPlan | null = null;
  try {
    input = await loadAssignments(
      file,
      await loadConfigOrProblems(opts.configFile, env, cwd),
      startedAt,
      baseDir,
    );
    if (opts.runId) input = { ...input, runId: opts.runId };
    backend = backendKindOf(input, opts.backend);
    // A worker checks its own PATH: the agents need not be installed where the coordinator runs.
    if (backend === "local") checkAgentBinaries(input, env);
    notice(opts, log, input);
    dryRun = opts.dryRun ?? input.assignments.mode.dry_run;
    // Before anything starts: an unreachable Redis or a missing remote is an error of the input (exit 2).
    if (!dryRun) remote = await connectBackend(input, backend, opts.backend);
    // Two runs never work on one workspace at once (exit 4, or wait with --wait). The workspace
    // and the run directory are looked at once the lock is held: a run that waited starts from
    // the current HEAD, and finds the folder as the run it waited for left it.
    if (!dryRun) lock = await lockWorkspace(input.workspace, input.runId, requestedDir, opts);
    // A dry run writes its report only where that harms nothing; a real run needs a folder of its own.
    if (!dryRun) plan = await planRunDir(requestedDir, opts.outDir !== undefined);
    git = await (opts.workspace ?? gitWorkspace).inspect(
      input.workspace,
      input.assignments.environment.worktree_include,
      opts.allowDirty ?? false,
      dryRun,
      input.file,
      input.assignments.environment.worktree_copy,
    );
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
  } catch (error) {
    await lock?.release();
    // A locked workspace writes nothing: the run directory may be the holder's.
    if (!(error instanceof TermorchError) || error instanceof LockedError) throw error;
    const runId = opts.runId ?? (error instanceof InputError ? error.runId : null);
    return writeErrorReport(requestedDir, startedAt, errorOf(error), { runId });
  }
  let runDir = plan ? runDirOf(plan, input.runId) : requestedDir;
  let own = false;
  try {
    const settings: RunSettings = {
      max_parallel:
        opts.maxParallel ??
        input.assignments.environment.resource_limits.max_parallel ??
        input.config.defaults.max_parallel ??
        // Workers bound their own parallelism: every ready task is queued for them.
        (remote ? Math.max(1, input.assignments.tasks.length) : availableParallelism()),
      schedule: opts.schedule ?? "eager",
      fail_fast: opts.failFast ?? false,
      verify: opts.verify ?? input.assignments.mode.verify,
      sessions: opts.sessions ?? "default",
      keep_branches: opts.keepBranches ?? false,
      allow_dirty: opts.allowDirty ?? false,
      backend,
    };
    const socket = env.TERMORCH_TMUX_SOCKET || input.config.tmux.socket || "termorch";
    const runner = runnerFor(socket, input, opts);
    // Branches, worktrees and sessions are named by run id: a re-run of the same file must not
    // collide with what an earlier run kept for inspection, so it gets a suffix.
    const runId = plan
      ? await freshRunId(
          input.runId,
          git,
          runner,
          plan.kind === "apart" ? { apart: (id) => runDirOf(plan, id) } : { folder: plan.dir },
          env,
        )
      : input.runId;
    if (plan) {
      runDir = prepareRunDir(plan, runId);
      own = true;
      // Whoever finds the workspace locked is told the run id and folder this run really has.
      await lock?.update({ run_id: runId, run_dir: runDir });
    }
    const ctx = await buildLiveRun({
      input,
      git,
      runId,
      runDir,
      baseDir,
      settings,
      runner,
      startedAt,
      env,
      cwd,
      log,
      opts,
      remote,
      restored: null,
    });
    if (dryRun) {
      opts.onStart?.(startInfo(ctx, true, false, null));
      const report = ctx.reportOf(skippedMerge("dry run"), "skipped", 0, null, true);
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
    return await drive(ctx, opts, false, plan?.kind === "apart" ? plan.requested : null);
  } catch (error) {
    if (error instanceof TermorchError) throw error;
    // Something broke before the run could report for itself: the caller still gets a report.
    return writeErrorReport(runDir, startedAt, internalError(error), { own });
  } finally {
    await lock?.release();
  }
}

/** An unexpected failure as the report's `error`. */
export function internalError(error: unknown): RunError {
  return {
    kind: "internal",
    message: errorText(error),
    hint: "Run again with --debug for details; the report lists what finished.",
    problems: [],
  };
}

export interface ResumeOptions extends DriveOptions {
  runDir: string;
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
  const finished = (st: RunState): InputError =>
    new InputError(
      [
        {
          file: join(runDir, "state.json"),
          message: `run ${st.run_id} already finished (its report is ${st.report ?? "written"})`,
        },
      ],
      "Nothing to resume.",
    );
  const first = await readState(runDir);
  if (first.phase === "reported") throw finished(first);
  const loaded = first.config_file
    ? await loadConfig(first.config_file, env, first.cwd)
    : { config: Config.parse({}), file: null };
  const input = await loadAssignments(first.assignments_file, loaded, first.started_at, first.base_dir);
  notice(opts, log, input);
  if (input.sha256 !== first.assignments_sha256) {
    throw new InputError(
      [
        {
          file: first.assignments_file,
          message: `changed since run ${first.run_id} started; a resume finishes the run as it was planned`,
        },
      ],
      "Restore the file as it was, or start a new run with it.",
    );
  }
  // Its tasks run where they ran: a run on workers reconnects to them (its jobs are found by id).
  const remote = await connectBackend(input, first.options.backend, {
    ...opts.backend,
    kind: first.options.backend,
  });
  const lock = await lockWorkspace(input.workspace, first.run_id, runDir, opts);
  try {
    // Read again under the lock: whoever held it may have finished or advanced the run meanwhile.
    const state = await readState(runDir);
    if (state.phase === "reported") throw finished(state);
    const git = state.git
      ? {
          root: state.git.root,
          baseCommit: state.git.base_commit,
          targetRef: state.git.target_ref,
          prefix: state.git.prefix,
        }
      : null;
    const ctx = await buildLiveRun({
      input: { ...input, runId: state.run_id },
      git,
      runId: state.run_id,
      runDir,
      baseDir: state.base_dir,
      settings: state.options,
      runner: runnerFor(state.socket, input, opts),
      startedAt: state.started_at,
      env,
      cwd: state.cwd,
      log,
      opts,
      remote,
      restored: state.tasks,
    });
    await ctx.ledger.append("run.resumed", {
      pid: process.pid,
      tasks: state.tasks.map((t) => ({ id: t.id, state: t.state, attempts: t.attempts })),
    });
    return await drive(ctx, opts, true);
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

function notice(opts: DriveOptions, log: Logger, input: RunInput): void {
  for (const message of removedSettings(input.config, input.configFile))
    opts.onNotice ? opts.onNotice(message) : log.warn(message);
}

function runnerFor(socket: string, input: RunInput, opts: DriveOptions): TaskRunner {
  return (
    opts.runner ??
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

async function buildLiveRun(p: {
  input: RunInput;
  git: GitRun | null;
  runId: string;
  runDir: string;
  baseDir: string;
  settings: RunSettings;
  runner: TaskRunner;
  startedAt: number;
  env: Readonly<Record<string, string | undefined>>;
  /** Where the run was started from (kept for a resume to load the config the same way). */
  cwd: string;
  log: Logger;
  opts: DriveOptions;
  remote: RemoteBackend | null;
  restored: TaskRun[] | null;
}): Promise<LiveRun> {
  const { input, runId, runDir, settings, env } = p;
  const nodes = input.assignments.tasks;
  const graph = buildGraph(nodes);
  const plan = planWaves(nodes, graph.order);
  const { redactor, secretFinder } = runRedaction(input, env);
  // The caller's signals, `termorch cancel` (watchForCancel) and --fail-fast (dispatch) all stop the run here.
  const stop = new RunStop();
  const follow = (signal: AbortSignal | undefined, reason: StopReason): void => {
    if (signal?.aborted) stop.request(reason);
    else signal?.addEventListener("abort", () => stop.request(reason), { once: true });
  };
  follow(p.opts.signal, "cancel");
  follow(p.opts.detach, "detach");
  const privateDir = join(runDir, ".termorch", runId);
  const journal = new TaskJournal(join(privateDir, "tasks.jsonl"));
  const ctx: LiveRun = {
    // Opening reads only; the file appears with the first event, so a dry run writes none.
    ledger: await Ledger.open(join(runDir, "events.jsonl"), redactor),
    input,
    runId,
    runDir,
    privateDir,
    git: p.git,
    runner: p.runner,
    remote: p.remote,
    workspace: p.opts.workspace ?? gitWorkspace,
    pool: p.git
      ? new WorktreePool(
          p.git.root,
          {
            maxWorktrees: input.config.git.pool.max_worktrees,
            maxBytes: input.config.git.pool.max_disk_mb * 1024 * 1024,
          },
          { run_id: runId, run_dir: runDir },
        )
      : null,
    socketName: p.runner.socket,
    socketPath: "",
    status: new StatusFiles(join(runDir, "status")),
    logNames: new LogNames(join(runDir, "logs")),
    redactor,
    redactSources: [...redactor.sources],
    secretFinder,
    tasks: new Map(),
    depConflicts: [],
    plans: planTasks(input, { runId, runDir, gitPrefix: p.git?.prefix ?? null, processEnv: env }),
    verify: settings.verify,
    keepBranches: settings.keep_branches,
    fault: p.opts.fault ?? null,
    resumed: p.restored !== null,
    identity: p.git ? await commitIdentity(p.git.root, input.config.git.author) : TERMORCH_IDENTITY,
    killGraceMs: input.config.defaults.kill_grace_s * 1000,
    maxLogBytes:
      input.assignments.environment.resource_limits.max_log_bytes ?? input.config.defaults.max_log_bytes,
    processEnv: env,
    stop,
    persist: () => writer.save(),
    journal,
    saveFinal: (last) => writer.finish(last),
    log: p.log.child({ run: runId }),
    now: Date.now,
    onChange: () => p.opts.onProgress?.([...ctx.tasks.values()], Date.now() - p.startedAt),
    notifier: new Notifier({
      config: input.config.notify,
      runId,
      runDir,
      redactor,
      now: Date.now,
      deliver: p.opts.notify ?? notifyCommand(input, runId, runDir, env, p.cwd),
      onFailure: (failure) => {
        // At error level: the CLI shows it by default, so a cron job's log says it.
        ctx.log.error({ ...failure }, "notification failed; the run goes on");
        ctx.ledger
          .append("notify.failed", { ...failure }, failure.task_id ?? undefined)
          .catch((error: unknown) =>
            ctx.log.warn({ err: errorText(error) }, "could not record the failed notification"),
          );
      },
    }),
    settings,
    plan,
    order: graph.order,
    baseDir: p.baseDir,
    startedAt: p.startedAt,
    state: () => ({
      schema_version: 1,
      run_id: runId,
      phase: "running",
      pid: process.pid,
      assignments_file: input.file,
      base_dir: p.baseDir,
      run_dir: runDir,
      workspace: input.workspace,
      socket: ctx.socketName,
      socket_path: ctx.socketPath,
      assignments_sha256: input.sha256,
      config_file: input.configFile,
      cwd: p.cwd,
      options: settings,
      git: ctx.git
        ? {
            root: ctx.git.root,
            base_commit: ctx.git.baseCommit,
            target_ref: ctx.git.targetRef,
            prefix: ctx.git.prefix,
          }
        : null,
      started_at: p.startedAt,
      updated_at: Date.now(),
      waves: plan.waves,
      tasks: [...ctx.tasks.values()],
      task_journal: journal.path,
      report: null,
      exit_code: null,
    }),
    reportOf: (merge, validation, peak, error, dryRun = false) =>
      ctx.redactor.redactDeep(
        buildReport({
          runId,
          startedAt: p.startedAt,
          finishedAt: Date.now(),
          dryRun,
          waves: plan.waves,
          tasks: [...ctx.tasks.values()],
          outputLogs: new Map(
            [...ctx.tasks.values()].map((t) => [
              t.id,
              t.logs ? outputLogOf(ctx.runDir, t.logs, ctx.plans.get(t.id)?.tty ?? false) : "stderr",
            ]),
          ),
          merge: { ...merge, conflicts: [...ctx.depConflicts, ...merge.conflicts] },
          validation,
          cancelled: stop.cancelled,
          error,
          workspace: input.workspace,
          tmuxSocket: dryRun ? null : ctx.socketName,
          criticalPath: plan.criticalPath,
          maxParallel: settings.max_parallel,
          peakParallelism: peak,
        }),
      ),
  };
  // Transitions that come while a write is in flight are coalesced into the next write.
  const writer = new SnapshotWriter(join(runDir, "state.json"), () => ctx.state());
  const restored = new Map((p.restored ?? []).map((t) => [t.id, t]));
  for (const task of nodes) {
    const t = restored.get(task.id);
    ctx.tasks.set(
      task.id,
      t
        ? withLatestAttempt(ctx, t)
        : newTaskRun(task.id, task.agent, task.dependencies, ctx.plans.get(task.id)!.argv),
    );
  }
  return ctx;
}

/**
 * The config's notify command. It gets what a run-level gate gets: the base variables, the
 * assignment's `env_vars` (where a webhook's address or token is passed) and the run's
 * TERMORCH_RUN_ID and TERMORCH_RUN_DIR, which also let `termorch clean` find one that outlived
 * its driver. No agent's or task's `env`: those belong to one task, and an event is the run's.
 */
function notifyCommand(
  input: RunInput,
  runId: string,
  runDir: string,
  env: Readonly<Record<string, string | undefined>>,
  cwd: string,
): NotifyDelivery {
  const notify = input.config.notify;
  if (!notify) return async () => null;
  return commandDelivery({
    command: notify.command,
    env: agentEnvironment({
      processEnv: env,
      envVars: input.assignments.environment.env_vars,
      agentEnv: {},
      taskEnv: {},
      termorch: { TERMORCH_RUN_ID: runId, TERMORCH_RUN_DIR: runDir },
      config: input.config,
    }).env,
    cwd,
    timeoutMs: notify.timeout_s * 1000,
  });
}

/**
 * state.json may trail the launches (it is written lazily); the attempt folders do not (a launch
 * creates its folder before the session). A restored task is brought up to its latest attempt.
 */
function withLatestAttempt(ctx: LiveRun, t: TaskRun): TaskRun {
  if (t.state === "success" || t.state === "failed" || t.state === "skipped") return t;
  let latest = t.attempts;
  try {
    for (const name of readdirSync(join(ctx.privateDir, "tasks", t.id))) {
      if (/^\d+$/.test(name)) latest = Math.max(latest, Number(name));
    }
  } catch {}
  if (latest === t.attempts && (latest === 0 || t.attemptDir !== null)) return t;
  return {
    ...t,
    attempts: latest,
    attemptDir: attemptDirOf(ctx, t.id, latest),
    logs: latest === t.attempts ? t.logs : null,
  };
}

function startInfo(ctx: LiveRun, dryRun: boolean, resumed: boolean, keptApartFrom: string | null): StartInfo {
  return {
    runId: ctx.runId,
    runDir: ctx.runDir,
    keptApartFrom,
    renamedFrom: ctx.input.runId === ctx.runId ? null : ctx.input.runId,
    socket: ctx.socketName,
    tasks: ctx.tasks.size,
    waves: ctx.plan.waves.length,
    dryRun,
    sessionPrefix: sessionPrefix(ctx.runId),
    resumed,
    redactor: ctx.redactor,
    hosts: ctx.remote?.hosts.name ?? null,
  };
}

/** Schedule, merge, report, clean up: the part of a run that `resume` repeats. */
async function drive(
  ctx: LiveRun,
  opts: DriveOptions,
  resumed: boolean,
  keptApartFrom: string | null = null,
): Promise<RunResult | DetachedResult> {
  const { runDir, privateDir, ledger } = ctx;
  await pausePoint(ctx.fault, runDir, "pause-before-drive");
  ctx.socketPath = await ctx.runner.socketPath();
  opts.onStart?.(startInfo(ctx, false, resumed, keptApartFrom));
  await Promise.all(["logs", "status", "artifacts"].map((d) => mkdir(join(runDir, d), { recursive: true })));
  await mkdir(privateDir, { recursive: true, mode: 0o700 });
  if (!resumed) {
    await ledger.append("run.accepted", {
      run_id: ctx.runId,
      assignments: ctx.input.file,
      workspace: ctx.input.workspace,
      tasks: ctx.input.assignments.tasks.map((t) => ({
        id: t.id,
        agent: t.agent,
        dependencies: t.dependencies,
      })),
      base_commit: ctx.git?.baseCommit ?? null,
      target: ctx.git?.targetRef ?? null,
    });
    await killPoint(ctx.fault, "kill-after-accepted");
    await ledger.append("run.planned", {
      waves: ctx.plan.waves,
      critical_path: ctx.plan.criticalPath,
      max_parallel: ctx.settings.max_parallel,
      schedule: ctx.settings.schedule,
      argv: Object.fromEntries([...ctx.tasks.values()].map((t) => [t.id, t.argv])),
    });
    await ctx.status.clear(ctx.tasks.keys());
    // Before any agent runs: what they change in the user's repository is found against it
    // (the list taken with the base commit, see inspectWorkspace).
    await snapshotRefs(ctx);
  } else {
    // What a killed driver left half-written: temp copies of status files and of the run's own
    // files, and status files older than the journal.
    const stray = [...(await removeStrayTemps(join(runDir, "status"))), ...(await removeStrayTemps(runDir))];
    if (stray.length > 0) ctx.log.info({ files: stray }, "removed what an interrupted write left");
    rewriteStatusFiles(ctx, ctx.tasks.values());
  }
  await ctx.persist();
  await registerRun(
    {
      run_id: ctx.runId,
      run_dir: runDir,
      socket: ctx.socketName,
      pid: process.pid,
      started_at: new Date(ctx.startedAt).toISOString(),
    },
    ctx.processEnv,
  ).catch((error: unknown) =>
    // Only `termorch status <id>` and friends miss it; the run itself goes on.
    ctx.log.warn({ err: errorText(error) }, "could not register the run in the per-user registry"),
  );
  // `termorch cancel` drops a file here; watching it needs no port and works for any driver.
  const cancelWatch = watchForCancel(ctx);

  let peak = 0;
  let internal: RunError | null = null;
  try {
    const dispatched = await dispatch(ctx, opts.hostQueue);
    if (dispatched === "detached") {
      cancelWatch?.close();
      return detach(ctx);
    }
    peak = dispatched;
  } catch (error) {
    internal = internalError(error);
    ctx.log.error({ err: internal.message }, "run stopped by an internal error");
  } finally {
    cancelWatch?.close();
  }

  let stage: MergeStageResult = {
    merge: skippedMerge("the run stopped before the merge"),
    validation: "skipped",
  };
  if (internal === null) {
    await pausePoint(ctx.fault, runDir, "pause-before-merge");
    try {
      const merged = await mergeStage(ctx, ctx.order);
      if (merged === "detached") return detach(ctx);
      stage = merged;
    } catch (error) {
      internal = { kind: "internal", message: `merge failed: ${errorText(error)}`, hint: null, problems: [] };
      stage = { merge: { ...skippedMerge(internal.message), result: "failed" }, validation: "skipped" };
    }
  }
  await ledger.append(`merge.${stage.merge.result}`, { ...stage.merge, validation: stage.validation });
  const report = ctx.reportOf(stage.merge, stage.validation, peak, internal);
  await ledger.append("report.written", {
    exit_code: report.exit_code,
    completed: report.summary.completed,
    failed_tasks: report.summary.failed_tasks,
    skipped_tasks: report.summary.skipped_tasks,
    cancelled_tasks: report.summary.cancelled_tasks,
  });
  await killPoint(ctx.fault, "kill-before-report");
  const result = await writeReport(runDir, report);
  await killPoint(ctx.fault, "kill-after-report");
  await ctx.saveFinal({
    ...ctx.state(),
    // A move of the target left unfinished keeps the run open: `termorch resume` finishes it.
    phase: stage.unfinished ? "running" : "reported",
    // Complete now: the task journal is no longer needed.
    task_journal: null,
    report: result.reportPath,
    exit_code: report.exit_code,
  });
  // Only once state.json says reported: a crash before that leaves a resume the record of a
  // move that happened, which it then reports rather than merging again.
  if (!stage.unfinished) await clearMergeIntent(ctx);
  ctx.journal.close();
  await rm(ctx.journal.path, { force: true }).catch(() => {});
  // The prompts as the agents got them, unredacted: no one needs them once the run is reported
  // (artifacts/<id>/prompt.md keeps the redacted text).
  await rm(join(privateDir, "prompts"), { recursive: true, force: true }).catch(() => {});
  // Its failure is the caller's to handle (the daemon answers again once the run returns).
  await opts
    .onReport?.(result)
    .catch((error: unknown) => ctx.log.warn({ err: errorText(error) }, "could not hand the report on"));
  // Awaited (bounded by notify.timeout_s): a cron job's run returns once it was told.
  await ctx.notifier.runFinished(report, result.reportPath);
  const merged = stage.merge.result === "success" ? stage.merge.resultCommit : null;
  if (merged && ctx.git && !ctx.keepBranches) {
    const cleaned = await cleanUpMerged(ctx, ctx.order, integrationBranchOf(ctx), merged);
    await ledger.append("run.cleaned", { ...cleaned });
  }
  // Worktrees still on their way into the pool (a run that did not merge) are not left half-moved.
  await ctx.pool?.settled();
  await ledger.close();
  const keptSessions = await closeSessions(ctx, ctx.settings.sessions);
  if (internal === null && !ctx.stop.cancelled)
    await rm(join(privateDir, "tasks"), { recursive: true, force: true }).catch(() => {});
  return { ...result, keptSessions };
}

/** Leaves the run to a later resume: state persisted, agents still running in tmux, no report. */
async function detach(ctx: LiveRun): Promise<DetachedResult> {
  await ctx.pool?.settled();
  await ctx.saveFinal();
  ctx.journal.close();
  // Failures already queued are still told (bounded); the run's own end comes with its resume.
  await ctx.notifier.drained();
  await ctx.ledger.append("run.detached", { pid: process.pid });
  await ctx.ledger.close();
  return { detached: true, runId: ctx.runId, runDir: ctx.runDir };
}

function watchForCancel(ctx: LiveRun): FSWatcher | null {
  const file = join(ctx.privateDir, "cancel");
  const check = (): void => {
    if (!ctx.stop.cancelled && existsSync(file)) {
      ctx.log.warn("cancel requested");
      void ctx.ledger.append("run.cancel_requested", { by: "cancel file" });
      ctx.stop.request("cancel");
    }
  };
  try {
    // Only the cancel file matters: the task journal beside it changes at every transition.
    const watcher = watch(ctx.privateDir, (_event, name) => {
      if (name === null || name === "cancel") check();
    });
    watcher.on("error", () => {});
    check();
    return watcher;
  } catch {
    return null;
  }
}

/**
 * Successful sessions close once the report is written; failed ones stay for inspection unless
 * --clean. Returns the task sessions still alive afterwards (a lost task's session is gone), so
 * the CLI names only sessions one can attach to.
 */
async function closeSessions(ctx: RunContext, policy: "default" | "keep" | "clean"): Promise<string[]> {
  if (policy !== "keep") {
    const closing = [...ctx.tasks.values()].filter(
      (t) => t.session && t.attempts > 0 && (policy === "clean" || t.state === "success"),
    );
    await ctx.runner
      .close(closing.map((t) => t.session!))
      .catch((error: unknown) =>
        ctx.log.warn({ err: errorText(error) }, "could not close the task sessions"),
      );
  }
  const live = await ctx.runner.openSessions().catch((error: unknown) => {
    ctx.log.warn({ err: errorText(error) }, "could not list the sessions left open");
    return new Set<string>();
  });
  await ctx.runner
    .closeIfIdle()
    .catch((error: unknown) =>
      ctx.log.warn({ err: errorText(error) }, "could not stop the idle tmux server"),
    );
  return [...ctx.tasks.values()].flatMap((t) => (t.session && live.has(t.session) ? [t.session] : []));
}
