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
  how: { from: AttemptRecord["started_from"]; escalated: boolean; feedback: string | null },
): AttemptRecord {
  return {
    n,
    agent,
    started_from: how.from,
    escalated: how.escalated,
    feedback: how.feedback,
    started_at: new Date(now).toISOString(),
    finished_at: null,
    reason: null,
    detail: null,
    decision: null,
    work_ref: null,
    usage: null,
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

/** Attempts that count against `retries`: an escalation the agent asked for does not. */
export function countedAttempts(history: readonly AttemptRecord[]): number {
  return history.filter((r) => r.decision?.status !== "escalate_to_max").length;
}
