import type { AttemptRecord } from "../contract/attempt-record.js";

/**
 * A task's attempt history (TaskRun.history, the report's attempt_history): pure updates of
 * its records, one opened as an attempt is counted and closed once its gates decided.
 */

/** The record of attempt n as it starts. */
export function openRecord(
  n: number,
  agent: string,
  now: number,
  how: {
    from: AttemptRecord["started_from"];
    escalated: boolean;
    feedback: string | null;
    /** It waited for a rate limit to lift until then (epoch ms); null: no wait. */
    waitedUntil?: number | null;
    /** The rate-limited agent it stands in for; null: none. */
    fallbackFor?: string | null;
  },
): AttemptRecord {
  return {
    n,
    agent,
    started_from: how.from,
    escalated: how.escalated,
    feedback: how.feedback,
    waited_until: how.waitedUntil ? new Date(how.waitedUntil).toISOString() : null,
    fallback_for: how.fallbackFor ?? null,
    resets_at: null,
    started_at: new Date(now).toISOString(),
    finished_at: null,
    reason: null,
    detail: null,
    decision: null,
    work_ref: null,
    usage: null,
    review: null,
  };
}

/** The history with its last record changed. */
export function amendedLast(
  history: readonly AttemptRecord[],
  patch: Partial<AttemptRecord>,
): AttemptRecord[] {
  const last = history.at(-1);
  return last ? [...history.slice(0, -1), { ...last, ...patch }] : [...history];
}

/** The history with its last attempt ended. */
export function closedHistory(
  history: readonly AttemptRecord[],
  now: number,
  end: Pick<AttemptRecord, "reason" | "detail" | "decision">,
): AttemptRecord[] {
  return amendedLast(history, { ...end, finished_at: new Date(now).toISOString() });
}

/**
 * Attempts that count against `retries`: an escalation the agent asked for does not, nor one its
 * CLI gave up on for a rate limit (the wait that follows is no try of the task).
 */
export function countedAttempts(history: readonly AttemptRecord[]): number {
  return history.filter((r) => r.decision?.status !== "escalate_to_max" && r.reason !== "rate_limited")
    .length;
}

/**
 * How long the task has lost to rate limits so far (ms): each wait (from the attempt before it to
 * the end of the wait), and each attempt that met a limit (its CLI's own retrying included).
 */
export function waitedFor(history: readonly AttemptRecord[]): number {
  const span = (from: string | null, to: string | null): number =>
    from && to ? Math.max(0, Date.parse(to) - Date.parse(from)) : 0;
  let total = 0;
  for (const [i, r] of history.entries()) {
    if (r.waited_until) total += span(history[i - 1]?.finished_at ?? r.started_at, r.waited_until);
    if (r.reason === "rate_limited") total += span(r.started_at, r.finished_at);
  }
  return total;
}
