import type { DecisionStatus } from "../contract/decision.js";
import type { Reason } from "../contract/reason.js";
import type { AttemptMetrics } from "../contract/report.js";

/** One attempt as the metrics see it: how it ended, and what its agent decided. */
export interface AttemptFacts {
  /** null: it passed every gate. */
  reason: Reason | null;
  /** Its agent's decision: a valid one's status, `invalid` (quarantined), or null when it left none. */
  decision: DecisionStatus | "invalid" | null;
}

/** One task's attempts, in order, and whether the task succeeded. */
export interface TaskAttempts {
  succeeded: boolean;
  attempts: readonly AttemptFacts[];
}

/** The run's attempt metrics (AttemptMetrics), from each task's attempts; pure. */
export function attemptMetrics(tasks: readonly TaskAttempts[]): AttemptMetrics {
  const all = tasks.flatMap((t) => t.attempts);
  const count = (decision: AttemptFacts["decision"]): number =>
    all.filter((a) => a.decision === decision).length;
  const rate = (n: number): number | null => (all.length === 0 ? null : round(n / all.length, 4));
  const escalated = count("escalate_to_max");
  const blocked = count("blocked");
  const invalid = count("invalid");
  const succeeded = tasks.filter((t) => t.succeeded);
  const attemptsOfSucceeded = succeeded.reduce((n, t) => n + t.attempts.length, 0);
  return {
    total: all.length,
    with_decision: all.filter((a) => a.decision !== null).length,
    escalated,
    blocked,
    invalid,
    escalation_rate: rate(escalated),
    block_rate: rate(blocked),
    invalid_rate: rate(invalid),
    per_successful_task: succeeded.length === 0 ? null : round(attemptsOfSucceeded / succeeded.length, 2),
    // An earlier attempt that failed or handed over (an escalation may pass its gates); a first
    // success redone after a merge conflict is neither.
    succeeded_after_feedback: succeeded.filter((t) => t.attempts.slice(0, -1).some(handedOver)).length,
  };
}

function handedOver(a: AttemptFacts): boolean {
  return a.reason !== null || (a.decision !== null && a.decision !== "completed");
}

function round(n: number, places: number): number {
  const f = 10 ** places;
  return Math.round(n * f) / f;
}
