import { z } from "zod";
import { MergeApprovalSetting } from "./approval.js";
import { ReviewSetting } from "./review.js";

/** What the merge does when a task's changes conflict with those merged before it. */
export const OnConflict = z.enum(["halt", "redo"]);
export type OnConflict = z.infer<typeof OnConflict>;

/**
 * What the merge does when the run-level `tests_cmd` fails on the integration: "halt" stops
 * there; "bisect" finds the first task (in merge order) whose merge turns it red; "bisect_and_fix"
 * also gives that task new attempts on top of what merged before it.
 */
export const OnGateFailure = z.enum(["halt", "bisect", "bisect_and_fix"]);
export type OnGateFailure = z.infer<typeof OnGateFailure>;

export const DEFAULT_GATE_FIX_ATTEMPTS = 2;
/** A bound on the agents' time one red gate may cost. */
export const MAX_GATE_FIX_ATTEMPTS = 10;

export const DEFAULT_REDO_ATTEMPTS = 1;
/** A bound on the agents' time one conflict may cost. */
export const MAX_REDO_ATTEMPTS = 10;

/** `mode.merge` in the assignments and `merge` in the config (the assignments win, key by key). */
export const MergePolicy = z
  .strictObject({
    on_conflict: OnConflict.optional().describe(
      'What happens when a task\'s changes conflict with the tasks merged before it. "halt" (the default): nothing is merged, every conflicting pair is reported, and `artifacts/redo/<task>.json` is written for each (an assignments file that redoes the task on top of what merged). "redo": the merge goes task by task in dependency order, and a task that conflicts is run again (a new attempt) from the integration of the tasks merged before it, its prompt telling it the conflict; its gates run again, then the merge goes on. Dependents of a redone task are checked again and redone the same way when they now conflict',
    ),
    redo_attempts: z
      .number()
      .int()
      .min(1)
      .max(MAX_REDO_ATTEMPTS)
      .optional()
      .describe(
        `"redo": how many new attempts one task's conflict may get (default ${DEFAULT_REDO_ATTEMPTS}). When the last one fails its gates, the task's earlier result is put back and the run halts as "halt" would; the report's \`merge.redone\` says what was tried`,
      ),
    on_gate_failure: OnGateFailure.optional().describe(
      'What happens when the run-level `tests_cmd` fails on the integration of every task. "halt" (the default): nothing is merged and the run fails its validation. "bisect": the gate runs on the base (red there: said at once, no task is blamed), then on the merge of the first k tasks in merge order, halving until it finds the first task whose merge turns it red; the report names it (`merge.culprit`) and nothing is merged. "bisect_and_fix": that task also gets new attempts from the integration of the tasks before it, its prompt carrying the gate\'s output, until the gate passes on the merge with it or `gate_fix_attempts` run out; then the merge goes on with the rest (docs/guides/conflicts.md: A red integration)',
    ),
    gate_fix_attempts: z
      .number()
      .int()
      .min(1)
      .max(MAX_GATE_FIX_ATTEMPTS)
      .optional()
      .describe(
        `"bisect_and_fix": how many new attempts the task that broke the gate may get (default ${DEFAULT_GATE_FIX_ATTEMPTS}). When the last one leaves the gate red, its earlier result is put back and the run halts as "halt" would, the culprit named; the report's \`merge.redone\` says what was tried`,
      ),
    approval: MergeApprovalSetting.optional(),
    review: ReviewSetting.optional().describe(
      "A reviewer agent judges the integration of every task (the whole change from the run's base) once the run-level gates passed, before anything is merged, as `success_criteria.review` judges a task's: `request_changes` or an invalid verdict fails the run's validation (gate `run.review`) and nothing is merged; its comments are in the report's `merge.gates` and its verdict in artifacts/integration/review.json",
    ),
  })
  .describe(
    "How the merge answers conflicts between the tasks' changes and a red run-level gate, and who reviews the whole change before it is merged (docs/guides/conflicts.md: Conflicts, A red integration; docs/guides/convergence.md: Review)",
  );
export type MergePolicy = z.infer<typeof MergePolicy>;

/** A halted merge's way on for one task it left out (docs/guides/conflicts.md: Conflicts: halt or redo). */
export const RedoStep = z
  .strictObject({
    task: z.string(),
    assignments: z
      .string()
      .describe(
        "artifacts/redo/<task>.json (absolute): the assignments that redo the task on what merged cleanly",
      ),
    conflict: z
      .string()
      .describe("artifacts/redo/<task>.md (absolute): its conflict section, as its prompt gets it"),
    command: z
      .string()
      .describe(
        "The command that runs it, in a run folder of its own (`termorch run <file> --out <folder>`)",
      ),
  })
  .describe("A task a halted merge left out, and how to redo it");
export type RedoStep = z.infer<typeof RedoStep>;
