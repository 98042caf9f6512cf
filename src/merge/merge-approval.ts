import { type ApprovalWait, mergeApproval } from "../contract/approval.js";
import type { Gate } from "../contract/report.js";
import { approvalWait, awaitDecision, decisionText } from "../task/approval.js";
import type { AttemptSide } from "../task/attempt.js";
import { INTEGRATION_REVIEW } from "../task/task-plan.js";
import type { MergeProgressSink } from "./bisect.js";

/**
 * `merge.approval`: once the run-level gates and the review passed, a person approves the
 * integration before it is merged (gate `run.approval`); the merge shows it waits (its step
 * `waiting_approval`). "stopped": the run stopped meanwhile.
 */
export async function approveMerge(
  side: Pick<AttemptSide, "run" | "ports" | "stop">,
  progress: MergeProgressSink,
  at: { culprit: string | null; left: ApprovalWait | null },
): Promise<Gate | "detached" | "stopped" | null> {
  const { culprit } = at;
  const { run, ports } = side;
  const { input } = run;
  const asked = mergeApproval(input.assignments.mode.merge?.approval ?? input.config.merge?.approval);
  if (asked === null) return null;
  const wait = approvalWait(asked, 0, ports.now(), at.left);
  const end = await awaitDecision(side, INTEGRATION_REVIEW, wait, asked.onTimeout, async (w) => {
    if (w !== null) {
      await ports.ledger.append("run.waiting_approval", {
        at: w.at,
        attempt: w.attempt,
        until: w.until === null ? null : new Date(w.until).toISOString(),
      });
      progress({ step: "waiting_approval", approval: w, probe: null, culprit, red_on_base: false });
      ports.notifier.waitingApproval(null, w);
    } else progress({ step: "validating", probe: null, culprit, red_on_base: false });
  });
  if (end === "detached" || end === "stopped") return end;
  const approved = end !== "timeout" && end.decision === "approve";
  return { name: "run.approval", required: true, passed: approved, detail: decisionText(end, wait) };
}
