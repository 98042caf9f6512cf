/**
 * Approval by a person (a task's `approval`, the merge's `merge.approval`): the run waits for a
 * decision that `termorch approve|reject` (or MCP, or serve) writes into the run's private folder,
 * and takes the one that answers its wait (what, which attempt). The wait is in state.json, so a
 * resumed driver waits on, and takes a decision given while none ran. Every decision is recorded
 * in the ledger: who, when, what (AUTO-008).
 */
import { readFileSync, renameSync, rmSync } from "node:fs";
import { type ApprovalAsked, ApprovalDecision, type ApprovalWait } from "../contract/approval.js";
import { approvalFileOf } from "../fs/private-dir.js";
import type { AttemptSide } from "./attempt.js";
import { DETACHED, type TaskEnd } from "./executor.js";
import { killPoint } from "./faults.js";
import { INTEGRATION_REVIEW } from "./task-plan.js";

/** How often the decision file is looked for: a person's answer needs no faster. */
const POLL_MS = 500;

/** How a wait ended. */
export type WaitEnd = ApprovalDecision | "timeout" | "stopped" | "detached";

/** The wait to show (and keep) for `asked`: the one a dead driver left, when it is this one, goes on. */
export function approvalWait(
  asked: ApprovalAsked,
  attempt: number,
  now: number,
  left: ApprovalWait | null,
): ApprovalWait {
  if (left && left.at === asked.at && left.attempt === attempt) return left;
  return {
    at: asked.at,
    attempt,
    since: now,
    until: asked.timeoutS === null ? null : now + asked.timeoutS * 1000,
  };
}

/**
 * Waits for the decision that answers `wait` (the file of `id`: a task's, or `integration` for
 * the merge), its timeout, or the run's stop; `show` keeps the wait shown (null: it ended).
 * "detached": the run leaves it waiting (a detach, a stop at the boundary, its timeout's "stop").
 */
export async function awaitDecision(
  side: Pick<AttemptSide, "run" | "ports" | "stop">,
  id: string,
  wait: ApprovalWait,
  onTimeout: ApprovalAsked["onTimeout"],
  show: (wait: ApprovalWait | null) => Promise<void>,
): Promise<WaitEnd> {
  const { run, ports, stop } = side;
  const file = approvalFileOf(run.privateDir, id);
  await show(wait);
  await killPoint(run.fault, "kill-while-waiting-approval", id);
  const end = await new Promise<WaitEnd>((resolve) => {
    let timer: NodeJS.Timeout | undefined;
    let over = false;
    let unsubscribe = (): void => {};
    const done = (how: WaitEnd): void => {
      if (over) return;
      over = true;
      clearTimeout(timer);
      unsubscribe();
      resolve(how);
    };
    const look = (): void => {
      const decided = decisionIn(file, wait);
      if (decided) done(decided);
      else if (wait.until !== null && ports.now() >= wait.until) done("timeout");
      else {
        const left = wait.until === null ? POLL_MS : Math.min(POLL_MS, wait.until - ports.now());
        timer = setTimeout(look, Math.max(1, left));
      }
    };
    // A stop already asked for ends it at once (onChange calls back at once then).
    // At a boundary the wait is left as it is, for the resumed run to wait on.
    unsubscribe = stop.onChange(() => {
      if (stop.detaching || stop.atBoundary) done("detached");
      else if (stop.ending) done("stopped");
    });
    if (over) unsubscribe();
    else look();
  });
  if (end === "detached") return end;
  // No decision in time, and its on_timeout is "stop": the run stops at its boundary (stop reason
  // hitl_gate), the wait left for the resumed run.
  if (end === "timeout" && onTimeout === "stop") {
    stop.request("boundary", "hitl_gate");
    return "detached";
  }
  if (end !== "stopped") {
    const facts = {
      at: wait.at,
      attempt: wait.attempt,
      ...(end === "timeout"
        ? { decision: "timeout" as const, reason: decisionText(end, wait), by: "termorch" }
        : { decision: end.decision, reason: end.reason, by: end.by, decided_at: end.decided_at }),
    };
    if (id === INTEGRATION_REVIEW) await ports.ledger.append("run.approval_decided", facts);
    else await ports.ledger.append("task.approval_decided", facts, id);
  }
  await show(null);
  return end;
}

/**
 * The decision in `file` when it answers `wait`, taken (moved aside first, so that a decision
 * written meanwhile is never the one removed); a stale or malformed one is dropped, no answer.
 */
function decisionIn(file: string, wait: ApprovalWait): ApprovalDecision | null {
  const taken = `${file}.taken`;
  try {
    renameSync(file, taken);
  } catch {
    return null;
  }
  try {
    const d = ApprovalDecision.parse(JSON.parse(readFileSync(taken, "utf8")));
    return d.at === wait.at && d.attempt === wait.attempt && d.since === wait.since ? d : null;
  } catch {
    return null;
  } finally {
    rmSync(taken, { force: true });
  }
}

/** A wait's end in a line: who decided what (a gate's detail, a task's). */
export function decisionText(end: Exclude<WaitEnd, "detached">, wait: ApprovalWait): string {
  if (end === "timeout")
    return `no one decided within ${Math.round(((wait.until ?? wait.since) - wait.since) / 1000)} s of its approval's timeout_s`;
  if (end === "stopped") return "the run stopped while it waited for approval";
  const why = end.reason ? `: ${end.reason}` : "";
  return `${end.decision === "approve" ? "approved" : "rejected"} by ${end.by}${why}`;
}

/**
 * Before a task whose `approval` is "start" takes a slot: its wait for a decision. null: it may
 * start (approved, or the run stopped: then it is skipped as any task not started); else its end
 * (rejected, or the run detached).
 */
export async function admitTask(
  side: Pick<AttemptSide, "run" | "ports" | "stop" | "recorder">,
  taskId: string,
): Promise<TaskEnd | null> {
  const { run, ports, recorder } = side;
  const t = recorder.get(taskId);
  const asked = run.plans.get(taskId)?.approval;
  if (asked?.at !== "start" || t.state !== "pending" || t.attempts > 0) return null;
  if (t.waiting.approval?.approved) return null;
  const wait = approvalWait(asked, 0, ports.now(), t.waiting.approval);
  const end = await awaitDecision(side, taskId, wait, asked.onTimeout, (w) =>
    recorder.markWaitingApproval(taskId, w),
  );
  if (end === "detached") return DETACHED;
  if (end === "stopped") return null;
  // Kept until it starts (execute.ts clears it): a stop before its slot leaves it approved.
  if (end !== "timeout" && end.decision === "approve") {
    await recorder.markWaitingApproval(taskId, { ...wait, approved: true });
    return null;
  }
  await recorder.transition(taskId, {
    to: "failed",
    reason: "rejected",
    detail: `it was ${decisionText(end, wait)} before it started`,
  });
  return { kind: "done", ok: false };
}
