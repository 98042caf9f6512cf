import { z } from "zod";

/** What the merge does when a task's changes conflict with those merged before it. */
export const OnConflict = z.enum(["halt", "redo"]);
export type OnConflict = z.infer<typeof OnConflict>;

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
  })
  .describe("How the merge answers conflicts between the tasks' changes (README: Conflicts)");
export type MergePolicy = z.infer<typeof MergePolicy>;

/** A halted merge's way on for one task it left out (README: Conflicts: halt or redo). */
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
