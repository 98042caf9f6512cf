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

function statusOf(ctx: RunContext, t: TaskRun, state: StatusFile["state"]): StatusFile {
  return {
    task_id: t.id,
    state,
    run_id: ctx.runId,
    session: t.session,
    socket: ctx.socketName,
    socket_path: ctx.socketPath,
    attempt: t.attempts,
    started_at: t.startedAt === null ? null : new Date(t.startedAt).toISOString(),
    finished_at: t.finishedAt === null ? null : new Date(t.finishedAt).toISOString(),
    exit_code: t.exitCode,
    reason: t.reason,
    detail: t.detail === null ? null : ctx.redactor.redact(t.detail),
  };
}
