import { z } from "zod";
import { AgentResult, Usage } from "./agent-result.js";
import { StateSource } from "./agent-state.js";
import { AttemptHost } from "./attempt-host.js";
import { AttemptRecord } from "./attempt-record.js";
import { BudgetStanding } from "./budget.js";
import { CollisionOutcome } from "./collision.js";
import { OnConflict, OnGateFailure } from "./merge-policy.js";
import { Reason, TaskState } from "./reason.js";
import { ReviewRecord } from "./review.js";
import { BoundaryWhy } from "./session-handoff.js";

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

/**
 * One redo of a task in the merge, what it was asked to resolve, and how it ended: of a
 * conflicting task (merge.on_conflict "redo"), or of the task that turned the run-level gate red
 * (merge.on_gate_failure "bisect_and_fix").
 */
export const Redo = z.strictObject({
  task: z.string(),
  cause: z
    .enum(["conflict", "gate"])
    .default("conflict")
    .describe(
      'conflict: its result conflicted with the tasks merged before it (on_conflict "redo"). gate: the bisect found that its merge turns the run-level tests_cmd red (on_gate_failure "bisect_and_fix"); `run_gate` is that gate on the merge with its new result',
    ),
  redo: z.number().int().min(1).describe("Which of the task's redos this was (1 up to merge.redo_attempts)"),
  attempt: z
    .number()
    .int()
    .min(1)
    .describe("The task's attempt number it ran as (its logs and TERMORCH_ATTEMPT)"),
  conflicted_with: z
    .array(z.string())
    .describe("The tasks merged before it whose changes collided with its own"),
  files: z.array(z.string()).describe("The conflicting files (both paths of a rename)"),
  detail: z.string().describe("The conflict, as git named it (kind and paths)"),
  start_commit: z
    .string()
    .describe("The integration of the tasks merged before it: the commit the redo started from"),
  before_commit: z.string().describe("Its earlier result, the one that conflicted"),
  commit: z.string().nullable().describe("The redo's result; null when it committed none"),
  outcome: z
    .enum(["resolved", "failed", "cancelled"])
    .describe(
      "resolved: its gates passed and the merge went on with its new result. failed: its gates (or its agent) failed: the next redo, or, after the last, its earlier result was put back and the run halted. cancelled: the run was stopped during the redo",
    ),
  reason: Reason.nullable().describe("Why it failed (the reason union); null when resolved"),
  reason_detail: z.string().nullable(),
  gates: z.array(Gate).describe("The gates of its attempt"),
  logs: z.strictObject({ stdout: z.string(), stderr: z.string() }).nullable(),
  conflict_section: z
    .string()
    .nullable()
    .describe(
      "The section its prompt carried (redacted), relative to the run directory: the conflict (artifacts/<task>/redo-<n>/conflict.md), or for a gate's fix what went wrong (artifacts/<task>/attempt-<n>/feedback.md)",
    ),
  run_gate: Gate.nullable()
    .default(null)
    .describe(
      "cause gate: the run-level tests_cmd on the merge with its new result (null when its own gates failed first, so it was not run)",
    ),
  started_at: z.string(),
  finished_at: z.string().nullable(),
});
export type Redo = z.infer<typeof Redo>;

/** One run of the run-level gate on the merge of the first k tasks (merge.on_gate_failure "bisect"). */
export const Probe = z.strictObject({
  k: z.number().int().min(1).describe("How many tasks (in merge order) the probe holds"),
  task: z.string().describe("The k-th task: the last one merged into the probe"),
  commit: z
    .string()
    .describe("The probe: an unreferenced commit of the integration's first k tasks (never a branch)"),
  passed: z.boolean(),
  duration_ms: z.number().int().min(0),
  detail: z.string().describe("The gate's detail: how it ended, and its logs"),
});
export type Probe = z.infer<typeof Probe>;

/** A bisect of a red run-level tests_cmd: the base, the probes, and what they found. */
export const Bisect = z.strictObject({
  gate: z.string().describe("The gate bisected: run.tests_cmd"),
  integration: z.string().describe("The integration it was red on"),
  outcome: z
    .enum(["culprit", "red_on_base"])
    .describe(
      "culprit: the first task whose merge turns the gate red was found (`culprit`). red_on_base: the gate fails on the base commit itself, before any task: no task broke it, and no probe ran",
    ),
  base: z
    .strictObject({
      commit: z.string(),
      passed: z.boolean(),
      duration_ms: z.number().int().min(0),
      detail: z.string(),
    })
    .describe("The gate on the base commit (no task merged), run first"),
  probes: z.array(Probe).describe("The probes in the order they ran (binary search over k)"),
  culprit: z.string().nullable(),
  gate_runs: z
    .number()
    .int()
    .describe("Runs of the gate this bisect cost: the integration's, the base's and each probe's"),
  time_ms: z.number().int().min(0).describe("Wall time of the base's run and the probes"),
});
export type Bisect = z.infer<typeof Bisect>;

/** The task whose merge turned the run-level tests_cmd red, as the (last) bisect found it. */
export const Culprit = z.strictObject({
  task: z.string(),
  commit: z.string().describe("Its result as merged when the bisect found it"),
  probe_commit: z
    .string()
    .describe("The first red probe: the merge of the tasks up to it (the integration when it is the last)"),
  gate: z.string(),
  detail: z.string().describe("The gate's detail on that probe: how it ended, and its logs"),
  output_tail: z
    .string()
    .describe("The end of the gate's output on that probe (stdout, then stderr), redacted and bounded"),
  probes: z.number().int().describe("Probes its bisect ran (the base not counted)"),
  gate_runs: z
    .number()
    .int()
    .describe("Runs of the gate its bisect cost, the integration's and the base's included"),
  time_ms: z.number().int().min(0),
  fixed: z
    .boolean()
    .nullable()
    .describe(
      '"bisect_and_fix": true when a new attempt of it made the gate pass (see `merge.redone`), false when its attempts ran out (its earlier result was put back); null under "bisect"',
    ),
});
export type Culprit = z.infer<typeof Culprit>;

/** A ref of the user's repository that changed during the run (termorch's own branches aside). */
export const RefChange = z.strictObject({
  ref: z.string().describe("Full ref name, e.g. refs/heads/other"),
  old: z.string().nullable().describe("Its commit when the run started; null: it was created during the run"),
  new: z.string().nullable().describe("Its commit at the merge; null: it was deleted during the run"),
  task: z
    .string()
    .nullable()
    .describe(
      "The task whose agent changed it: certainly when the ref was checked out in that task's worktree, likely when it only points at a commit made there (it may be the user's own ref: it is reported, never removed); null when that cannot be told",
    ),
  during: z
    .array(z.string())
    .describe(
      "When no task can be named: the tasks that were running when the ref last changed, by its reflog. Empty when a task is named, and when git keeps no reflog for the ref (tags; core.logAllRefUpdates off) or no task ran at that time",
    ),
});
export type RefChange = z.infer<typeof RefChange>;

/**
 * A file of a task's changes that steers git or runs code for whoever checks the result out or
 * merges it (src/task/git-controls.ts).
 */
export const GitControlFile = z.strictObject({
  path: z.string().describe("Its path in the repository"),
  kind: z
    .enum(["attributes", "submodules", "nested_repository", "hooks"])
    .describe(
      "`attributes`: a .gitattributes (filters, merge drivers, diff commands git runs); `submodules`: a .gitmodules; `nested_repository`: a repository inside the worktree, committed as a gitlink; `hooks`: a file in a hook folder (.githooks/, .husky/)",
    ),
});
export type GitControlFile = z.infer<typeof GitControlFile>;

export const TaskReport = z.strictObject({
  id: z.string(),
  agent: z.string(),
  status: TaskState,
  logs: z.strictObject({ stdout: z.string().nullable(), stderr: z.string().nullable() }),
  output_log: z
    .string()
    .nullable()
    .describe(
      "The log that holds what the task's agent wrote, to read when it failed: `logs.stderr` when it is not empty, else `logs.stdout` when that is not empty (an agent that reports on stdout), else `logs.stderr`; for an agent run in a terminal (`tty: true`, both of its streams went to the terminal) always `logs.stdout`, its terminal transcript. null when it never ran",
    ),
  artifacts: z.array(z.string()),
  exit_code: z.number().int().nullable(),
  reason: Reason.nullable().describe(
    "Why the task did not succeed; null when it did. `exit_code`, `timeout`, `signal`: how its agent ended; `launch_error`: its agent or worktree could not be started; `validation`: a gate after the agent failed (secrets, commit, required_artifacts, allowed_paths, tests_cmd); `setup`: its `setup_cmd` failed (exit code not 0, timed out, or its exit status was lost), so no agent was started (the `setup` gate names its logs); `dependency_failed`: skipped because a dependency did not succeed; `conflict`: its dependencies' branches conflict; `cancelled`: the run was cancelled or stopped (--fail-fast); `lost`: its session or worktree vanished without an exit record; `agent_error`: its agent's CLI reported an error in its output while exiting 0 (see `agent_result`); `no_changes`: its agent exited 0 having changed nothing in its worktree and produced none of its required_artifacts (the `changes` gate; `expect_changes: false` allows it); `prompt_not_delivered`: an interactive task's prompt was pasted into its agent's input prompt and the agent did not take it (no hook, no busy screen) in time: `detail` quotes its screen; `escalated`: its agent decided `escalate_to_max` ($TERMORCH_DECISION) and no stronger agent was left in its escalation list (`detail` gives the agent's reason); `blocked`: its agent decided `blocked`: the task was not retried and its dependents are skipped (`detail` gives the agent's reason; `needs_human` when it asked for a person); `invalid_decision`: its agent left a decision that is not a valid envelope (bad JSON, a status outside the three, confidence outside [0, 1], an empty reason or claim, untyped evidence, an unknown schema_version): treated as blocked, the file quarantined as `artifacts/<task>/attempt-<n>/decision.quarantined.json` and its problems in `detail`; `budget`: a budget (the run's, the task's or its agent entry's) was spent, so the attempt it needed never started; its detail names the budget and the spend; `rate_limited`: its agent's CLI met a rate limit or a usage cap and the task's rate_limit allowed no more (detail says which); `review`: its reviewer (success_criteria.review) requested changes, or wrote no valid verdict, on its last attempt; `rejected`: a person rejected its start or its result (its `approval`), or no one decided within its timeout_s",
  ),
  detail: z.string().nullable(),
  attempts: z.number().int().min(0),
  started_at: z.string().nullable(),
  finished_at: z.string().nullable(),
  duration_ms: z.number().nullable(),
  session: z.string().nullable(),
  branch: z.string().nullable(),
  commit: z.string().nullable(),
  refs_created: z
    .array(z.string())
    .describe(
      "Branches the task's agent certainly created in the user's repository: one it switched to (its commits were brought onto `branch`) or had checked out in its worktree; removed after a successful merge and by `termorch clean` when no commit would be lost. A ref the agent created without checking it out (`git branch stray`, `git tag t`) is not here: termorch cannot tell it from one the user made during the run (a reflog entry does not say which worktree wrote it), so it is only listed in `merge.refs_changed` and never removed; nor are refs that merely point at the task's commits",
    ),
  gates: z
    .array(Gate)
    .describe(
      "The task's gates in the order they ran (of its last attempt): `setup` (only when a setup_cmd is given: it runs before the agent; its detail names its logs), `core` (the agent exited 0), `secrets` (no secret value of the run's in its changes: checked before they are committed), `commit`, `required_artifacts`, `allowed_paths`, `git_control_files` (only when its changes hold such files, or `success_criteria.git_control_files` is \"refuse\"), `tests_cmd`",
    ),
  /** Exact argv the task runs (after placeholder substitution). */
  argv: z.array(z.string()),
  escalation: z
    .array(z.strictObject({ agent: z.string(), argv: z.array(z.string()) }))
    .optional()
    .describe(
      "The agents of its escalation list in order, each with the exact argv it runs: attempt 2 runs the first, attempt 3 the second, and the last one every further attempt (`agent` and `argv` are attempt 1's). Absent when it has none",
    ),
  dependencies: z.array(z.string()),
  agent_result: AgentResult.nullable(),
  usage: Usage.nullable(),
  state_from: StateSource.nullable()
    .optional()
    .describe(
      "Interactive tasks: where termorch learned its agent's state (prompt accepted, waiting for input, turn done): `hooks`, its CLI's own hooks or events, or `screen`, its screen matched against the preset's patterns; absent for other tasks",
    ),
  attempt_history: z
    .array(AttemptRecord)
    .optional()
    .describe(
      "Each attempt of the task, in order: the agent it ran, where it started, the feedback section it was given, the decision its agent wrote, how it ended; absent when it never started",
    ),
  hosts: z
    .array(AttemptHost)
    .optional()
    .describe(
      "Scale-out runs only (backend bullmq): the worker and host of each attempt, in order; a worker killed mid-task leaves its attempt here and the task's next attempt names the worker that took the job over",
    ),
  needs_human: z
    .literal(true)
    .optional()
    .describe(
      'The task is `blocked` and its agent asked for a person (its decision\'s `routing.recommended_next_actor` was "human"): `detail` gives its reason. Absent otherwise',
    ),
  git_control_files: z
    .array(GitControlFile)
    .optional()
    .describe(
      "Files of the task's changes (its last attempt's commit against its start) that steer git or run code for whoever checks them out: .gitattributes, .gitmodules, nested repositories, hook folders; absent when there are none. Merged like any file unless `success_criteria.git_control_files` is \"refuse\"",
    ),
});
export type TaskReport = z.infer<typeof TaskReport>;

/** A share of the run's attempts, 0 to 1 (rounded to 4 places); null when no attempt ran. */
const Rate = z.number().min(0).max(1).nullable();

/**
 * The run's attempts and their agents' decisions (the ledgerflow seed's metrics, section 10).
 * Every rate is over attempts: each attempt of each task counts once, whether or not its agent
 * left a decision.
 */
export const AttemptMetrics = z.strictObject({
  total: z.number().int().min(0).describe("Attempts run, every task's added up (a merge redo's too)"),
  with_decision: z
    .number()
    .int()
    .min(0)
    .describe("Attempts whose agent left a decision at $TERMORCH_DECISION, valid or not"),
  escalated: z.number().int().min(0).describe("Attempts whose agent decided escalate_to_max"),
  blocked: z.number().int().min(0).describe("Attempts whose agent decided blocked"),
  invalid: z.number().int().min(0).describe("Attempts whose agent left an invalid decision (quarantined)"),
  escalation_rate: Rate.describe("escalated / total"),
  block_rate: Rate.describe("blocked / total"),
  invalid_rate: Rate.describe("invalid / total"),
  per_successful_task: z
    .number()
    .min(0)
    .nullable()
    .describe(
      "Attempts per successful task: the successful tasks' attempts added up, divided by their number (rounded to 2 places); null when none succeeded",
    ),
  succeeded_after_feedback: z
    .number()
    .int()
    .min(0)
    .describe(
      "Successful tasks an earlier attempt of which failed (or asked for a stronger agent): they succeeded only after being told why, or by a stronger agent",
    ),
});
export type AttemptMetrics = z.infer<typeof AttemptMetrics>;

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
  attempts: AttemptMetrics.optional().describe(
    "The run's attempts, the decisions their agents left and the rates of the ledgerflow seed (escalation, block, invalid: each over attempts)",
  ),
});
export type Metrics = z.infer<typeof Metrics>;

export const Report = z.strictObject({
  summary: z.strictObject({
    completed: z.boolean(),
    failed_tasks: z
      .array(z.string())
      .describe(
        "Tasks whose own attempt failed (reason exit_code, timeout, signal, launch_error, validation, setup, conflict, lost, agent_error, no_changes, prompt_not_delivered, escalated, blocked or invalid_decision), or that a spent budget kept from another attempt (budget). Not the skipped or cancelled ones: they have their own lists.",
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
    usage: Usage.nullable().describe(
      "Tokens and cost of the whole run: the tasks' `usage` added up (a field stays null when no task reported it); null when no agent reported any",
    ),
    budget: BudgetStanding.optional().describe(
      "The run's budget and its spend; absent when resource_limits sets none",
    ),
    metrics: Metrics.optional(),
  }),
  tasks: z.array(TaskReport),
  merge: z.strictObject({
    strategy: z.literal("topological"),
    result: z.enum(["success", "conflict", "failed", "skipped", "rolled_back"]),
    conflicts: z.array(Conflict),
    on_conflict: OnConflict.describe("What a conflict was answered with (mode.merge.on_conflict)"),
    on_gate_failure: OnGateFailure.default("halt").describe(
      "What a red run-level tests_cmd was answered with (mode.merge.on_gate_failure)",
    ),
    redone: z
      .array(Redo)
      .describe(
        'Each redo of a task in the merge, in the order they ran: of a conflicting task (on_conflict "redo", cause conflict) or of the task that broke the run-level gate (on_gate_failure "bisect_and_fix", cause gate); empty when none ran',
      ),
    bisects: z
      .array(Bisect)
      .default([])
      .describe(
        'Each bisect of a red run-level tests_cmd (on_gate_failure "bisect" or "bisect_and_fix"), in order: more than one when the merge with a fixed culprit was red again further on; empty when none ran',
      ),
    culprit: Culprit.nullable()
      .default(null)
      .describe(
        "The task whose merge turned the run-level tests_cmd red, as the last bisect found it; null when no bisect found one",
      ),
    redo_assignments: z
      .array(z.string())
      .describe(
        "Assignments files written for a halted merge, one per task left out by a conflict, relative to the run directory (artifacts/redo/<task>.json): running one redoes that task on top of what merged cleanly",
      ),
    reason: z.string().nullable(),
    order: z.array(z.string()),
    base_commit: z.string().nullable(),
    result_commit: z.string().nullable(),
    target: z.string().nullable(),
    gates: z.array(Gate),
    review: ReviewRecord.nullable()
      .default(null)
      .describe("The review of the integration before it was merged (merge.review); null when none ran"),
    validated_commit: z
      .string()
      .nullable()
      .describe(
        "The commit the run-level gates (`gates`) were evaluated on; on success it is `result_commit`, the commit the target ends at. null when no run-level gate ran",
      ),
    target_moved: z
      .boolean()
      .describe(
        "The target branch moved during the run (the user committed on it): the run's result was merged onto its new tip and the gates ran on that merge",
      ),
    target_moved_to: z
      .string()
      .nullable()
      .describe("The tip of the moved target the result was (last) merged onto; null when it did not move"),
    refs_changed: z
      .array(RefChange)
      .describe(
        "Refs of the user's repository created, moved or deleted during the run other than termorch's own branches and the user's own commits on the target. Reported, never removed, except the branches in a task's `refs_created`: a ref an agent created without checking it out (`git branch stray`, `git tag t`) is listed here (`task` likely, or null) and stays, since termorch cannot tell it from one the user made. A target moved or deleted by an agent is never merged over: the merge fails and says so; when the user's index still matches the target's start, termorch puts it back there and keeps the commit it was moved to on `termorch/<run>/moved/<branch>` (the merge's reason says so), else it leaves it and the reason says what to run. Other branches an agent moved are only reported",
      ),
  }),
  schema_version: z.literal(1),
  run_id: z.string().nullable(),
  started_at: z.string(),
  finished_at: z.string(),
  dry_run: z.boolean(),
  waves: z.array(z.array(z.string())),
  workspace: z.string().nullable(),
  /** The tmux server the tasks ran on; null for a dry run, and for a run on workers (each attempt's is in its task's `hosts`). */
  tmux_socket: z.string().nullable(),
  exit_code: z.number().int(),
  predicted_collisions: z
    .array(CollisionOutcome)
    .default([])
    .describe(
      "Pairs of tasks that may run at once and whose allowed_paths overlap (mode.collisions), each with what really happened: how well the prediction did",
    ),
  stopped: z
    .strictObject({
      reason: BoundaryWhy,
      handoff: z.string().describe("Its session handoff, relative to the run directory (handoff.json)"),
    })
    .nullable()
    .default(null)
    .describe(
      "The run stopped at a wave boundary (exit 5): `wave_complete`, `termorch stop --at-boundary`; `hitl_gate`, a person's approval did not come within its timeout_s. Nothing was merged; `termorch resume <run-dir>` goes on with the tasks not done. null: it did not stop",
    ),
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
