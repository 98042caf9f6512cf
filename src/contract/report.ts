import { z } from "zod";
import { Reason, TaskState } from "./reason.js";

/** A set of tasks whose changes collide. */
export const Conflict = z.strictObject({
  tasks: z.array(z.string()),
  files: z.array(z.string()),
  detail: z.string(),
});
export type Conflict = z.infer<typeof Conflict>;

export const Gate = z.strictObject({
  name: z.string(),
  required: z.boolean(),
  /** null: not evaluated (skipped). */
  passed: z.boolean().nullable(),
  detail: z.string(),
});
export type Gate = z.infer<typeof Gate>;

export const TaskReport = z.strictObject({
  id: z.string(),
  agent: z.string(),
  status: TaskState,
  logs: z.strictObject({ stdout: z.string().nullable(), stderr: z.string().nullable() }),
  artifacts: z.array(z.string()),
  exit_code: z.number().int().nullable(),
  reason: Reason.nullable(),
  detail: z.string().nullable(),
  attempts: z.number().int().min(0),
  started_at: z.string().nullable(),
  finished_at: z.string().nullable(),
  duration_ms: z.number().nullable(),
  session: z.string().nullable(),
  branch: z.string().nullable(),
  commit: z.string().nullable(),
  gates: z.array(Gate),
  /** Exact argv the task runs (after placeholder substitution). */
  argv: z.array(z.string()),
  dependencies: z.array(z.string()),
});
export type TaskReport = z.infer<typeof TaskReport>;

export const Metrics = z.strictObject({
  tasks_total: z.number().int(),
  tasks_by_status: z.record(z.string(), z.number().int()),
  wall_time_ms: z.number(),
  critical_path: z.array(z.string()),
  critical_path_length: z.number().int(),
  max_parallel: z.number().int(),
  /** Highest number of tasks that ran at the same time. */
  peak_parallelism: z.number().int(),
  /** Sum of task durations divided by wall time. */
  parallelism_achieved: z.number(),
});
export type Metrics = z.infer<typeof Metrics>;

export const Report = z.strictObject({
  summary: z.strictObject({
    completed: z.boolean(),
    failed_tasks: z
      .array(z.string())
      .describe(
        "Tasks whose own attempt failed (reason exit_code, timeout, signal, launch_error, validation, conflict or lost). Not the skipped or cancelled ones: they have their own lists.",
      ),
    skipped_tasks: z
      .array(z.string())
      .describe(
        "Tasks that never ran because a dependency did not succeed (status skipped, reason dependency_failed); each task's detail names the root failure.",
      ),
    cancelled_tasks: z
      .array(z.string())
      .describe(
        "Tasks the run's cancellation (signal, termorch cancel, --fail-fast, internal error) ended while running (status failed) or kept from starting (status skipped); reason cancelled.",
      ),
    validation: z.enum(["passed", "failed", "skipped"]),
    conflicts: z.array(Conflict),
    metrics: Metrics.optional(),
  }),
  tasks: z.array(TaskReport),
  merge: z.strictObject({
    strategy: z.literal("topological"),
    result: z.enum(["success", "conflict", "failed", "skipped", "rolled_back"]),
    conflicts: z.array(Conflict),
    reason: z.string().nullable(),
    order: z.array(z.string()),
    base_commit: z.string().nullable(),
    result_commit: z.string().nullable(),
    target: z.string().nullable(),
    gates: z.array(Gate),
  }),
  schema_version: z.literal(1),
  run_id: z.string().nullable(),
  started_at: z.string(),
  finished_at: z.string(),
  dry_run: z.boolean(),
  waves: z.array(z.array(z.string())),
  workspace: z.string().nullable(),
  tmux_socket: z.string().nullable(),
  exit_code: z.number().int(),
  /** Set when the run stopped before or outside its tasks (invalid input, interruption, internal error). */
  error: z
    .strictObject({
      kind: z.string(),
      message: z.string(),
      /** What to do about it. */
      hint: z.string().nullable(),
      problems: z.array(
        z.strictObject({
          file: z.string().optional(),
          field: z.string().optional(),
          task: z.string().optional(),
          message: z.string(),
        }),
      ),
    })
    .nullable(),
});
export type Report = z.infer<typeof Report>;
