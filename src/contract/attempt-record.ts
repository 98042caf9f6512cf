import { z } from "zod";
import { Usage } from "./agent-result.js";
import { Reason } from "./reason.js";
import { ReviewRecord } from "./review.js";

/**
 * One attempt of a task, as the report's `attempt_history` (and state.json's `history`) keeps
 * it: which agent ran, where it started, what it was told, what it decided, how it ended.
 */
export const AttemptRecord = z.strictObject({
  n: z
    .number()
    .int()
    .min(1)
    .describe("The attempt's number (TERMORCH_ATTEMPT; its logs and artifacts/<task>/attempt-<n>/)"),
  agent: z.string().describe("The agent it ran (the task's, or one of its escalation list)"),
  started_from: z
    .enum(["base", "last_work", "last_commit", "integration"])
    .nullable()
    .describe(
      "Where its working tree started: null for the first attempt (the task's start); `base`: the task's start again (retry_from base); `last_work`: the failed attempt's work as it left it; `last_commit`: the last committed state (after a timeout or a lost session, whose worktree may be torn); `integration`: the run's integration of the tasks merged before it (a merge redo after a conflict, or a bisect's fix)",
    ),
  escalated: z
    .boolean()
    .describe("It runs a stronger agent because the attempt before it asked for one (escalate_to_max)"),
  feedback: z
    .string()
    .nullable()
    .describe(
      "Its feedback section ('What went wrong in attempt n-1'), relative to the run directory; null: none",
    ),
  started_at: z.string().nullable(),
  finished_at: z.string().nullable().describe("null while it runs"),
  reason: Reason.nullable().describe("How it ended: null when it passed every gate (or is still running)"),
  detail: z.string().nullable(),
  decision: z
    .strictObject({
      status: z.enum(["completed", "escalate_to_max", "blocked", "invalid"]),
      reason: z
        .string()
        .nullable()
        .describe("The agent's reason (redacted); for `invalid`, the problems found"),
      confidence: z.number().nullable(),
      recommended_next_actor: z.string().nullable(),
      file: z
        .string()
        .describe(
          "The kept envelope, relative to the run directory (decision.json or decision.quarantined.json)",
        ),
    })
    .nullable()
    .describe("What its agent decided in $TERMORCH_DECISION; null when it wrote nothing"),
  work_ref: z
    .string()
    .nullable()
    .describe(
      "refs/termorch/<run>/work/<task>/<n>: the commit of its work, kept until the run merges, or `termorch clean`; null when there is none",
    ),
  usage: Usage.nullable()
    .default(null)
    .describe(
      "Its agent's tokens and cost (the task's `usage` adds them up); null when its CLI reported none",
    ),
  resets_at: z
    .string()
    .nullable()
    .default(null)
    .describe(
      "Reason `rate_limited`: when the limit lifts (ISO), as its CLI said it; null when it said none (or another reason)",
    ),
  waited_until: z
    .string()
    .nullable()
    .default(null)
    .describe(
      "It started after waiting for the limit the attempt before it met to lift, until then (ISO); null: no wait",
    ),
  fallback_for: z
    .string()
    .nullable()
    .default(null)
    .describe(
      "It ran its agent (a `rate_limit.fallback`) in place of this one, which was rate limited; null: no fallback",
    ),
  review: ReviewRecord.nullable().default(null),
});
export type AttemptRecord = z.infer<typeof AttemptRecord>;

/** An attempt in a line: its agent (escalated to?), where it started, what it was told and decided. */
export function attemptSummary(a: AttemptRecord): string {
  const how = a.escalated
    ? `escalated to ${a.agent}`
    : a.fallback_for
      ? `agent ${a.agent} in place of ${a.fallback_for}, rate limited`
      : `agent ${a.agent}`;
  const from = a.started_from ? `, from ${a.started_from.replace("_", " ")}` : "";
  const told = a.feedback ? `; told what went wrong: ${a.feedback}` : "";
  const decided = a.decision
    ? `; it decided ${a.decision.status}${a.decision.reason ? ` (${a.decision.reason})` : ""}`
    : "";
  const waited = a.waited_until ? `; after waiting for a rate limit until ${a.waited_until}` : "";
  return `attempt ${a.n} (${how}${from})${waited}${told}${decided}`;
}
