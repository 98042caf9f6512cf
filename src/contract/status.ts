import { z } from "zod";
import { ApprovalView } from "./approval.js";
import { KeyAnswer } from "./keys.js";
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
  waiting_input: z
    .boolean()
    .optional()
    .describe(
      "Interactive tasks while running: its agent waits for input (its screen has not changed for waiting_after_s and, for a preset, shows its prompt); answer with `termorch send <task> TEXT`, or a menu with `termorch send <task> --keys K...` (waiting_answers)",
    ),
  host: z
    .string()
    .optional()
    .describe(
      "Scale-out runs: the host whose tmux runs the task's current attempt (`socket` and `socket_path` are its worker's there): `ssh -t <host> tmux -S <socket_path> attach -r -t =<session>`",
    ),
  worker: z
    .string()
    .optional()
    .describe("Scale-out runs: the name of the worker that runs the task's current attempt"),
  waiting_since: z
    .string()
    .nullable()
    .optional()
    .describe(
      "Interactive tasks: since when (ISO time its screen last changed) it waits for input; null when it does not",
    ),
  waiting_for: z
    .string()
    .nullable()
    .optional()
    .describe(
      "Interactive tasks: what the agent waits for, as termorch recognised it (a question of its CLI: trust, a notice, a permission; its next message after a finished turn; or a screen termorch does not recognise, quoted); null when it does not wait",
    ),
  needs_human: z
    .boolean()
    .optional()
    .describe(
      'A failed task whose agent decided `blocked` and asked for a person (its decision\'s routing.recommended_next_actor "human"): `detail` gives its reason; absent otherwise',
    ),
  waiting_quota_until: z
    .string()
    .optional()
    .describe(
      "A running task waiting for a rate limit or a usage cap its agent's CLI met to lift (ISO time it lifts); its next attempt starts then. Absent otherwise",
    ),
  waiting_approval: ApprovalView.optional(),
  waiting_answers: z
    .array(KeyAnswer)
    .optional()
    .describe(
      "Interactive tasks waiting on a question termorch knows (a preset's): the keys that pick each of its usual answers, for `termorch send <task> --keys K...`; absent otherwise",
    ),
});
export type StatusFile = z.infer<typeof StatusFile>;
