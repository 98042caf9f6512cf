import { z } from "zod";

/** A workspace lock file (`<tmp>/termorch-<uid>/locks/<key>.lock`): who holds the workspace. */
export const LockHolder = z.object({
  pid: z.number().int().positive(),
  /** Start time of the process (clock ticks since boot), so a recycled pid is not mistaken for the holder. */
  pid_start: z.string().nullable().default(null),
  host: z.string(),
  run_id: z.string(),
  run_dir: z.string(),
  acquired_at: z.string(),
});
export type LockHolder = z.infer<typeof LockHolder>;
