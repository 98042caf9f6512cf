import { z } from "zod";
import { Usage } from "./agent-result.js";
import { ApprovalView } from "./approval.js";
import { AttemptRecord } from "./attempt-record.js";
import { BudgetStanding } from "./budget.js";
import { KeyAnswer } from "./keys.js";
import { Reason, TaskState } from "./reason.js";
import { MergeProgress } from "./state.js";

/**
 * What `termorch status --json` prints: a view over state.json, the status files, the logs and
 * the tmux server, for operators' scripts. Times are ISO strings, paths absolute. Fields are
 * only ever added (schema_version changes otherwise).
 */

/** running: its driver (a `run`, `resume` or the daemon) is alive; interrupted: it died before the report. */
export const RunPhaseView = z.enum(["running", "reported", "interrupted"]);
export type RunPhaseView = z.infer<typeof RunPhaseView>;

/** How to get to a task's tmux session. */
export const AttachView = z.strictObject({
  /** `termorch attach <task> --run <run_id>` */
  termorch: z.string(),
  /** `tmux -L <socket> attach -t =<session>` */
  tmux: z.string(),
});
export type AttachView = z.infer<typeof AttachView>;

/**
 * A task's state as the views show and count it: the report's states, `pending` until it starts
 * or is skipped, and `redo` while it runs again because its result conflicted in the merge
 * (merge.on_conflict "redo"; `redo` says which and the conflict).
 */
export const TaskViewState = z.union([TaskState, z.literal("pending"), z.literal("redo")]);
export type TaskViewState = z.infer<typeof TaskViewState>;

/** Its agent runs (or is about to, or its result is being checked): `running`, or `redo`. */
export function isLive(state: TaskViewState): boolean {
  return state === "running" || state === "redo";
}

/** A blocked task whose agent asked for a person, and why (the views say it the same way). */
export function needsHumanText(t: { detail: string | null }): string {
  return `needs a person: ${t.detail ?? "(no reason given)"}`;
}

/** One task of a run. */
export const TaskView = z.strictObject({
  id: z.string(),
  /** The agent of its current (or last) attempt: the task's own, or one of its escalation list. */
  agent: z.string(),
  state: TaskViewState,
  reason: Reason.nullable(),
  detail: z.string().nullable(),
  attempts: z.number().int().min(0),
  exit_code: z.number().int().nullable(),
  started_at: z.string().nullable(),
  finished_at: z.string().nullable(),
  /** Time since it started, while it runs. */
  elapsed_ms: z.number().int().min(0).nullable(),
  /** How long it ran, once finished. */
  duration_ms: z.number().int().min(0).nullable(),
  /** Last non-empty line of its stdout log (logs are redacted on disk), terminal escapes removed. */
  last_line: z.string().nullable(),
  /** Absolute paths of its current attempt's logs; null before it started. */
  logs: z.strictObject({ stdout: z.string(), stderr: z.string() }).nullable(),
  session: z.string().nullable(),
  /** The session exists on the run's tmux server (a failed task's session may be kept for inspection). */
  session_exists: z.boolean(),
  /** The agent in it is still running (the pane is not dead). */
  session_live: z.boolean(),
  /** Set when the session exists. */
  attach: AttachView.nullable(),
  /** An interactive task's agent waits for input since then (ISO time its screen went still); null otherwise. */
  waiting_since: z.string().nullable().default(null),
  /** What it waits for (a question of its CLI, its next message, an unrecognised screen); null otherwise. */
  waiting_for: z.string().nullable().default(null),
  /** It waits for a rate limit or a usage cap its agent's CLI met to lift, until then (ISO); its next attempt starts then; null otherwise. */
  waiting_quota_until: z.string().nullable().default(null),
  /** It waits for a person's decision (its `approval`): before it starts (a pending task), or on its attempt's result; null otherwise. */
  waiting_approval: ApprovalView.nullable().default(null),
  /** The keys that pick each usual answer of the question it waits on, when termorch knows it (`termorch send <task> --keys`); empty otherwise. */
  waiting_answers: z.array(KeyAnswer).default([]),
  /** Scale-out: the worker and host its current attempt runs on, and how to watch it there; null in a local run. */
  remote: z
    .strictObject({ worker: z.string(), host: z.string(), attach: z.string() })
    .nullable()
    .default(null),
  /** Its wave (1-based) in the run's plan; null when the plan does not name it. */
  wave: z.number().int().min(1).nullable().default(null),
  /** Tokens and cost its agent's CLI reported so far (all attempts); null when none. */
  usage: Usage.nullable().default(null),
  /** Its attempts so far (the report's attempt_history): each one's agent, start, feedback section, decision, end. */
  attempt_history: z.array(AttemptRecord).default([]),
  /** It failed blocked and its agent asked for a person (its decision's recommended_next_actor "human"); `detail` says why. */
  needs_human: z.boolean().default(false),
  /** Its redo under way (state `redo`): which of how many (shown `redo n/of`), and the conflict; null: none. */
  redo: z
    .strictObject({
      /** conflict: its result conflicted; gate: a bisect found its merge turns the run-level tests_cmd red (a fix). */
      cause: z.enum(["conflict", "gate"]).default("conflict"),
      n: z.number().int().min(1),
      of: z.number().int().min(1),
      with: z.array(z.string()),
      files: z.array(z.string()),
      /** When this redo began (its conflict found). */
      started_at: z.string().nullable().default(null),
    })
    .nullable()
    .default(null),
});
export type TaskView = z.infer<typeof TaskView>;

/** One run. */
export const RunView = z.strictObject({
  run_id: z.string(),
  run_dir: z.string(),
  phase: RunPhaseView,
  /** Process that drives (or drove) the run. */
  pid: z.number().int(),
  driver_alive: z.boolean(),
  started_at: z.string(),
  updated_at: z.string(),
  workspace: z.string(),
  socket: z.string(),
  socket_path: z.string(),
  /** Path of execution_report.json once written. */
  report: z.string().nullable(),
  exit_code: z.number().int().nullable(),
  /** What the operator can do next, e.g. `termorch resume <dir>` for an interrupted run. */
  hint: z.string().nullable(),
  /** What the run's driver says while it runs (e.g. that no worker is there to take its tasks). */
  notices: z.array(z.string()).default([]),
  /**
   * Where its merge is (while it runs: a bisect's probe under way, the culprit being fixed) and,
   * once reported, the culprit a bisect found; `line` says it in words. null: nothing to say.
   */
  merge: MergeProgress.extend({ line: z.string() }).nullable().default(null),
  /** Its budget against the spend so far (counted as attempts end); null: it has none. */
  budget: BudgetStanding.nullable().default(null),
  tasks: z.array(TaskView),
});
export type RunView = z.infer<typeof RunView>;

/** A run that could not be shown, and why. */
export const RunProblemView = z.strictObject({
  run_id: z.string().nullable(),
  run_dir: z.string().nullable(),
  message: z.string(),
});
export type RunProblemView = z.infer<typeof RunProblemView>;

/**
 * A daemon home's run that the daemon took from its inbox and has not started yet (it waits for
 * its workspace, or for a slot under the daemon's task limit): its folder has the claimed file
 * and no state.json.
 */
export const QueuedRunView = z.strictObject({
  run_id: z.string(),
  run_dir: z.string(),
  /** The inbox file it was taken from. */
  source: z.string().nullable(),
  claimed_at: z.string().nullable(),
});
export type QueuedRunView = z.infer<typeof QueuedRunView>;

/** The whole `termorch status --json` document. */
export const StatusView = z.strictObject({
  schema_version: z.literal(1),
  generated_at: z.string(),
  /** Oldest first. */
  runs: z.array(RunView),
  problems: z.array(RunProblemView),
  /** `--home` only: runs the daemon claimed and has not started yet, oldest first. */
  queued: z.array(QueuedRunView).default([]),
});
export type StatusView = z.infer<typeof StatusView>;
