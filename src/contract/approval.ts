import { z } from "zod";

/** What the run does when no one decides within an approval's `timeout_s`. */
export const OnApprovalTimeout = z.enum(["reject", "stop"]);

const Timeout = {
  timeout_s: z.number().positive().optional().describe("Seconds to wait for a decision; default: no limit"),
  on_timeout: OnApprovalTimeout.default("reject").describe(
    '"reject" (the default): no decision in time counts as a rejection; "stop": the run stops at its wave boundary with a session handoff (as `termorch stop --at-boundary`), to be resumed once someone decided',
  ),
};

/**
 * A task's `approval`: a person approves it before it starts (`start`), or its result before it
 * counts as done and is merged (`result`).
 */
export const ApprovalSetting = z
  .union([z.enum(["start", "result"]), z.strictObject({ at: z.enum(["start", "result"]), ...Timeout })])
  .describe(
    'A person decides, with `termorch approve|reject <run> <task>`, the MCP tools `approve`/`reject`, or a button in `serve`: "start", before the task starts (a rejection ends it with reason `rejected`); "result", once its attempt passed every gate (its review too), before it counts as done (a rejection\'s reason is the next attempt\'s feedback, or ends it with reason `rejected` when no attempts are left). Meanwhile the task is `waiting_approval` and the rest of the run goes on',
  );
export type ApprovalSetting = z.infer<typeof ApprovalSetting>;

/** `merge.approval`: a person approves the run's integration before it is merged. */
export const MergeApprovalSetting = z
  .union([z.boolean(), z.strictObject(Timeout)])
  .describe(
    "A person approves the integration of every task (once its run-level gates and review passed) before it is merged, with `termorch approve|reject <run>`, the MCP tools, or `serve`; a rejection merges nothing (validation failed, its reason in the report)",
  );
export type MergeApprovalSetting = z.infer<typeof MergeApprovalSetting>;

/** An approval as a wait reads it. */
export interface ApprovalAsked {
  at: "start" | "result" | "merge";
  timeoutS: number | null;
  onTimeout: "reject" | "stop";
}

export function taskApproval(setting: ApprovalSetting | undefined): ApprovalAsked | null {
  if (setting === undefined) return null;
  if (typeof setting === "string") return { at: setting, timeoutS: null, onTimeout: "reject" };
  return { at: setting.at, timeoutS: setting.timeout_s ?? null, onTimeout: setting.on_timeout };
}

export function mergeApproval(setting: MergeApprovalSetting | undefined): ApprovalAsked | null {
  if (setting === undefined || setting === false) return null;
  if (setting === true) return { at: "merge", timeoutS: null, onTimeout: "reject" };
  return { at: "merge", timeoutS: setting.timeout_s ?? null, onTimeout: setting.on_timeout };
}

/** A wait for a decision, as state.json keeps it (a resume waits on; `termorch approve` checks it). */
export const ApprovalWait = z.strictObject({
  at: z.enum(["start", "result", "merge"]),
  /** The attempt whose result waits (0: before the first, or the merge). */
  attempt: z.number().int().min(0),
  since: z.number(),
  /** No decision by then (epoch ms) is its timeout; null: none. */
  until: z.number().nullable(),
  /** A start approved, the task not started yet (a stop came before its slot): it starts unasked. */
  approved: z.boolean().optional(),
});
export type ApprovalWait = z.infer<typeof ApprovalWait>;

/**
 * A person's decision, written by `termorch approve|reject` (or MCP, or serve) where the run's
 * driver reads it (`<private>/approvals/<task or integration>.json`); it answers the wait it
 * names (`at`, `attempt`), no other.
 */
export const ApprovalDecision = z.strictObject({
  decision: z.enum(["approve", "reject"]),
  at: z.enum(["start", "result", "merge"]),
  attempt: z.number().int().min(0),
  /** The wait it answers (its `since`): a decision for an earlier wait answers no later one. */
  since: z.number(),
  reason: z
    .string()
    .max(16 * 1024)
    .nullable(),
  /** Who: the OS user, or "mcp", or "serve". */
  by: z.string().min(1),
  decided_at: z.string(),
});
export type ApprovalDecision = z.infer<typeof ApprovalDecision>;

/** A wait for a decision as the status files and the views show it. */
export const ApprovalView = z
  .strictObject({
    at: z.enum(["start", "result", "merge"]),
    attempt: z
      .number()
      .int()
      .min(0)
      .describe("The attempt whose result waits (0: before the first, or the merge)"),
    since: z.string().describe("When the wait began (ISO 8601)"),
    until: z.string().nullable().describe("When its timeout_s ends it (ISO 8601); null: no timeout"),
  })
  .describe(
    "It waits for a person's decision: `termorch approve|reject <run> [task]`, the MCP tools `approve`/`reject`, or serve's buttons",
  );
export type ApprovalView = z.infer<typeof ApprovalView>;

export function approvalView(w: ApprovalWait): ApprovalView {
  return {
    at: w.at,
    attempt: w.attempt,
    since: new Date(w.since).toISOString(),
    until: w.until === null ? null : new Date(w.until).toISOString(),
  };
}

/** A wait in words, the same in every view: what waits, since when, and how to answer. */
export function approvalLine(w: ApprovalView): string {
  const what =
    w.at === "start" ? "its start" : w.at === "result" ? `attempt ${w.attempt}'s result` : "the merge";
  return `waiting for a person to approve ${what} (since ${w.since}${w.until ? `, until ${w.until}` : ""}): termorch approve|reject <run> [task]`;
}
