import { z } from "zod";
import { ApprovalView } from "./approval.js";
import { NoNul, TimeoutS } from "./assignments.js";
import { BudgetStanding } from "./budget.js";
import { RedoStep } from "./merge-policy.js";
import { Reason } from "./reason.js";
import { Report } from "./report.js";

/** The events a notification command can be sent. */
export const NotifyEventName = z.enum([
  "task.waiting_input",
  "task.waiting_quota",
  "task.waiting_approval",
  "run.waiting_approval",
  "task.failed",
  "task.needs_human",
  "run.budget_warning",
  "run.budget_exhausted",
  "run.finished",
]);
export type NotifyEventName = z.infer<typeof NotifyEventName>;

export const NOTIFY_TIMEOUT_S = 10;

/** Config `notify`: a command told about a run's events (docs/guides/daemon-and-cron.md: Notifications). */
export const NotifyConfig = z
  .strictObject({
    command: z
      .array(NoNul)
      .min(1)
      .describe(
        "argv of the command run once per event, without a shell; it reads one JSON event (`termorch schema notify-event`) on standard input",
      ),
    events: z
      .array(NotifyEventName)
      .min(1)
      .default([...NotifyEventName.options])
      .describe("The events sent to the command (default: all of them)"),
    timeout_s: TimeoutS.default(NOTIFY_TIMEOUT_S).describe(
      "Seconds one delivery may take; then the command's process group is killed and the failure logged",
    ),
  })
  .describe(
    "Run a command for each of a run's notable events (a task failed, a task waits for input, a task needs a person, the run finished). Its failures are logged (ledger event notify.failed), never fatal, and never change the run's exit code",
  );
export type NotifyConfig = z.infer<typeof NotifyConfig>;

const Common = {
  schema_version: z.literal(1),
  run_id: z.string(),
  run_dir: z.string().describe("The run directory (its report, logs and ledger)"),
  time: z.string().describe("When the event happened (ISO 8601)"),
};

/**
 * One line on a notification command's standard input. Every string in it went through the
 * run's redactor, as everything termorch writes does.
 */
export const NotifyEvent = z
  .discriminatedUnion("event", [
    z.strictObject({
      event: z.literal("task.failed"),
      ...Common,
      task_id: z.string(),
      reason: Reason.describe("Why the task failed (the report's `reason`)"),
      detail: z.string().nullable().describe("What happened, as the report's task `detail` says it"),
      attempts: z.number().int().min(0).describe("Attempts the task made, the failed last one included"),
    }),
    z.strictObject({
      event: z.literal("task.waiting_input"),
      ...Common,
      task_id: z.string(),
      since: z.string().describe("Since when the agent has been waiting for input (ISO 8601)"),
      asks: z
        .string()
        .nullable()
        .describe(
          "What it waits for, as termorch recognised it (a question of its CLI, its next message, an unrecognised screen)",
        ),
    }),
    z
      .strictObject({
        event: z.literal("task.needs_human"),
        ...Common,
        task_id: z.string(),
        reason: z.string().nullable().describe("Its agent's reason (the report's task `detail`)"),
        attempts: z.number().int().min(0).describe("Attempts the task made"),
      })
      .describe(
        'A task ended blocked and its agent asked for a person (its decision\'s routing.recommended_next_actor "human"); sent after its task.failed',
      ),
    z
      .strictObject({
        event: z.literal("task.waiting_quota"),
        ...Common,
        task_id: z.string(),
        until: z.string().describe("When the limit lifts and its next attempt starts (ISO 8601)"),
      })
      .describe("A task's agent's CLI gave up on a rate limit or a usage cap: the task waits for it to lift"),
    z
      .strictObject({
        event: z.literal("task.waiting_approval"),
        ...Common,
        task_id: z.string(),
        approval: ApprovalView,
      })
      .describe("A task waits for a person to approve its start or its attempt's result (its `approval`)"),
    z
      .strictObject({ event: z.literal("run.waiting_approval"), ...Common, approval: ApprovalView })
      .describe("The run's integration waits for a person's approval before it is merged (merge.approval)"),
    z
      .strictObject({ event: z.literal("run.budget_warning"), ...Common, budget: BudgetStanding })
      .describe("80 % of the run's budget is spent (`resource_limits.max_cost_usd` or `max_tokens`)"),
    z
      .strictObject({ event: z.literal("run.budget_exhausted"), ...Common, budget: BudgetStanding })
      .describe(
        "The run's budget is spent: no new attempt starts, and running ones end as `resource_limits.on_budget` says",
      ),
    z.strictObject({
      event: z.literal("run.finished"),
      ...Common,
      exit_code: z.number().int().describe("The run's exit code (the report's `exit_code`)"),
      summary: Report.shape.summary.describe("The report's `summary`"),
      error: Report.shape.error.describe(
        "The report's `error`: set when the run stopped outside its tasks (an internal error), else null",
      ),
      report: z
        .string()
        .nullable()
        .describe("Path of execution_report.json; null when it could not be written"),
      redo: z
        .array(RedoStep)
        .describe(
          "A merge that halted on a conflict: each task it left out, its artifacts/redo file and the `termorch run` that redoes it; empty otherwise",
        ),
    }),
  ])
  .describe("One event sent to the config's `notify.command` on its standard input");
export type NotifyEvent = z.infer<typeof NotifyEvent>;
