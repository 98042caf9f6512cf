import { basename } from "node:path";
import type { StateSource } from "../contract/agent-state.js";
import type { Reason } from "../contract/reason.js";
import type { StatusFile } from "../contract/status.js";
import type { RunContext } from "./context.js";
import type { TaskRun } from "./task-run.js";

/** A state a task moves into (pending is where it starts). */
export type TaskTransition =
  | { to: "running" }
  | { to: "success" }
  | { to: "failed"; reason: Reason; detail: string | null }
  | { to: "skipped"; reason: "dependency_failed" | "cancelled"; detail: string };

/**
 * The one way a task changes state. The change goes to the ledger, the task journal and the
 * status file, in that order, so whoever sees the status file (an operator, a test, a resume)
 * can rely on the other two; then the progress display hears of it.
 */
export async function transition(ctx: RunContext, t: TaskRun, change: TaskTransition): Promise<void> {
  t.state = change.to;
  if (change.to !== "running") {
    t.finishedAt = ctx.now();
    t.reason = change.to === "success" ? null : change.reason;
    t.detail = change.to === "success" ? null : change.detail;
  }
  const status = statusOf(ctx, t, change.to);
  await ctx.ledger.append(
    `task.${status.state}`,
    { ...status, gates: change.to === "running" ? [] : t.gates, branch: t.branch, commit: t.commit },
    t.id,
  );
  ctx.journal.write(t);
  ctx.status.set(status);
  if (change.to === "failed") ctx.notifier.taskFailed(t);
  ctx.onChange();
}

/**
 * An interactive task's agent started or stopped waiting for input (since: when its screen went
 * still; null: it changed again). Not a change of state: the running status file is rewritten
 * with it, the ledger records it, and a wait is notified.
 */
export async function markWaiting(
  ctx: RunContext,
  t: TaskRun,
  since: number | null,
  asks: string | null = null,
  by: StateSource | null = null,
): Promise<void> {
  t.waitingSince = since;
  t.waitingFor = since === null ? null : asks;
  await ctx.ledger.append(
    since === null ? "task.input_resumed" : "task.waiting_input",
    {
      attempt: t.attempts,
      ...(since === null ? {} : { since: new Date(since).toISOString(), asks }),
      ...(by ? { by } : {}),
    },
    t.id,
  );
  ctx.journal.write(t);
  if (t.state === "running") ctx.status.set(statusOf(ctx, t, "running"));
  if (since !== null) ctx.notifier.taskWaitingInput(t.id, since, asks);
  ctx.onChange();
}

/**
 * A resumed run's status files, rewritten from the task journal: a driver killed between
 * writing a status file's temp copy and renaming it leaves the task's previous file in place
 * (a finished task still `.running`).
 */
export function rewriteStatusFiles(ctx: RunContext, tasks: Iterable<TaskRun>): void {
  for (const t of tasks) if (t.state !== "pending") ctx.status.set(statusOf(ctx, t, t.state));
}

function statusOf(ctx: RunContext, t: TaskRun, state: StatusFile["state"]): StatusFile {
  const waiting =
    state === "running" && ctx.plans.get(t.id)?.interactive
      ? {
          waiting_input: t.waitingSince !== null,
          waiting_since: t.waitingSince === null ? null : new Date(t.waitingSince).toISOString(),
          waiting_for: t.waitingFor === null ? null : ctx.redactor.redact(t.waitingFor),
        }
      : {};
  // A scale-out task's session is on its worker's tmux server, on that worker's host.
  const remote = t.hosts.at(-1);
  return {
    task_id: t.id,
    state,
    run_id: ctx.runId,
    session: t.session,
    socket: remote ? basename(remote.socket) : ctx.socketName,
    socket_path: remote ? remote.socket : ctx.socketPath,
    ...(remote ? { host: remote.host, worker: remote.worker } : {}),
    attempt: t.attempts,
    started_at: t.startedAt === null ? null : new Date(t.startedAt).toISOString(),
    finished_at: t.finishedAt === null ? null : new Date(t.finishedAt).toISOString(),
    exit_code: t.exitCode,
    reason: t.reason,
    detail: t.detail === null ? null : ctx.redactor.redact(t.detail),
    ...waiting,
  };
}
