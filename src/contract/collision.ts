import { z } from "zod";

/** Two tasks that may run at once (no dependency path between them) and whose allowed_paths overlap. */
export const PredictedCollision = z.strictObject({
  tasks: z.tuple([z.string(), z.string()]).describe("The two tasks, in the file's order"),
  paths: z
    .array(z.tuple([z.string(), z.string()]))
    .describe("The pairs of their allowed_paths entries that overlap (a path both can name)"),
});
export type PredictedCollision = z.infer<typeof PredictedCollision>;

/** A predicted collision once the run ended: what the two tasks really did. */
export const CollisionOutcome = PredictedCollision.extend({
  actual: z
    .enum(["conflicted", "same_files", "disjoint"])
    .nullable()
    .describe(
      "`conflicted`: their changes conflicted in the merge; `same_files`: both changed a file, and git merged them; `disjoint`: no file both changed; null: not known (a task did not succeed, a dry run, no git)",
    ),
});
export type CollisionOutcome = z.infer<typeof CollisionOutcome>;
