import { readFileSync } from "node:fs";
import { join } from "node:path";
import type { Gate } from "../contract/report.js";
import type { ReviewRecord } from "../contract/review.js";
import type { AttemptSide } from "../task/attempt.js";
import { judge, ledgerFacts, recordOf, reviewChange } from "../task/review.js";
import { outOfBudget, usdLeftFor } from "../task/spend.js";
import { INTEGRATION_REVIEW } from "../task/task-plan.js";

/** At most this much of each task's context goes into the run reviewer's prompt. */
const CONTEXT_BYTES = 32 * 1024;

/**
 * `merge.review`: once the run-level gates passed on the integration, a reviewer judges the whole
 * change from the run's base, as a task's reviewer judges a task's (src/task/review.ts). Its gate
 * is `run.review`; its record, the report's `merge.review`.
 */
export async function reviewIntegration(
  side: AttemptSide,
  integration: string,
  gates: readonly Gate[],
): Promise<{ gate: Gate; record: ReviewRecord | null } | "detached"> {
  const { run, ports, recorder } = side;
  const review = run.review!;
  const failed = (detail: string): { gate: Gate; record: null } => ({
    gate: { name: "run.review", required: true, passed: false, detail },
    record: null,
  });
  if (!run.settings.verify)
    return {
      gate: { name: "run.review", required: true, passed: null, detail: "skipped (verify: false)" },
      record: null,
    };
  const spent = outOfBudget(run, recorder, null);
  if (spent !== null) return failed(`${spent}; the review of the integration could not run`);
  const reviewed = await reviewChange(side, review, {
    id: INTEGRATION_REVIEW,
    attempt: 1,
    from: run.git!.baseCommit,
    to: integration,
    heading: `Review of run ${run.runId}: the integration of its ${run.order.length} tasks`,
    intro:
      "Agents did the tasks below, each on a branch of its own, and termorch merged their changes into the one change below; each task's change passed its own checks.",
    context: () =>
      run.order
        .map((id) => {
          const text = readFileSync(run.plans.get(id)!.prompt.context)
            .subarray(0, CONTEXT_BYTES)
            .toString("utf8");
          return `## Task ${id}\n\n${text}`;
        })
        .join("\n\n"),
    handoff: null,
    gates,
    keep: { root: join(run.runDir, "artifacts", INTEGRATION_REVIEW), rel: "review.json" },
    usdLeft: () => usdLeftFor(run, recorder, null),
  });
  if (reviewed === "detached") return "detached";
  if (typeof reviewed === "string") return failed(reviewed);
  const record = recordOf(review.agent.name, reviewed);
  await ports.ledger.append("run.reviewed", { commit: integration, ...ledgerFacts(record) });
  const judged = judge(review.agent.name, reviewed);
  return {
    gate: { name: "run.review", required: true, passed: judged.approved, detail: judged.detail },
    record,
  };
}
