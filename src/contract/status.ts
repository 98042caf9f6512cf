import { z } from "zod";
import { Reason, TaskState } from "./reason.js";

/** Content of `status/<task_id>.<state>`: enough to go straight to `tmux -L <socket> attach -t <session>`. */
export const StatusFile = z.strictObject({
  task_id: z.string(),
  state: TaskState,
  run_id: z.string(),
  /** tmux session name, null when the task never got one. */
  session: z.string().nullable(),
  /** tmux socket name (use with `tmux -L`). */
  socket: z.string(),
  /** Absolute path of the tmux socket (use with `tmux -S`). */
  socket_path: z.string(),
  attempt: z.number().int().min(0),
  started_at: z.string().nullable(),
  finished_at: z.string().nullable(),
  exit_code: z.number().int().nullable(),
  reason: Reason.nullable(),
  /** Human-readable detail of the reason, redacted. */
  detail: z.string().nullable().optional(),
});
export type StatusFile = z.infer<typeof StatusFile>;
