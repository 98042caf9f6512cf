import { z } from "zod";
import { Reason } from "./reason.js";

/** A command's output the section quotes: cut at termorch's bound, redacted, and where all of it is. */
const OutputTail = z.strictObject({
  command: z.string().describe("The command line that ran (redacted)"),
  exit_code: z
    .number()
    .int()
    .nullable()
    .describe("Its exit code; null when it timed out, was killed or its status was lost"),
  how: z.string().describe("How it ended, in words: `exit code 1`, `timed out`, `killed by SIGKILL`…"),
  failure_lines: z
    .array(z.string())
    .describe(
      "The first lines of its output that look like a failure (error, fail, assert, expected, panic…)",
    ),
  tail: z.string().describe("The end of its output (stderr after stdout), at most 200 lines and 16 KiB"),
  truncated: z.boolean().describe("The output was longer than `tail`: `logs` holds all of it"),
  logs: z.array(z.string()).describe("Its logs, relative to the run directory"),
});

/**
 * The machine-readable block at the end of a feedback section (a fenced block whose info string
 * is `json termorch-feedback`): the same facts as the prose above it, for a tool or an agent that
 * parses rather than reads. In the prompt of the attempt after a failed one, and in
 * `artifacts/<task>/attempt-<n>/feedback.md`.
 */
export const FeedbackBlock = z
  .strictObject({
    schema_version: z.literal(1),
    task: z.string(),
    attempt: z
      .number()
      .int()
      .min(1)
      .describe("The attempt that failed (the section is given to the next one)"),
    agent: z.string().describe("The agent that attempt ran"),
    reason: Reason.describe("Why it failed (the report's `reason`)"),
    detail: z.string().nullable().describe("termorch's one-line account of it (the report's `detail`)"),
    failed_gates: z
      .array(z.strictObject({ name: z.string(), detail: z.string().nullable() }))
      .describe("The gates that failed, in the order they ran"),
    tests: OutputTail.nullable().describe(
      "The failed tests_cmd (the task's, or the run's on the integration)",
    ),
    missing_artifacts: z.array(z.string()).describe("The required_artifacts patterns nothing matched"),
    handoff: z
      .strictObject({
        missing_sections: z.array(z.string()),
        listed_not_changed: z
          .array(z.string())
          .describe("Files its Files Touched lists that the task did not change"),
        changed_not_listed: z
          .array(z.string())
          .describe("Files the task changed that its Files Touched leaves out"),
      })
      .nullable()
      .describe("The handoff gate's findings; null when it passed or was not asked for"),
    outside_allowed_paths: z.array(z.string()).describe("Changed files outside the task's allowed_paths"),
    timeout_s: z.number().nullable().describe("reason timeout: after how many seconds it was ended"),
    agent_error: z.string().nullable().describe("reason agent_error: the CLI's own message (redacted)"),
    screen: z.string().nullable().describe("reason prompt_not_delivered: the screen as termorch last saw it"),
    secrets: z
      .array(z.string())
      .describe(
        "Where the secrets gate found a secret's value (files, and the variable's name): never the value",
      ),
    decision: z
      .strictObject({
        status: z.string(),
        reason: z.string(),
        notes: z.string().nullable(),
      })
      .nullable()
      .describe("What the agent decided itself ($TERMORCH_DECISION), when it asked for a stronger agent"),
    review: z
      .strictObject({
        reviewer: z.string().describe("The reviewer agent"),
        verdict: z
          .literal("request_changes")
          .nullable()
          .describe("null: it wrote no valid verdict (`problems` say why)"),
        summary: z.string().nullable(),
        comments: z.array(
          z.strictObject({
            file: z.string().nullable(),
            line: z.number().int().nullable(),
            body: z.string(),
          }),
        ),
        problems: z.array(z.string()).describe("Why its verdict was not one"),
      })
      .nullable()
      .default(null)
      .describe("reason review: what its reviewer asked to change (success_criteria.review); null otherwise"),
    rejection: z
      .strictObject({ by: z.string(), reason: z.string().nullable() })
      .nullable()
      .default(null)
      .describe("reason rejected: who rejected its result (its `approval`), and why; null otherwise"),
    plan_problems: z
      .array(z.string())
      .nullable()
      .default(null)
      .describe(
        "`termorch plan`: what `termorch validate` found in the assignments file the planner wrote; null otherwise",
      ),
    summary: z
      .string()
      .nullable()
      .describe("What its agent said it did (agent_result.summary); null when nothing"),
    changed_files: z.array(z.string()).describe("The files its work changed against the task's start"),
    next_starts_from: z
      .enum(["base", "last_work", "integration"])
      .describe(
        "Where the next attempt's working tree starts: `base`, the task's start (the failed work is not there); `last_work`, the failed attempt's work, to fix; `integration`, the run's integration before the task (a bisect's fix)",
      ),
  })
  .describe("The facts of a feedback section ('What went wrong in attempt N'), for tools");
export type FeedbackBlock = z.infer<typeof FeedbackBlock>;
