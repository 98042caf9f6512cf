import { hostname } from "node:os";
import { resolve } from "node:path";
import { type Command, InvalidArgumentError } from "commander";
import { approvalLine } from "../contract/approval.js";
import { attemptSummary } from "../contract/attempt-record.js";
import { KEY_NAMES } from "../contract/keys.js";
import type { RunState } from "../contract/state.js";
import {
  isLive,
  needsHumanText,
  type RunView,
  type StatusView,
  type TaskView,
} from "../contract/status-view.js";
import type { WorkerInfo } from "../contract/task-job.js";
import { ExitCode, InputError, unreachable } from "../errors.js";
import { registryDir } from "../fs/names.js";
import { dropPools } from "../git/worktree-pool.js";
import { decide, osUser } from "../ops/approval.js";
import { attachPlan, runAttach } from "../ops/attach.js";
import { requestCancel, waitForReport } from "../ops/cancel.js";
import { type CleanReport, cleanPlannings, cleanRun } from "../ops/clean.js";
import { requestFinish, sendInputOf, sendToTask } from "../ops/interactive.js";
import { driverAlive } from "../ops/liveness.js";
import { copyFrom, followLog, type LogStream, logPathOf, streamSink } from "../ops/logs.js";
import { runScope, scopeStatus } from "../ops/run-feed.js";
import { registryRuns, resolveRun } from "../ops/runs.js";
import { serverFor } from "../ops/sessions.js";
import { remoteAttachHint, sendHint } from "../ops/status.js";
import { requestStop } from "../ops/stop.js";
import { ageMs, sweepRemote } from "../ops/sweep-remote.js";
import { findTask } from "../ops/task-target.js";
import { isRemote } from "../run/backend.js";
import { budgetMeter } from "../spend/budget.js";
import type { Io } from "./io.js";
import { listWorkers } from "./scale.js";
import { stopSignal } from "./stop-signal.js";

const CANCEL_PROGRESS_MS = 2000;
/** Runs that cannot be shown, listed one by one in the human status before being counted. */
const MAX_PROBLEMS = 5;

const positiveSeconds = (value: string): number => {
  const n = Number(value);
  if (!Number.isFinite(n) || n <= 0) throw new InvalidArgumentError("must be a positive number of seconds");
  return n;
};

/**
 * A task of a scale-out run that runs on a worker now: on this host, its worker's tmux socket (to
 * attach to); on another host, an error that gives the line that watches it there. null: the task
 * runs locally (or not at all), and attach goes on as usual.
 */
async function runningOnWorker(
  taskId: string,
  run: string | undefined,
  io: Io,
): Promise<(Awaited<ReturnType<typeof findTask>> & { socket: string }) | null> {
  const found = await findTask(taskId, run, { env: io.env, cwd: io.cwd, needSession: false }).catch(
    () => null,
  );
  const last = found?.task.hosts.at(-1);
  if (!found || !last || found.task.state !== "running" || !found.task.current.session) return null;
  if (last.host !== hostname())
    throw new InputError(
      [
        {
          message: `task ${taskId} of run ${found.state.run_id} runs on worker ${last.worker}, host ${last.host}, not here`,
        },
      ],
      `Watch it there: ${remoteAttachHint(last.host, last.socket, found.task.current.session)}`,
    );
  return { ...found, socket: last.socket };
}

/** The workers of scale-out runs, as `termorch status --redis` lists them. */
function formatWorkers(workers: readonly WorkerInfo[], now: number): string {
  if (workers.length === 0) return "workers: none announced on this Redis\n";
  const lines = ["workers:"];
  for (const w of workers) {
    lines.push(
      `  ${w.name}: host ${w.host}, pid ${w.pid}, running ${w.running.length} of ${w.max_parallel}, seen ${Math.round((now - w.seen_at) / 1000)} s ago`,
    );
    for (const r of w.running)
      lines.push(
        `    ${r.run_id} ${r.task_id} (attempt ${r.attempt}): ${remoteAttachHint(w.host, w.socket, r.session)}`,
      );
  }
  return `${lines.join("\n")}\n`;
}

/**
 * The operator commands (docs/guides/operators.md: Operator commands): status, attach, logs, send, finish, approve, reject, cancel, clean. They find runs
 * through the per-user registry ($TERMORCH_REGISTRY), a daemon home, or a run directory.
 */
export function registerOperatorCommands(program: Command, io: Io, setCode: (code: number) => void): void {
  program
    .command("status")
    .description("show runs and their tasks: state, reason, attempts, time, last log line, how to attach")
    .argument("[run]", "a run directory or run id (default: every registered run)")
    .option("--home <dir>", "show the runs of a daemon home (<dir>/runs/*/)")
    .option("--json", "print a machine-readable document (termorch's StatusView)")
    .option(
      "--redis <url>",
      "also list the workers of scale-out runs announced on this Redis, and what each runs",
    )
    .action(async (ref: string | undefined, o: { home?: string; json?: boolean; redis?: string }) => {
      if (ref !== undefined && o.home !== undefined)
        throw new InputError(
          [{ message: "pass either a run or --home, not both" }],
          "termorch status [--home DIR | <run-dir>]",
        );
      const view = await scopeStatus(runScope(ref, o.home, io.cwd), io.env, io.cwd);
      const workers = o.redis ? await listWorkers(o.redis) : null;
      if (o.json) io.stdout.write(`${JSON.stringify(workers ? { ...view, workers } : view, null, 2)}\n`);
      else {
        io.stdout.write(
          formatStatus(view, ref === undefined && o.home === undefined ? registryDir(io.env) : null),
        );
        if (workers) io.stdout.write(formatWorkers(workers, Date.now()));
      }
    });

  program
    .command("attach")
    .description("attach this terminal to a task's live tmux session (detach: C-b d)")
    .argument("<task>", "task id")
    .option(
      "--run <run>",
      "run id or run directory (default: the newest run where the task has a live session)",
    )
    .option("--read-only", "watch only: keys typed do not reach the agent")
    .addHelpText(
      "after",
      [
        "",
        "Inside tmux: if your client is on termorch's own server, it is switched to the task's",
        "session (no nesting; --read-only makes that client read-only until it detaches). Inside",
        "any other tmux, a nested client is started with TMUX unset: detach it with C-b C-b d.",
        "",
      ].join("\n"),
    )
    .action(async (taskId: string, o: { run?: string; readOnly?: boolean }) => {
      const onWorker = await runningOnWorker(taskId, o.run, io);
      const target =
        onWorker ?? (await findTask(taskId, o.run, { env: io.env, cwd: io.cwd, needSession: true }));
      const { state, task } = target;
      const session = task.current.session!;
      const socket = onWorker ? onWorker.socket : state.socket;
      const socketPath = onWorker
        ? onWorker.socket
        : state.socket_path || (await serverFor(state.socket, io.env).socketPath());
      const plan = attachPlan({
        socket,
        socketPath,
        session,
        readOnly: o.readOnly ?? false,
        env: io.env,
      });
      // The tmux client takes over the process's own terminal, whatever io says.
      if (plan.mode === "attach" && !(process.stdin.isTTY && process.stdout.isTTY))
        throw new InputError(
          [
            {
              message: `attach needs a terminal, and stdin or stdout is not one (task ${taskId}, run ${state.run_id})`,
            },
          ],
          `Run it from a terminal, or read the output with: termorch logs ${taskId} --run ${state.run_id} --follow`,
        );
      const nested = plan.mode === "attach" && io.env.TMUX ? "; inside your own tmux: C-b C-b d" : "";
      io.stderr.write(
        plan.mode === "switch"
          ? `termorch: switching this client to ${session} (task ${taskId} of run ${state.run_id})${o.readOnly ? ", read-only" : ""}\n`
          : `termorch: attaching to ${session} (task ${taskId} of run ${state.run_id}, socket ${socket})${o.readOnly ? ", read-only" : ""}; detach with C-b d${nested}\n`,
      );
      if (!target.session?.live)
        io.stderr.write("termorch: its agent has exited; the session is kept for inspection\n");
      setCode(await runAttach(plan, o.readOnly ?? false));
    });

  program
    .command("logs")
    .description("print a task's stdout log (or --err: stderr); --follow keeps printing until it finishes")
    .argument("<task>", "task id")
    .option("--run <run>", "run id or run directory (default: the newest registered run with that task)")
    .option("--err", "the stderr log")
    .option("--follow", "keep printing what is appended until the task is finished (or Ctrl-C)")
    .action(async (taskId: string, o: { run?: string; err?: boolean; follow?: boolean }) => {
      const { state, task } = await findTask(taskId, o.run, { env: io.env, cwd: io.cwd, needSession: false });
      const stream: LogStream = o.err ? "stderr" : "stdout";
      if (o.run === undefined)
        io.stderr.write(`termorch: task ${taskId} of run ${state.run_id} (${state.run_dir})\n`);
      const sink = streamSink(io.stdout);
      if (!o.follow) {
        const path = logPathOf(state, task, stream);
        if (!path && task.state === "skipped")
          throw new InputError(
            [
              {
                message: `task ${taskId} of run ${state.run_id} was skipped (${task.detail ?? task.reason}): it never ran`,
              },
            ],
            "It has no log; `termorch status` shows why its run went that way.",
          );
        if (!path)
          throw new InputError(
            [{ message: `task ${taskId} of run ${state.run_id} has no log yet: it has not started` }],
            `Wait for it with: termorch logs ${taskId} --run ${state.run_id} --follow`,
          );
        await copyFrom(path, 0, sink);
        return;
      }
      // Nobody reads any more (`| head`): following is pointless, and that end is not a failure.
      const stop = stopSignal(io, { readerGone: true });
      try {
        const end = await followLog({
          runDir: state.run_dir,
          runId: state.run_id,
          taskId,
          stream,
          sink,
          notice: (line) => io.stderr.write(`termorch: ${line}\n`),
          signal: stop.signal,
        });
        setCode(
          end === "finished" || stop.cause() === "reader-gone"
            ? ExitCode.ok
            : end === "aborted"
              ? ExitCode.interrupted
              : ExitCode.failed,
        );
      } finally {
        stop.dispose();
      }
    });

  program
    .command("send")
    .description(
      "answer a running task's agent: TEXT (or --file F) is pasted into its terminal as one bracketed paste, then Enter; --keys presses keys instead, for a menu",
    )
    .argument("<task>", "task id")
    .argument("[text]", "what to send (or --file, or --keys)")
    .option("--file <file>", "send this file's content instead of TEXT")
    .option(
      "--keys <key...>",
      `press these keys in order instead of pasting (for a menu, which takes keys and ignores a paste): ${KEY_NAMES.join(", ")}, Esc, or one character such as 2 or y; termorch status names the keys that answer a known question`,
    )
    .option(
      "--run <run>",
      "run id or run directory (default: the newest run where the task has a live session)",
    )
    .action(
      async (
        taskId: string,
        text: string | undefined,
        o: { file?: string; keys?: string[]; run?: string },
      ) => {
        const input = sendInputOf(taskId, {
          text,
          file: o.file === undefined ? undefined : resolve(io.cwd, o.file),
          keys: o.keys,
        });
        const { state } = await sendToTask(taskId, o.run, input, { env: io.env, cwd: io.cwd });
        io.stdout.write(`termorch: sent to task ${taskId} of run ${state.run_id}\n`);
      },
    );

  program
    .command("finish")
    .description(
      "end a running interactive task's agent (TERM, KILL after kill_grace_s) and count the task as done",
    )
    .argument("<task>", "task id")
    .option(
      "--run <run>",
      "run id or run directory (default: the newest run where the task has a live session)",
    )
    .action(async (taskId: string, o: { run?: string }) => {
      const { state } = await requestFinish(taskId, o.run, { env: io.env, cwd: io.cwd, now: Date.now() });
      io.stdout.write(
        `termorch: finish requested for task ${taskId} of run ${state.run_id}; its driver ends the agent within a second${
          driverAlive(state.pid, state.updated_at)
            ? ""
            : ` (its driver, pid ${state.pid}, is not live: it happens when the run is resumed)`
        }\n`,
      );
    });

  for (const decision of ["approve", "reject"] as const)
    program
      .command(decision)
      .description(
        decision === "approve"
          ? "approve what waits for a person's decision: a task (its start, or its attempt's result), or without a task the run's merge"
          : "reject what waits for a person's decision: the reason is the task's next attempt's feedback (or ends it, reason rejected); without a task, the merge (nothing is merged)",
      )
      .argument("<run>", "run id or run directory")
      .argument("[task]", "task id (default: the run's merge)")
      .option(
        "--reason <text>",
        decision === "reject" ? "why (required): what the next attempt is told" : "a note kept in the ledger",
      )
      .action(async (ref: string, taskId: string | undefined, o: { reason?: string }) => {
        const { state, wait } = await decide(
          ref,
          taskId,
          { decision, reason: o.reason ?? null, by: osUser(io.env) },
          { env: io.env, cwd: io.cwd, now: Date.now() },
        );
        const what =
          taskId === undefined
            ? "the merge"
            : `task ${taskId}${wait.at === "start" ? "'s start" : `'s attempt ${wait.attempt}`}`;
        io.stdout.write(
          `termorch: ${decision === "approve" ? "approved" : "rejected"} ${what} of run ${state.run_id}; its driver takes it within a second${
            driverAlive(state.pid, state.updated_at)
              ? ""
              : ` (its driver, pid ${state.pid}, is not live: it is taken when the run is resumed: termorch resume ${state.run_dir})`
          }\n`,
        );
      });

  program
    .command("stop")
    .description(
      "stop a run at its wave boundary: nothing new starts, running tasks finish, nothing is merged; it ends with a session handoff (handoff.json, exit 5) for termorch resume",
    )
    .argument("<run>", "run id or run directory")
    .option(
      "--at-boundary",
      "required: the one way to stop without ending what runs (to end it now: termorch cancel)",
    )
    .action(async (ref: string, o: { atBoundary?: boolean }) => {
      if (!o.atBoundary)
        throw new InputError(
          [{ message: "stop needs --at-boundary" }],
          `termorch stop ${ref} --at-boundary lets running tasks finish; termorch cancel ${ref} ends them now.`,
        );
      const { state } = await requestStop(ref, osUser(io.env), { env: io.env, cwd: io.cwd, now: Date.now() });
      io.stdout.write(
        `termorch: run ${state.run_id} stops at its wave boundary: nothing new starts, running tasks finish; then its handoff is ${state.run_dir}/handoff.json${
          driverAlive(state.pid, state.updated_at)
            ? ""
            : ` (its driver, pid ${state.pid}, is not live: termorch resume ${state.run_dir} stops at once)`
        }\n`,
      );
    });

  program
    .command("cancel")
    .description(
      "cancel a run (one-shot or daemon): its running tasks are ended and the report written (exit 130)",
    )
    .argument("<run>", "run id or run directory")
    .option("--timeout <s>", "seconds to wait for the report", positiveSeconds, 30)
    .option("--no-wait", "return once the cancel is requested")
    .action(async (ref: string, o: { timeout: number; wait: boolean }) => {
      setCode(await cancelCommand(ref, o, io));
    });

  program
    .command("clean")
    .description(
      "remove what finished runs left: tmux sessions, task worktrees, termorch/<run>/* branches, a scale-out run's refs on its git remote and keys in Redis (the run directory stays)",
    )
    .argument(
      "[run]",
      "run id or run directory (default: every finished run in the registry, and the warm worktree pool)",
    )
    .option("--force", "also delete branches with unmerged commits and worktrees with uncommitted changes")
    .option(
      "--redis <url>",
      "a scale-out run's Redis, for its keys (default: $TERMORCH_REDIS_URL, its config's redis)",
    )
    .option(
      "--remote <url>",
      "sweep a scale-out git remote instead: the refs of runs unknown here (with --older-than)",
    )
    .option(
      "--older-than <age>",
      "with --remote: only runs whose newest commit is older than this (90m, 12h, 7d)",
    )
    .action(async (ref: string | undefined, o: CleanFlags) => {
      if (o.remote !== undefined || o.olderThan !== undefined) {
        setCode(await sweepCommand(ref, o, io));
        return;
      }
      const runs = ref !== undefined ? [await resolveRun(ref, io.env, io.cwd)] : await registryRuns(io.env);
      if (ref === undefined) {
        const pooled = await dropPools({ run_id: "termorch clean", run_dir: io.cwd });
        if (pooled.length > 0)
          io.stdout.write(
            `termorch: emptied the warm worktree pool: ${pooled.length} worktree${pooled.length === 1 ? "" : "s"} removed\n`,
          );
        const planning = await cleanPlannings(io.env);
        for (const session of planning.ended)
          io.stdout.write(`termorch: ended planner session ${session}: its termorch plan was killed\n`);
        for (const dir of planning.removed)
          io.stdout.write(`termorch: removed the copy of the repository a killed planning left in ${dir}\n`);
      }
      if (runs.length === 0) {
        io.stdout.write(`termorch: nothing to clean: no runs registered (${registryDir(io.env)})\n`);
        return;
      }
      let skipped = 0;
      for (const run of runs) {
        const report = await cleanRun(run, {
          force: o.force ?? false,
          env: io.env,
          ...(o.redis ? { redis: o.redis } : {}),
        });
        if (!report.decision.clean) skipped++;
        io.stdout.write(formatClean(report));
      }
      // A run named explicitly that could not be cleaned is a failure; skipping live ones in a sweep is not.
      if (ref !== undefined && skipped > 0) setCode(ExitCode.failed);
    });
}

interface CleanFlags {
  force?: boolean;
  redis?: string;
  remote?: string;
  olderThan?: string;
}

/** `termorch clean --remote URL --older-than AGE`. */
async function sweepCommand(ref: string | undefined, o: CleanFlags, io: Io): Promise<number> {
  const age = o.olderThan === undefined ? null : ageMs(o.olderThan);
  const problems = [
    ...(ref !== undefined
      ? [{ message: `--remote sweeps a whole remote: give no run with it (got ${ref})` }]
      : []),
    ...(o.remote === undefined
      ? [{ message: "--older-than needs --remote URL (the git remote to sweep)" }]
      : []),
    ...(o.remote !== undefined && !isRemote(o.remote)
      ? [{ message: `--remote "${o.remote}" is neither an absolute path nor a URL` }]
      : []),
    ...(o.olderThan === undefined
      ? [
          {
            message:
              "--remote needs --older-than AGE (e.g. 7d): a recent run may be another host's, still running",
          },
        ]
      : age === null
        ? [
            {
              message: `--older-than "${o.olderThan}" is not an age: give a number and s, m, h or d (e.g. 7d)`,
            },
          ]
        : []),
  ];
  if (problems.length > 0) throw new InputError(problems, "Nothing was removed.");
  const report = await sweepRemote(o.remote!, age!, io.env);
  for (const r of report.removed)
    io.stdout.write(
      `termorch: ${report.remote}: removed run ${r.runId}'s ${r.refs} ref(s) (newest commit ${r.newest})\n`,
    );
  for (const k of report.kept) io.stdout.write(`termorch: ${report.remote}: kept run ${k.runId}: ${k.why}\n`);
  if (report.removed.length === 0 && report.kept.length === 0)
    io.stdout.write(`termorch: ${report.remote}: no run's refs there\n`);
  return ExitCode.ok;
}

async function cancelCommand(ref: string, o: { timeout: number; wait: boolean }, io: Io): Promise<number> {
  const run = await resolveRun(ref, io.env, io.cwd);
  const state = run.state;
  if (!state)
    throw new InputError([{ message: `run ${run.runId}: ${run.problem}` }], "There is nothing to cancel.");
  if (state.phase === "reported") {
    io.stdout.write(
      `termorch: run ${state.run_id} already finished (exit ${state.exit_code ?? "unknown"}); nothing to cancel\n  report: ${state.report ?? "none"}\n`,
    );
    return ExitCode.ok;
  }
  const live = driverAlive(state.pid, state.updated_at);
  const file = await requestCancel(state, { pid: process.pid, now: Date.now() });
  if (!live) {
    io.stdout.write(
      [
        `termorch: cancel recorded for run ${state.run_id} (${file}), but the run is not live: its driver (pid ${state.pid}) is gone.`,
        `  It stops as soon as it is resumed, writing its report: termorch resume ${state.run_dir}`,
        "",
      ].join("\n"),
    );
    return ExitCode.failed;
  }
  io.stdout.write(`termorch: cancel requested for run ${state.run_id} (driver pid ${state.pid} is live)\n`);
  if (!o.wait) return ExitCode.ok;
  io.stdout.write(`  waiting up to ${o.timeout}s for its report...\n`);
  const controller = new AbortController();
  const stop = (): void => controller.abort();
  process.on("SIGINT", stop);
  try {
    const end = await waitForReport({
      initial: state,
      timeoutMs: o.timeout * 1000,
      progressMs: CANCEL_PROGRESS_MS,
      signal: controller.signal,
      onProgress: (s, elapsed) =>
        io.stdout.write(`  still stopping after ${Math.round(elapsed / 1000)}s: ${busyTasks(s)}\n`),
    });
    switch (end.outcome) {
      case "reported":
        io.stdout.write(
          `termorch: run ${state.run_id} stopped; exit code ${end.state.exit_code ?? "unknown"}\n  report: ${end.state.report ?? "(not written: the run directory is not writable)"}\n`,
        );
        return ExitCode.ok;
      case "driver_gone":
        io.stdout.write(
          `termorch: the driver of run ${state.run_id} exited without writing a report; finish it with: termorch resume ${state.run_dir}\n`,
        );
        return ExitCode.failed;
      case "timed_out":
        io.stdout.write(
          `termorch: run ${state.run_id} has not stopped after ${o.timeout}s (${busyTasks(end.state)}); the cancel stays requested. Watch it with: termorch status ${state.run_id}\n`,
        );
        return ExitCode.failed;
      case "replaced":
        io.stdout.write(`termorch: run ${state.run_id}'s directory now holds run ${end.runId}\n`);
        return ExitCode.failed;
      case "aborted":
        return ExitCode.interrupted;
      default:
        return unreachable(end);
    }
  } finally {
    process.off("SIGINT", stop);
  }
}

function busyTasks(state: RunState): string {
  const busy = state.tasks.filter(
    (t) => !["success", "failed", "skipped"].includes(t.state) && t.attempts > 0,
  );
  return busy.length === 0
    ? "writing its report"
    : `${busy.length} task(s) stopping (${busy.map((t) => t.id).join(", ")})`;
}

/** 850 ms -> 0.9s, 75 s -> 1m15s, 2 h -> 2h00m. */
function formatDuration(ms: number): string {
  if (ms < 60_000) return `${(ms / 1000).toFixed(ms < 10_000 ? 1 : 0)}s`;
  const s = Math.floor(ms / 1000);
  if (s < 3600) return `${Math.floor(s / 60)}m${String(s % 60).padStart(2, "0")}s`;
  return `${Math.floor(s / 3600)}h${String(Math.floor((s % 3600) / 60)).padStart(2, "0")}m`;
}

function phaseText(run: RunView): string {
  if (run.phase === "running") return `running (driver pid ${run.pid})`;
  if (run.phase === "interrupted") return `interrupted (driver pid ${run.pid} is gone)`;
  return `reported (exit ${run.exit_code ?? "unknown"})`;
}

function taskTime(t: TaskView): string {
  if (t.elapsed_ms !== null) return `${formatDuration(t.elapsed_ms)}+`;
  if (t.duration_ms !== null) return formatDuration(t.duration_ms);
  return "-";
}

function table(rows: string[][]): string[] {
  const widths: number[] = [];
  for (const row of rows)
    for (const [i, cell] of row.entries()) widths[i] = Math.max(widths[i] ?? 0, cell.length);
  return rows.map((row) =>
    row
      .map((cell, i) => (i === row.length - 1 ? cell : cell.padEnd(widths[i] ?? 0)))
      .join("  ")
      .trimEnd(),
  );
}

/** "$0.0250 of $0.0200 (125 %) spent: exhausted, no new attempt starts" */
function budgetLine(b: NonNullable<RunView["budget"]>): string {
  const mark = b.exhausted ? ": exhausted, no new attempt starts" : b.warning ? ": over 80 %" : "";
  return `${budgetMeter(b)} spent${mark}`;
}

function formatStatus(view: StatusView, registry: string | null): string {
  const lines: string[] = [];
  if (view.runs.length === 0 && view.problems.length === 0 && view.queued.length === 0)
    lines.push(registry ? `termorch: no runs registered (${registry})` : "termorch: no runs");
  for (const run of view.runs) {
    lines.push(`run ${run.run_id}: ${phaseText(run)}, started ${run.started_at}`);
    lines.push(`  dir: ${run.run_dir}`);
    if (run.report) lines.push(`  report: ${run.report}`);
    if (run.phase === "interrupted" && run.hint) lines.push(`  ${run.hint}`);
    if (run.phase === "running") for (const notice of run.notices) lines.push(`  ${notice}`);
    if (run.merge) lines.push(`  merge: ${run.merge.line}`);
    if (run.budget) lines.push(`  budget: ${budgetLine(run.budget)}`);
    const rows = [["TASK", "STATE", "REASON", "ATTEMPTS", "TIME", "LAST LINE"]];
    for (const t of run.tasks)
      rows.push([t.id, t.state, t.reason ?? "-", String(t.attempts), taskTime(t), t.last_line ?? ""]);
    lines.push(...table(rows).map((l) => `  ${l}`));
    for (const t of run.tasks)
      if (t.remote && t.state === "running")
        lines.push(`  ${t.id} (on worker ${t.remote.worker}, host ${t.remote.host}): ${t.remote.attach}`);
    for (const t of run.tasks) {
      if (!t.attach) continue;
      const what = t.session_live ? "live" : run.phase === "reported" ? "kept, agent exited" : "agent exited";
      lines.push(`  ${t.id} (${what}): ${t.attach.termorch}   or: ${t.attach.tmux}`);
    }
    for (const t of run.tasks) {
      // A task told what went wrong: which agent tries now, from where, and what it was told.
      const last = t.attempt_history.at(-1);
      if (last && last.n > 1 && (isLive(t.state) || t.state === "failed"))
        lines.push(`  ${t.id}: ${attemptSummary(last)} (in ${run.run_dir})`);
    }
    for (const t of run.tasks)
      if (t.redo && t.state === "redo")
        lines.push(
          t.redo.cause === "gate"
            ? `  ${t.id}: fix ${t.redo.n}/${t.redo.of}, its merge turned run.tests_cmd red`
            : `  ${t.id}: redo ${t.redo.n}/${t.redo.of}, its result conflicted with ${t.redo.with.join(", ")} in ${t.redo.files.join(", ")}`,
        );
    for (const t of run.tasks)
      if (t.waiting_since) {
        // A known question's answers by their keys (a menu ignores a paste), else the operator's text.
        const answers =
          t.waiting_answers.length > 0
            ? t.waiting_answers
                .map((a) => `${sendHint(run.run_id, t.id, a.keys)} (${a.picks})`)
                .join("; or: ")
            : sendHint(run.run_id, t.id, null);
        lines.push(
          `  ${t.id}: waiting for input since ${t.waiting_since}${t.waiting_for ? ` (${t.waiting_for})` : ""}; answer: ${answers}`,
        );
      }
    for (const t of run.tasks) {
      if (t.waiting_approval) lines.push(`  ${t.id}: ${approvalLine(t.waiting_approval)}`);
      if (t.waiting_quota_until)
        lines.push(
          `  ${t.id}: waiting for a rate limit to lift, until ${t.waiting_quota_until}; then its next attempt starts`,
        );
    }
    for (const t of run.tasks) if (t.needs_human) lines.push(`  ${t.id}: blocked, ${needsHumanText(t)}`);
    lines.push("");
  }
  for (const q of view.queued)
    lines.push(
      `run ${q.run_id}: queued (claimed ${q.claimed_at ?? "?"}${q.source ? ` from ${q.source}` : ""}; the daemon starts it when its workspace and a slot are free)`,
    );
  if (view.queued.length > 0) lines.push("");
  // Registries collect runs whose folders were deleted since: name a few, count the rest.
  for (const p of view.problems.slice(0, MAX_PROBLEMS))
    lines.push(`run ${p.run_id ?? p.run_dir ?? "?"}: ${p.message}`);
  if (view.problems.length > MAX_PROBLEMS)
    lines.push(
      `... and ${view.problems.length - MAX_PROBLEMS} more runs that cannot be shown (--json lists them)`,
    );
  if (view.problems.length > 0)
    lines.push("(termorch clean removes what such runs left, and their registry entries)");
  return `${lines.join("\n").replace(/\n+$/, "")}\n`;
}

function formatClean(r: CleanReport): string {
  const lines = [`run ${r.runId} (${r.runDir}): ${r.decision.label}`];
  if (!r.decision.clean) {
    lines.push(`  skipped: ${r.decision.hint}`);
    return `${lines.join("\n")}\n`;
  }
  for (const what of r.removed) lines.push(`  removed ${what}`);
  for (const k of r.kept) lines.push(`  kept ${k.what}: ${k.why}`);
  if (r.removed.length === 0 && r.kept.length === 0) lines.push("  nothing left to remove");
  if (r.unregistered) lines.push("  unregistered");
  else if (r.kept.length > 0)
    lines.push(`  still registered: termorch clean ${r.runId} --force removes what was kept`);
  return `${lines.join("\n")}\n`;
}
