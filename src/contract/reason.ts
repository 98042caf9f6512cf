import { z } from "zod";

/**
 * Why a task ended the way it did. One union, used by the runner, the status files and the
 * report alike (docs/contract.md, docs/guides/). `null` in the report means the task succeeded.
 */
export const Reason = z.enum([
  "exit_code",
  "timeout",
  "signal",
  "launch_error",
  "validation",
  "dependency_failed",
  "conflict",
  "cancelled",
  "lost",
  "agent_error",
  "setup",
  "no_changes",
  "prompt_not_delivered",
  "escalated",
  "blocked",
  "invalid_decision",
  "budget",
  "rate_limited",
  "review",
  "rejected",
]);
export type Reason = z.infer<typeof Reason>;

/** The three states of docs/contract.md plus `skipped`. */
export const TaskState = z.enum(["running", "success", "failed", "skipped"]);
export type TaskState = z.infer<typeof TaskState>;
