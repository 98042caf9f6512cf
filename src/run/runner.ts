import { existsSync } from "node:fs";
import { mkdir, rm } from "node:fs/promises";
import { availableParallelism } from "node:os";
import { dirname, join, resolve } from "node:path";
import PQueue from "p-queue";
import pino, { type Logger } from "pino";
import { secretValuesOf } from "../agent/environment.js";
import type { Report } from "../contract/report.js";
import { InputError, LockedError, TermorchError } from "../errors.js";
import { writeJsonAtomic } from "../fs/atomic.js";
import { acquireLock, type WorkspaceLock } from "../fs/lock.js";
import { LogNames } from "../fs/log-names.js";
import { StatusFiles } from "../fs/status-files.js";
import { dirtyTrackedFiles, git as gitCmd, repoInfo, requireGitVersion } from "../git/repo.js";
import { loadAssignments, type RunInput } from "../input/assignments-file.js";
import { loadConfig } from "../input/config-file.js";
import { Ledger } from "../ledger/ledger.js";
import { buildGraph } from "../plan/graph.js";
import { type Plan, planWaves } from "../plan/waves.js";
import { Redactor } from "../redact/redactor.js";
import { buildReport, type MergeOutcome, type RunError, skippedMerge } from "../report/build.js";
import { TmuxServer } from "../tmux/server.js";
import { type GitRun, type RunContext, worktreesRoot } from "./context.js";
import { type MergeStageResult, mergeStage } from "./merge-stage.js";
import { Schedule, type ScheduleMode } from "./schedule.js";
import { errorText, executeTask, skipTask, taskArgv } from "./task-exec.js";
import { newTaskRun, type TaskRun } from "./task-run.js";

export interface RunOptions {
  assignmentsFile: string;
  configFile?: string;
  /** Run directory; default: the assignments file's folder. */
  outDir?: string;
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
  /** Wait for another run's workspace lock instead of failing with exit 4. */
  wait?: boolean;
  /** Aborting cancels the run: running sessions are ended, the report is still written. */
  signal?: AbortSignal;
  env?: Readonly<Record<string, string | undefined>>;
  cwd?: string;
  logger?: Logger;
  /** Called once the run is planned, before anything starts. */
  onStart?: (info: StartInfo) => void;
  /** Called on every task state change with the current tasks (progress display). */
  onProgress?: (tasks: readonly TaskRun[], elapsedMs: number) => void;
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
}

export interface RunResult {
  report: Report;
  /** Where the report was written, or null when the run directory was not writable. */
  reportPath: string | null;
  exitCode: number;
  runDir: string;
}

/** `termorch run`: validate, plan, run every task in tmux, collect, report (DESIGN section 3). */
export async function runAssignments(opts: RunOptions): Promise<RunResult> {
  const startedAt = Date.now();
  const env = opts.env ?? process.env;
  const cwd = opts.cwd ?? process.cwd();
  const file = resolve(cwd, opts.assignmentsFile);
  const runDir = resolve(cwd, opts.outDir ?? dirname(file));
  const log = opts.logger ?? pino({ level: "silent" });

  let input: RunInput;
  let git: GitRun | null = null;
  let lock: WorkspaceLock | null = null;
  try {
    const { config } = await loadConfig(opts.configFile, env, cwd);
    input = await loadAssignments(file, config, startedAt);
    const dryRun = opts.dryRun ?? input.assignments.mode.dry_run;
    // Two runs never work on one workspace at once (exit 4, or wait with --wait). The workspace
    // is inspected once the lock is held, so a run that waited starts from the current HEAD.
    if (!dryRun) {
      lock = await acquireLock(
        input.workspace,
        { run_id: input.runId, run_dir: runDir },
        { wait: opts.wait ?? false, ...(opts.signal ? { signal: opts.signal } : {}) },
      );
    }
    git = await inspectWorkspace(input.workspace, opts.allowDirty ?? false, dryRun);
  } catch (error) {
    await lock?.release();
    // A locked workspace writes nothing: the run directory may be the holder's.
    if (!(error instanceof TermorchError) || error instanceof LockedError) throw error;
    return writeErrorReport(runDir, startedAt, errorOf(error), error.exitCode);
  }
  try {
    return await runLocked(opts, { input, git, file, runDir, startedAt, env, log });
  } finally {
    await lock?.release();
  }
}

async function runLocked(
  opts: RunOptions,
  s: {
    input: RunInput;
    git: GitRun | null;
    file: string;
    runDir: string;
    startedAt: number;
    env: Readonly<Record<string, string | undefined>>;
    log: Logger;
  },
): Promise<RunResult> {
  const { input, git, file, runDir, startedAt, env, log } = s;
  const nodes = input.assignments.tasks;
  const graph = buildGraph(nodes);
  const plan = planWaves(nodes, graph.order);
  const dryRun = opts.dryRun ?? input.assignments.mode.dry_run;
  const verify = opts.verify ?? input.assignments.mode.verify;
  const maxParallel =
    opts.maxParallel ??
    input.assignments.environment.resource_limits.max_parallel ??
    input.config.defaults.max_parallel ??
    availableParallelism();
  const socketName = env.TERMORCH_TMUX_SOCKET || input.config.tmux.socket || "termorch";

  const secrets = secretValuesOf(
    env,
    [
      ...input.assignments.environment.env_vars,
      ...input.assignments.tasks.flatMap((t) => Object.entries(t.env).map(([k, v]) => `${k}=${v}`)),
    ],
    input.config,
  );
  const redactor = Redactor.from(input.config.redact, secrets);
  // One controller stops the run: the caller's signal (cancel: exit 130) or --fail-fast.
  const stopper = new AbortController();
  const cancelled = (): boolean => opts.signal?.aborted ?? false;
  if (opts.signal?.aborted) stopper.abort();
  else opts.signal?.addEventListener("abort", () => stopper.abort(), { once: true });
  const tmux = new TmuxServer({
    socket: socketName,
    historyLimit: input.config.defaults.history_limit,
    size: input.config.defaults.session_size as `${number}x${number}`,
  });
  // Branches, worktrees and sessions are named by run id: a re-run of the same file must not
  // collide with what an earlier run kept for inspection, so it gets a suffix.
  const runId = dryRun ? input.runId : await freshRunId(input.runId, git, tmux);
  const privateDir = join(runDir, ".termorch", runId);

  // Opening reads only; the file appears with the first event, so a dry run writes none.
  const ledger = await Ledger.open(join(runDir, "events.jsonl"), redactor);
  const ctx: RunContext = {
    ledger,
    input,
    runId,
    runDir,
    privateDir,
    git,
    tmux,
    socketName,
    socketPath: "",
    status: new StatusFiles(join(runDir, "status")),
    logNames: new LogNames(join(runDir, "logs")),
    redactor,
    redactSources: [...redactor.sources],
    tasks: new Map(),
    running: new Set(),
    depConflicts: [],
    resolved: new Map(input.tasks.map((r) => [r.task.id, r])),
    verify,
    keepBranches: opts.keepBranches ?? false,
    fault: env.TERMORCH_FAULT || null,
    killGraceMs: input.config.defaults.kill_grace_s * 1000,
    maxLogBytes:
      input.assignments.environment.resource_limits.max_log_bytes ?? input.config.defaults.max_log_bytes,
    processEnv: env,
    signal: stopper.signal,
    log: log.child({ run: runId }),
    now: Date.now,
    onChange: () => opts.onProgress?.([...ctx.tasks.values()], Date.now() - startedAt),
  };
  for (const task of nodes)
    ctx.tasks.set(task.id, newTaskRun(task.id, task.agent, task.dependencies, taskArgv(ctx, task.id)));

  const reportOf = (
    merge: MergeOutcome,
    validation: Report["summary"]["validation"],
    peak: number,
    error: RunError | null,
  ): Report =>
    ctx.redactor.redactDeep(
      buildReport({
        runId,
        startedAt,
        finishedAt: Date.now(),
        dryRun,
        waves: plan.waves,
        tasks: [...ctx.tasks.values()],
        merge: { ...merge, conflicts: [...ctx.depConflicts, ...merge.conflicts] },
        validation,
        cancelled: cancelled(),
        error,
        workspace: input.workspace,
        tmuxSocket: dryRun ? null : socketName,
        criticalPath: plan.criticalPath,
        maxParallel,
        peakParallelism: peak,
      }),
    );

  opts.onStart?.({
    runId,
    runDir,
    socket: socketName,
    tasks: nodes.length,
    waves: plan.waves.length,
    dryRun,
    sessionPrefix: `termorch-${runId}-`,
  });
  if (dryRun) {
    const report = reportOf(skippedMerge("dry run"), "skipped", 0, null);
    return writeReport(runDir, report);
  }

  await ledger.append("run.accepted", {
    run_id: runId,
    assignments: file,
    workspace: input.workspace,
    tasks: nodes.map((t) => ({ id: t.id, agent: t.agent, dependencies: t.dependencies })),
    base_commit: git?.baseCommit ?? null,
    target: git?.targetRef ?? null,
  });
  await ledger.append("run.planned", {
    waves: plan.waves,
    critical_path: plan.criticalPath,
    max_parallel: maxParallel,
    schedule: opts.schedule ?? "eager",
    argv: Object.fromEntries([...ctx.tasks.values()].map((t) => [t.id, t.argv])),
  });
  await Promise.all(["logs", "status", "artifacts"].map((d) => mkdir(join(runDir, d), { recursive: true })));
  await mkdir(privateDir, { recursive: true, mode: 0o700 });
  await ctx.status.clear(ctx.tasks.keys());
  let peak = 0;
  let internal: RunError | null = null;
  try {
    ctx.socketPath = await tmux.socketPath();
    peak = await schedule(ctx, plan, {
      maxParallel,
      mode: opts.schedule ?? "eager",
      failFast: opts.failFast ?? false,
      stop: () => stopper.abort(),
    });
  } catch (error) {
    internal = {
      kind: "internal",
      message: error instanceof Error ? error.message : String(error),
      hint: "Run again with --debug for details; the report lists what finished.",
      problems: [],
    };
    ctx.log.error({ err: internal.message }, "run stopped by an internal error");
  }

  let stage: MergeStageResult = {
    merge: skippedMerge("the run stopped before the merge"),
    validation: "skipped",
  };
  if (internal === null) {
    try {
      stage = await mergeStage(ctx, graph.order);
    } catch (error) {
      internal = {
        kind: "internal",
        message: `merge failed: ${errorText(error)}`,
        hint: null,
        problems: [],
      };
      stage = { merge: { ...skippedMerge(internal.message), result: "failed" }, validation: "skipped" };
    }
  }
  await ledger.append(`merge.${stage.merge.result}`, { ...stage.merge, validation: stage.validation });
  const report = reportOf(stage.merge, stage.validation, peak, internal);
  await ledger.append("report.written", {
    exit_code: report.exit_code,
    completed: report.summary.completed,
    failed_tasks: report.summary.failed_tasks,
  });
  const result = await writeReport(runDir, report);
  await closeSessions(ctx, opts.sessions ?? "default");
  if (internal === null && !cancelled())
    await rm(join(privateDir, "tasks"), { recursive: true, force: true }).catch(() => {});
  return result;
}

/** The run id, or the first `<id>-<n>` that no branch, worktree folder or tmux session uses yet. */
async function freshRunId(id: string, repo: GitRun | null, tmux: TmuxServer): Promise<string> {
  const live = new Set((await tmux.listPanes()).map((p) => p.run));
  for (let n = 1; ; n++) {
    const suffix = n === 1 ? "" : `-${n}`;
    const candidate = `${id.slice(0, 64 - suffix.length)}${suffix}`;
    if (live.has(candidate) || existsSync(join(worktreesRoot(), candidate))) continue;
    if (repo) {
      const refs = await gitCmd(repo.root, [
        "for-each-ref",
        "--count=1",
        "--format=%(refname)",
        `refs/heads/termorch/${candidate}/`,
      ]);
      if (refs.stdout.trim()) continue;
    }
    return candidate;
  }
}

/** Runs the schedule to its end through a p-queue bounded by max_parallel; returns the peak parallelism. */
async function schedule(
  ctx: RunContext,
  plan: Plan,
  opts: { maxParallel: number; mode: ScheduleMode; failFast: boolean; stop: () => void },
): Promise<number> {
  const sched = new Schedule(ctx.input.assignments.tasks, {
    mode: opts.mode,
    priority: plan.remaining,
    level: plan.level,
  });
  const queue = new PQueue({ concurrency: opts.maxParallel });
  let active = 0;
  let peak = 0;
  let stopping = false;

  const skip = async (
    ids: string[],
    reason: "dependency_failed" | "cancelled",
    why: (id: string) => string,
  ): Promise<void> => {
    for (const id of ids) await skipTask(ctx, ctx.tasks.get(id)!, reason, why(id));
  };
  const stop = async (why: string): Promise<void> => {
    if (stopping) return;
    stopping = true;
    await skip(sched.skipPending(), "cancelled", () => why);
  };

  let failure: unknown = null;
  const inflight = new Set<Promise<void>>();
  const release = (): void => {
    if (stopping) return;
    for (const id of sched.ready()) {
      sched.start(id);
      const chain: Promise<void> = queue
        .add(
          async () => {
            if (stopping || ctx.signal.aborted) {
              await skipTask(ctx, ctx.tasks.get(id)!, "cancelled", "the run stopped before it started");
              return { ok: false };
            }
            active++;
            peak = Math.max(peak, active);
            try {
              return await executeTask(ctx, id);
            } finally {
              active--;
            }
          },
          { priority: plan.remaining.get(id) ?? 0 },
        )
        .then(async (outcome) => {
          const ok = outcome?.ok ?? false;
          const skipped = sched.complete(id, ok);
          await skip(
            skipped,
            "dependency_failed",
            (s) => `a dependency failed (${failedDepsOf(ctx, s).join(", ") || id})`,
          );
          if (!ok && opts.failFast) {
            await stop(`--fail-fast: task ${id} failed`);
            opts.stop();
          }
          release();
        })
        .catch((error: unknown) => {
          failure ??= error;
          void stop("internal error");
        })
        .finally(() => inflight.delete(chain));
      inflight.add(chain);
    }
  };
  const onAbort = (): void => void stop("the run was cancelled before it started");
  ctx.signal.addEventListener("abort", onAbort, { once: true });
  release();
  // Wait for every task *and* its completion handler (which skips dependents and releases more
  // work): the queue alone goes idle before the handler of its last task has run.
  while (inflight.size > 0) await Promise.all([...inflight]);
  ctx.signal.removeEventListener("abort", onAbort);
  if (failure) throw failure;
  return peak;
}

function failedDepsOf(ctx: RunContext, id: string): string[] {
  return ctx.tasks.get(id)!.dependencies.filter((d) => {
    const s = ctx.tasks.get(d)!.state;
    return s === "failed" || s === "skipped";
  });
}

/** Successful sessions close once the report is written; failed ones stay for inspection unless --clean. */
async function closeSessions(ctx: RunContext, policy: "default" | "keep" | "clean"): Promise<void> {
  if (policy !== "keep") {
    const closing = [...ctx.tasks.values()].filter(
      (t) => t.session && t.attempts > 0 && (policy === "clean" || t.state === "success"),
    );
    await Promise.all(closing.map((t) => ctx.tmux.killSession(t.session!).catch(() => {})));
  }
  await ctx.tmux.closeIfIdle().catch(() => {});
}

/** Refuses what would make the run unsafe before anything starts; returns the git side or null. */
async function inspectWorkspace(
  workspace: string,
  allowDirty: boolean,
  dryRun: boolean,
): Promise<GitRun | null> {
  const info = await repoInfo(workspace);
  if (!info) return null;
  await requireGitVersion();
  if (info.head === null) {
    throw new InputError([
      {
        message: `the workspace ${info.root} is a git repository without commits; commit something first (tasks branch off HEAD)`,
      },
    ]);
  }
  if (!allowDirty && !dryRun) {
    const dirty = await dirtyTrackedFiles(info.root);
    if (dirty.length > 0) {
      throw new InputError(
        [
          {
            message: `the workspace ${info.root} has uncommitted changes to tracked files: ${dirty.slice(0, 20).join(", ")}${dirty.length > 20 ? ` and ${dirty.length - 20} more` : ""}`,
          },
        ],
        "Commit or stash them, or pass --allow-dirty (the merge never overwrites uncommitted work).",
      );
    }
  }
  return { root: info.root, baseCommit: info.head, targetRef: info.ref };
}

function errorOf(error: TermorchError): RunError {
  return {
    kind: error.kind,
    message: error.message,
    hint: error instanceof InputError ? error.hint : null,
    problems: error instanceof InputError ? error.problems : [],
  };
}

async function writeErrorReport(
  runDir: string,
  startedAt: number,
  error: RunError,
  exitCode: number,
): Promise<RunResult> {
  // Never create folders for a run that did not start: the report goes only where the run directory exists.
  const writable = existsSync(runDir);
  const report = buildReport({
    runId: null,
    startedAt,
    finishedAt: Date.now(),
    dryRun: false,
    waves: [],
    tasks: [],
    merge: skippedMerge("the run did not start"),
    validation: "skipped",
    cancelled: false,
    error,
    workspace: null,
    tmuxSocket: null,
    criticalPath: [],
    maxParallel: 0,
    peakParallelism: 0,
  });
  report.exit_code = exitCode;
  return writable ? writeReport(runDir, report) : { report, reportPath: null, exitCode, runDir };
}

/** The report is written atomically and last; an unwritable run directory still returns it. */
async function writeReport(runDir: string, report: Report): Promise<RunResult> {
  const path = join(runDir, "execution_report.json");
  try {
    await writeJsonAtomic(path, report);
    return { report, reportPath: path, exitCode: report.exit_code, runDir };
  } catch {
    return { report, reportPath: null, exitCode: report.exit_code, runDir };
  }
}
