import { readdirSync } from "node:fs";
import { join } from "node:path";
import type { Logger } from "pino";
import { agentEnvironment } from "../agent/environment.js";
import type { MergeProgress, RunState } from "../contract/state.js";
import { errorText } from "../errors.js";
import { LogNames } from "../fs/log-names.js";
import { TaskJournal } from "../fs/run-state-file.js";
import { SnapshotWriter } from "../fs/state-store.js";
import { StatusFiles } from "../fs/status-files.js";
import { WorktreePool } from "../git/worktree-pool.js";
import type { RunInput } from "../input/assignments-file.js";
import { Ledger } from "../ledger/ledger.js";
import { commandDelivery, Notifier, type NotifyDelivery } from "../notify/notifier.js";
import type { TaskRunner } from "../runner/task-runner.js";
import { attemptDirOf } from "../task/attempt.js";
import { gitWorkspace } from "../task/git-workspace.js";
import type { Ports } from "../task/ports.js";
import { TaskRecorder } from "../task/recorder.js";
import type { RunPlan } from "../task/run-plan.js";
import type { runRedaction } from "../task/run-redaction.js";
import { RunStop, type StopReason } from "../task/stop.js";
import { newTaskRun, type TaskRun } from "../task/task-run.js";
import type { TaskWorkspace } from "../task/workspace.js";
import { runStateOf } from "./run-state.js";

/** A run being driven: its four values, and the driver's own files (the task journal, state.json). */
export interface OpenRun {
  run: RunPlan;
  ports: Ports;
  stop: RunStop;
  recorder: TaskRecorder;
  journal: TaskJournal;
  /** state.json, written coalesced; `finish` writes it one last time. */
  stateFile: SnapshotWriter<RunState>;
  /** What state.json tells the operator while the run goes on (`termorch status`). */
  notices: string[];
  /** Where the merge stage is (state.json's `merge`, for the views); null outside it. */
  mergeProgress: { current: MergeProgress | null };
}

/**
 * Opens what a planned run works through: its ledger, pool, notifier, the stop that follows the
 * caller's signals, and the recorder of its tasks (restored ones brought up to their latest
 * attempt). Opening reads only: the ledger's file appears with its first event, so a dry run
 * writes nothing.
 */
export async function openRun(
  run: RunPlan,
  o: {
    runner: TaskRunner;
    workspace?: TaskWorkspace;
    notify?: NotifyDelivery;
    log: Logger;
    signal?: AbortSignal;
    detach?: AbortSignal;
    onProgress?: (tasks: readonly Readonly<TaskRun>[], elapsedMs: number) => void;
    /** The run's redactor and secrets finder (runRedaction): its sources are in the plan too. */
    redaction: ReturnType<typeof runRedaction>;
    restored: readonly TaskRun[] | null;
    /** Where an earlier process left the merge (a resume's: a wait for its approval goes on). */
    restoredMerge?: MergeProgress | null;
  },
): Promise<OpenRun> {
  const { input, runId, runDir } = run;
  const { redactor, secretFinder } = o.redaction;
  // The caller's signals, `termorch cancel` (watchForCancel) and --fail-fast (dispatch) all stop the run here.
  const stop = new RunStop();
  const follow = (signal: AbortSignal | undefined, reason: StopReason): void => {
    if (signal?.aborted) stop.request(reason);
    else signal?.addEventListener("abort", () => stop.request(reason), { once: true });
  };
  follow(o.signal, "cancel");
  follow(o.detach, "detach");
  const log = o.log.child({ run: runId });
  const ledger = await Ledger.open(join(runDir, "events.jsonl"), redactor);
  const notifier = new Notifier({
    config: input.config.notify,
    runId,
    runDir,
    redactor,
    now: Date.now,
    deliver: o.notify ?? notifyCommand(input, runId, runDir, run.processEnv, run.cwd),
    onFailure: (failure) => {
      // At error level: the CLI shows it by default, so a cron job's log says it.
      log.error({ ...failure }, "notification failed; the run goes on");
      ledger
        .append("notify.failed", { ...failure }, failure.task_id ?? undefined)
        .catch((error: unknown) =>
          log.warn({ err: errorText(error) }, "could not record the failed notification"),
        );
    },
  });
  const ports: Ports = {
    runner: o.runner,
    workspace: o.workspace ?? gitWorkspace,
    pool: run.git
      ? new WorktreePool(
          run.git.root,
          {
            maxWorktrees: input.config.git.pool.max_worktrees,
            maxBytes: input.config.git.pool.max_disk_mb * 1024 * 1024,
          },
          { run_id: runId, run_dir: runDir },
        )
      : null,
    now: Date.now,
    log,
    redactor,
    secretFinder,
    ledger,
    logNames: new LogNames(join(runDir, "logs")),
    notifier,
  };
  const journal = new TaskJournal(join(run.privateDir, "tasks.jsonl"));
  const restored = new Map((o.restored ?? []).map((t) => [t.id, t]));
  const recorder: TaskRecorder = new TaskRecorder(
    {
      runId,
      interactive: (id) => Boolean(run.plans.get(id)?.agents[0].interactive),
      ledger,
      journal,
      status: new StatusFiles(join(runDir, "status")),
      redactor,
      listeners: {
        taskFailed: (t) => notifier.taskFailed(t),
        taskWaitingInput: (id, since, asks) => notifier.taskWaitingInput(id, since, asks),
        taskWaitingQuota: (id, until) => notifier.taskWaitingQuota(id, until),
        taskWaitingApproval: (id, wait) => notifier.waitingApproval(id, wait),
        changed: () => o.onProgress?.(recorder.all(), Date.now() - run.startedAt),
      },
      now: Date.now,
      socket: o.runner.socket,
    },
    input.assignments.tasks.map((task) => {
      const t = restored.get(task.id);
      return t
        ? withLatestAttempt(run.privateDir, t)
        : newTaskRun(task.id, task.agent, task.dependencies, run.plans.get(task.id)!.agents[0].argv);
    }),
  );
  // Transitions that come while a write is in flight are coalesced into the next write.
  const notices: string[] = [];
  const mergeProgress: OpenRun["mergeProgress"] = { current: o.restoredMerge ?? null };
  const stateFile = new SnapshotWriter(join(runDir, "state.json"), () =>
    runStateOf(run, recorder, o.runner.socket, journal.path, notices, mergeProgress.current),
  );
  return { run, ports, stop, recorder, journal, stateFile, notices, mergeProgress };
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
function withLatestAttempt(privateDir: string, t: TaskRun): TaskRun {
  if (t.state === "success" || t.state === "failed" || t.state === "skipped") return t;
  let latest = t.attempts;
  try {
    for (const name of readdirSync(join(privateDir, "tasks", t.id))) {
      if (/^\d+$/.test(name)) latest = Math.max(latest, Number(name));
    }
  } catch {}
  if (latest === t.attempts && (latest === 0 || t.current.dir !== null)) return t;
  return {
    ...t,
    attempts: latest,
    current: { ...t.current, dir: attemptDirOf(privateDir, t.id, latest) },
    result: { ...t.result, logs: latest === t.attempts ? t.result.logs : null },
  };
}
