import { existsSync, type FSWatcher, watch } from "node:fs";
import { mkdir, rm } from "node:fs/promises";
import { join } from "node:path";
import type PQueue from "p-queue";
import type { BoundaryWhy } from "../contract/session-handoff.js";
import { errorText } from "../errors.js";
import { removeStrayTemps } from "../fs/atomic.js";
import { sessionPrefix } from "../fs/names.js";
import { CANCEL_FILE, readStopFile, STOP_FILE } from "../fs/private-dir.js";
import { registerRun } from "../fs/registry.js";
import { collisionsOf } from "../input/collision-check.js";
import { cleanUpMerged, cleanUpRemote } from "../merge/clean-up.js";
import { clearMergeIntent } from "../merge/intent.js";
import { integrationBranchOf } from "../merge/recovery.js";
import { type MergeStageResult, mergeStage } from "../merge/stage.js";
import { type RunError, skippedMerge } from "../report/build.js";
import type { RemoteBackend } from "../runner/task-hosts.js";
import type { TaskExecutor } from "../task/executor.js";
import { killPoint, pausePoint } from "../task/faults.js";
import type { Ports } from "../task/ports.js";
import type { TaskRecorder } from "../task/recorder.js";
import { snapshotRefs } from "../task/ref-watch.js";
import { reviewSessionPrefix } from "../task/review.js";
import { snapshotRunObjects } from "../task/sandbox.js";
import type { RunStop } from "../task/stop.js";
import { watchRunBudget } from "./budget-alarm.js";
import { keepPlanDigest } from "./budget-resume.js";
import { collisionOutcomes } from "./collision-outcomes.js";
import { dispatch } from "./dispatch.js";
import { writeHandoff } from "./handoff-file.js";
import type { OpenRun } from "./open-run.js";
import type { RunResult } from "./report-file.js";
import { writeReport } from "./report-file.js";
import { runReport } from "./run-report.js";
import { runStateOf } from "./run-state.js";

/** What the caller of drive hears and steers (a part of DriveOptions). */
export interface DriveHooks {
  hostQueue?: PQueue;
  onStart?: (info: StartInfo) => void;
  onReport?: (result: RunResult) => Promise<void>;
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
  redactor: Ports["redactor"];
  /** Scale-out: the backend its tasks run on (e.g. `bullmq redis://…`); null when they run in local tmux. */
  hosts: string | null;
}

/** A run left to a later resume (detach): no report yet. */
export interface DetachedResult {
  detached: true;
  runId: string;
  runDir: string;
}

export function startInfo(
  o: OpenRun,
  remote: RemoteBackend | null,
  at: { dryRun: boolean; resumed: boolean; keptApartFrom: string | null },
): StartInfo {
  const { run } = o;
  return {
    runId: run.runId,
    runDir: run.runDir,
    keptApartFrom: at.keptApartFrom,
    renamedFrom: run.input.runId === run.runId ? null : run.input.runId,
    socket: o.ports.runner.socket,
    tasks: o.recorder.size,
    waves: run.waves.waves.length,
    dryRun: at.dryRun,
    sessionPrefix: sessionPrefix(run.runId),
    resumed: at.resumed,
    redactor: o.ports.redactor,
    hosts: remote?.hosts.name ?? null,
  };
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

/** Schedule, merge, report, clean up: the part of a run that `resume` repeats. */
export async function drive(
  o: OpenRun,
  remote: RemoteBackend | null,
  executor: TaskExecutor,
  hooks: DriveHooks,
  resumed: boolean,
  keptApartFrom: string | null = null,
): Promise<RunResult | DetachedResult> {
  const { run, ports, stop, recorder } = o;
  const { runDir, privateDir } = run;
  const { ledger } = ports;
  await pausePoint(run.fault, runDir, "pause-before-drive");
  recorder.placeSessions(await ports.runner.socketPath());
  // What the hosts say (no worker takes the jobs) goes into state.json, where status shows it.
  remote?.hosts.onNotice((notice) => {
    o.notices.splice(0, o.notices.length, ...(notice === null ? [] : [notice]));
    void o.stateFile.save();
  });
  hooks.onStart?.(startInfo(o, remote, { dryRun: false, resumed, keptApartFrom }));
  await Promise.all(["logs", "status", "artifacts"].map((d) => mkdir(join(runDir, d), { recursive: true })));
  await mkdir(privateDir, { recursive: true, mode: 0o700 });
  if (!resumed) {
    await ledger.append("run.accepted", {
      run_id: run.runId,
      assignments: run.input.file,
      workspace: run.input.workspace,
      tasks: run.input.assignments.tasks.map((t) => ({
        id: t.id,
        agent: t.agent,
        dependencies: t.dependencies,
      })),
      base_commit: run.git?.baseCommit ?? null,
      target: run.git?.targetRef ?? null,
    });
    // What a resume compares the assignments file with, budget aside (a raised budget is taken).
    keepPlanDigest(privateDir, run.input.assignments);
    await killPoint(run.fault, "kill-after-accepted");
    await ledger.append("run.planned", {
      waves: run.waves.waves,
      critical_path: run.waves.criticalPath,
      max_parallel: run.settings.max_parallel,
      schedule: run.settings.schedule,
      argv: Object.fromEntries(recorder.all().map((t) => [t.id, t.argv])),
    });
    await recorder.clearStatusFiles();
    // Before any agent runs: what they change in the user's repository is found against it
    // (the list taken with the base commit, see inspectWorkspace).
    await snapshotRefs(run, ports.now());
    await snapshotRunObjects(run);
  } else {
    // What a killed driver left half-written: temp copies of status files and of the run's own
    // files, and status files older than the journal.
    const stray = [...(await removeStrayTemps(join(runDir, "status"))), ...(await removeStrayTemps(runDir))];
    if (stray.length > 0) ports.log.info({ files: stray }, "removed what an interrupted write left");
    recorder.rewriteStatusFiles();
  }
  await o.stateFile.save();
  await registerRun(
    {
      run_id: run.runId,
      run_dir: runDir,
      socket: ports.runner.socket,
      pid: process.pid,
      started_at: new Date(run.startedAt).toISOString(),
    },
    run.processEnv,
  ).catch((error: unknown) =>
    // Only `termorch status <id>` and friends miss it; the run itself goes on.
    ports.log.warn({ err: errorText(error) }, "could not register the run in the per-user registry"),
  );
  // `termorch cancel` and `termorch stop` drop a file here; watching needs no port and works for any driver.
  const cancelWatch = watchForStops(privateDir, ports, stop);
  const budgetWatch = watchRunBudget(run, recorder, ports);

  let peak = 0;
  let internal: RunError | null = null;
  try {
    const dispatched = await dispatch(run, stop, recorder, executor, hooks.hostQueue).finally(budgetWatch);
    if (dispatched === "detached") {
      cancelWatch?.close();
      return detach(o);
    }
    peak = dispatched;
  } catch (error) {
    internal = internalError(error);
    ports.log.error({ err: internal.message }, "run stopped by an internal error");
  }

  let stage: MergeStageResult = {
    merge: skippedMerge("the run stopped before the merge"),
    validation: "skipped",
  };
  // Stopped at a boundary: what ran has finished, nothing is merged; a resume goes on from here.
  // One asked for once the merge began, and which the merge did not stop at (its approval's
  // wait), comes too late: the merge went on, and the run is reported as it ended.
  let boundary: BoundaryWhy | null = null;
  const atBoundary = (): MergeStageResult => {
    boundary = stop.boundaryWhy;
    return {
      merge: skippedMerge(
        `the run stopped at a wave boundary (${boundary}): nothing was merged; termorch resume ${runDir} goes on`,
      ),
      validation: "skipped",
    };
  };
  // A cancel is heard in the merge stage too: its gates, a bisect's probes and a redo can take long.
  try {
    if (internal === null && stop.atBoundary) stage = atBoundary();
    else if (internal === null) {
      await pausePoint(run.fault, runDir, "pause-before-merge");
      try {
        const left = o.mergeProgress.current?.approval ?? null;
        const merged = await mergeStage(
          run,
          ports,
          stop,
          recorder,
          (progress) => {
            // Where the merge is (a bisect's probe), for the views: state.json's `merge`.
            o.mergeProgress.current = progress;
            void o.stateFile.save();
          },
          left,
        );
        if (merged === "detached" && stop.atBoundary) stage = atBoundary();
        else if (merged === "detached") return detach(o);
        else stage = merged;
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
  } finally {
    cancelWatch?.close();
  }
  await ledger.append(`merge.${stage.merge.result}`, { ...stage.merge, validation: stage.validation });
  // How the prediction did: what each pair that could collide really did.
  const collisions = await collisionOutcomes(run, ports, recorder, collisionsOf(run.input), [
    ...recorder.conflicts,
    ...stage.merge.conflicts,
  ]);
  const report = runReport(run, recorder, ports.redactor, {
    collisions,
    merge: stage.merge,
    validation: stage.validation,
    peak,
    error: internal,
    cancelled: stop.cancelled,
    stopped: boundary,
    // A run on workers uses no tmux server here: each attempt's is in its task's hosts.
    socket: remote ? null : ports.runner.socket,
    dryRun: false,
  });
  // Before the report's page is drawn from the ledger: a page drawn again later draws the same.
  await writeHandoff(run, recorder, ports, report, boundary);
  await ledger.append("report.written", {
    exit_code: report.exit_code,
    completed: report.summary.completed,
    failed_tasks: report.summary.failed_tasks,
    skipped_tasks: report.summary.skipped_tasks,
    cancelled_tasks: report.summary.cancelled_tasks,
  });
  await killPoint(run.fault, "kill-before-report");
  const result = await writeReport(runDir, report);
  await killPoint(run.fault, "kill-after-report");
  // Taken (or come too late): before the state says so, so that a resume goes on rather than
  // stopping again; one asked for after this is a new file.
  await rm(join(privateDir, STOP_FILE), { force: true });
  await o.stateFile.finish({
    // The run's notices were about it while it ran.
    // What a bisect found stays for the views (status shows the culprit of a reported run).
    ...runStateOf(run, recorder, ports.runner.socket, o.journal.path, [], o.mergeProgress.current),
    // A move of the target left unfinished keeps the run open: `termorch resume` finishes it.
    phase: stage.unfinished ? "running" : "reported",
    // Complete now: the task journal is no longer needed.
    task_journal: null,
    report: result.reportPath,
    stopped: boundary,
    exit_code: report.exit_code,
  });
  // Only once state.json says reported: a crash before that leaves a resume the record of a
  // move that happened, which it then reports rather than merging again.
  if (!stage.unfinished) await clearMergeIntent(run);
  o.journal.close();
  await rm(o.journal.path, { force: true }).catch(() => {});
  // The prompts as the agents got them, unredacted: no one needs them once the run is reported
  // (artifacts/<id>/prompt.md keeps the redacted text).
  await rm(join(privateDir, "prompts"), { recursive: true, force: true }).catch(() => {});
  // Its failure is the caller's to handle (the daemon answers again once the run returns).
  await hooks
    .onReport?.(result)
    .catch((error: unknown) => ports.log.warn({ err: errorText(error) }, "could not hand the report on"));
  // Awaited (bounded by notify.timeout_s): a cron job's run returns once it was told.
  await ports.notifier.runFinished(report, result.reportPath);
  const merged = stage.merge.result === "success" ? stage.merge.resultCommit : null;
  if (merged && run.git && !run.settings.keep_branches) {
    const cleaned = await cleanUpMerged(
      run,
      ports,
      (id) => recorder.get(id),
      integrationBranchOf(run),
      merged,
    );
    await ledger.append("run.cleaned", { ...cleaned });
  }
  if (remote && run.git && !stage.unfinished) await cleanUpRemote(run, ports, remote);
  // Worktrees still on their way into the pool (a run that did not merge) are not left half-moved.
  await ports.pool?.settled();
  await ledger.close();
  // A review cut short (a cancel, a stop) left its session: no one attaches to a reviewer's.
  const reviews = reviewSessionPrefix(run.runId);
  const open = await ports.runner.openSessions().catch(() => new Set<string>());
  await ports.runner.close([...open].filter((s) => s.startsWith(reviews))).catch(() => {});
  const keptSessions = await closeSessions(ports, recorder, run.settings.sessions);
  // A stopped run's attempts are its resume's (a task waiting for approval is adopted there).
  if (internal === null && !stop.cancelled && boundary === null)
    for (const folder of ["tasks", "sandbox"])
      await rm(join(privateDir, folder), { recursive: true, force: true }).catch(() => {});
  return { ...result, keptSessions };
}

/** Leaves the run to a later resume: state persisted, agents still running in tmux, no report. */
async function detach(o: OpenRun): Promise<DetachedResult> {
  const { run, ports } = o;
  await ports.pool?.settled();
  await o.stateFile.finish();
  o.journal.close();
  // Failures already queued are still told (bounded); the run's own end comes with its resume.
  await ports.notifier.drained();
  await ports.ledger.append("run.detached", { pid: process.pid });
  await ports.ledger.close();
  return { detached: true, runId: run.runId, runDir: run.runDir };
}

function watchForStops(
  privateDir: string,
  ports: Pick<Ports, "log" | "ledger">,
  stop: RunStop,
): FSWatcher | null {
  const check = (): void => {
    if (!stop.cancelled && existsSync(join(privateDir, CANCEL_FILE))) {
      ports.log.warn("cancel requested");
      void ports.ledger.append("run.cancel_requested", { by: "cancel file" });
      stop.request("cancel");
    }
    const boundary = readStopFile(privateDir);
    if (boundary && !stop.stopping) {
      ports.log.warn("stop at the wave boundary requested");
      void ports.ledger.append("run.stop_requested", { at: "boundary", by: boundary.by });
      stop.request("boundary", "wave_complete");
    }
  };
  try {
    // Only these files matter: the task journal beside them changes at every transition.
    const watcher = watch(privateDir, (_event, name) => {
      if (name === null || name === CANCEL_FILE || name === STOP_FILE) check();
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
async function closeSessions(
  ports: Pick<Ports, "runner" | "log">,
  recorder: Pick<TaskRecorder, "all">,
  policy: "default" | "keep" | "clean",
): Promise<string[]> {
  const tasks = recorder.all();
  if (policy !== "keep") {
    const closing = tasks.filter(
      (t) => t.current.session && t.attempts > 0 && (policy === "clean" || t.state === "success"),
    );
    await ports.runner
      .close(closing.map((t) => t.current.session!))
      .catch((error: unknown) =>
        ports.log.warn({ err: errorText(error) }, "could not close the task sessions"),
      );
  }
  const live = await ports.runner.openSessions().catch((error: unknown) => {
    ports.log.warn({ err: errorText(error) }, "could not list the sessions left open");
    return new Set<string>();
  });
  await ports.runner
    .closeIfIdle()
    .catch((error: unknown) =>
      ports.log.warn({ err: errorText(error) }, "could not stop the idle tmux server"),
    );
  return tasks.flatMap((t) => (t.current.session && live.has(t.current.session) ? [t.current.session] : []));
}
