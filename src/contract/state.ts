import { z } from "zod";
import { AgentResult, Usage } from "./agent-result.js";
import { StateSource } from "./agent-state.js";
import { ApprovalWait } from "./approval.js";
import { Budget, OnBudget } from "./assignments.js";
import { AttemptHost } from "./attempt-host.js";
import { AttemptRecord } from "./attempt-record.js";
import { KeyAnswer } from "./keys.js";
import { DEFAULT_GATE_FIX_ATTEMPTS, OnConflict, OnGateFailure } from "./merge-policy.js";
import { Reason, TaskState } from "./reason.js";
import { Gate, GitControlFile, Redo } from "./report.js";
import { BoundaryWhy } from "./session-handoff.js";

/**
 * A redo in progress (merge.on_conflict "redo", or a gate's fix under on_gate_failure
 * "bisect_and_fix"): what a resume needs to go on at the right step. recorded: the conflict (or
 * the red gate) is known and its prompt section written, the task branch not yet moved;
 * prepared: the branch and worktree are at `start`, the attempt goes (adopted when `attemptDir`
 * is set); restoring: the last redo failed, the earlier result is being put back.
 */
export const RedoProgress = z.strictObject({
  /** conflict: its result conflicted; gate: its merge turned the run-level tests_cmd red. */
  cause: z.enum(["conflict", "gate"]).default("conflict"),
  /** The task's artifacts folder that keeps its earlier result (before.patch, before-handoff.md). */
  kept: z.string().default("redo-1"),
  n: z.number().int().min(1),
  attempt: z.number().int().min(1),
  start: z.string(),
  before: z.string(),
  step: z.enum(["recorded", "prepared", "restoring"]),
  with: z.array(z.string()),
  files: z.array(z.string()),
  detail: z.string(),
  /** The tasks whose work `start` holds, in merge order. */
  mergedBefore: z.array(z.string()),
  /** Each conflict git reported: its kind, paths, and the tasks merged before whose changes touch them. */
  units: z.array(z.strictObject({ kind: z.string(), paths: z.array(z.string()), with: z.array(z.string()) })),
  /** The prompt's conflict section (private: unredacted). */
  section: z.string(),
  startedAt: z.number(),
  /** The task's successful result before the redo, put back when no redo resolves. */
  restore: z.strictObject({
    startCommit: z.string().nullable(),
    commit: z.string(),
    gates: z.array(Gate),
    logs: z.strictObject({ stdout: z.string(), stderr: z.string() }).nullable(),
    artifacts: z.array(z.string()),
    agentResult: AgentResult.nullable(),
    exitCode: z.number().int().nullable(),
    attemptDir: z.string().nullable(),
    attemptStartedAt: z.number().nullable(),
    finishedAt: z.number().nullable(),
  }),
});
export type RedoProgress = z.infer<typeof RedoProgress>;

/**
 * The merge stage while it runs, for the views: which step, and during a bisect of a red
 * run-level gate, the probe under way and what the bisect found.
 */
export const MergeProgress = z.strictObject({
  step: z.enum(["merging", "validating", "bisecting", "fixing", "waiting_approval"]),
  /** step waiting_approval: the integration waits for a person's decision (merge.approval). */
  approval: ApprovalWait.optional(),
  /** The probe under way: the n-th gate run of the bisect (the base's is 1) of about `of`; k tasks merged, the last `task`. */
  probe: z
    .strictObject({
      n: z.number().int().min(1),
      of: z.number().int().min(1),
      k: z.number().int().min(0),
      task: z.string().nullable(),
    })
    .nullable(),
  /** The task the bisect found; null while none is found. */
  culprit: z.string().nullable(),
  /** The gate is red on the base itself. */
  red_on_base: z.boolean(),
});
export type MergeProgress = z.infer<typeof MergeProgress>;

/** How the next attempt of a task runs: which agent of its list, from where, told what. */
export const NextAttempt = z.strictObject({
  agentIndex: z.number().int().min(0),
  from: z.enum(["base", "last_work", "last_commit"]),
  escalated: z.boolean(),
  /** Its feedback section, relative to the run directory. */
  feedback: z.string().nullable(),
  /** It starts no sooner (epoch ms): the rate limit the attempt before it met lifts then; null: at once. */
  notBefore: z.number().nullable().default(null),
  /** It runs a fallback agent in place of this one, which is rate limited; null: no fallback. */
  fallbackFor: z.string().nullable().default(null),
});
export type NextAttempt = z.infer<typeof NextAttempt>;

/** Its git side: the task branch, where it started, its work's commit, what it did to the repository's refs. */
export const TaskGit = z.strictObject({
  branch: z.string().nullable(),
  /** The commit the task's worktree started from. */
  startCommit: z.string().nullable(),
  /** The task branch's tip after its work was committed. */
  commit: z.string().nullable(),
  /** Refs the agent created in the user's repository (reported, and removed with the task branch). */
  refsCreated: z.array(z.string()),
  /** What of its changes steers git (the git_control_files gate); empty: none, or not looked at. */
  controls: z.array(GitControlFile),
});
export type TaskGit = z.infer<typeof TaskGit>;

/** The attempt that runs now, or ran last: a resume adopts it with the agent it was launched with. */
export const CurrentAttempt = z.strictObject({
  /**
   * Which of its agents (TaskPlan.agents: 0 its own, then its escalation list) runs it; 0 in a
   * state file written before escalation existed.
   */
  agentIndex: z.number().int().min(0),
  /** Its private folder (supervisor files, exit.json), once it was launched. */
  dir: z.string().nullable(),
  /** When it was launched (its timeout counts from here, across a resume). */
  startedAt: z.number().nullable(),
  /** Its tmux session (each attempt has a fresh one). */
  session: z.string().nullable(),
  /**
   * What it has spent so far, as its CLI streams its usage (a JSONL stream, an interactive
   * transcript); null once it ended (its account is then in `result.usage`) or while nothing is known.
   */
  usage: Usage.nullable().default(null),
});
export type CurrentAttempt = z.infer<typeof CurrentAttempt>;

/** An interactive task's agent: whether, since when and for what it waits for input. */
export const TaskWaiting = z.strictObject({
  /** Since when it waits (ms since the epoch); null: it does not. */
  since: z.number().nullable(),
  /** What it waits for (StatusFile's waiting_for); null when it does not. */
  for: z.string().nullable(),
  /** The keys that answer what it waits for, when termorch knows the question (StatusFile's waiting_answers). */
  answers: z.array(KeyAnswer),
  /** Where its agent's state came from (its CLI's hooks, or its screen); null: not yet known. */
  stateFrom: StateSource.nullable(),
  /** Until when (epoch ms) it waits for a rate limit or a usage cap to lift before its next attempt; null: it does not. */
  quotaUntil: z.number().nullable().default(null),
  /** It waits for a person to approve it (its start, or its attempt's result); null: it does not. */
  approval: ApprovalWait.nullable().default(null),
});
export type TaskWaiting = z.infer<typeof TaskWaiting>;

/** What its (last) attempt left: its exit, logs, gates, collected artifacts, its agent's own result. */
export const TaskResult = z.strictObject({
  exitCode: z.number().int().nullable(),
  /** Log paths relative to the run directory. */
  logs: z.strictObject({ stdout: z.string(), stderr: z.string() }).nullable(),
  artifacts: z.array(z.string()),
  gates: z.array(Gate),
  /** The agent's own result, from its CLI's output (the last attempt's). */
  agentResult: AgentResult.nullable(),
  /** Tokens and cost its CLI reported, all attempts added up. */
  usage: Usage.nullable(),
});
export type TaskResult = z.infer<typeof TaskResult>;

/** Its redos after the merge (merge.on_conflict "redo", a gate's fix under on_gate_failure "bisect_and_fix"). */
export const TaskRedo = z.strictObject({
  /** The redo under way; null when none is. */
  progress: RedoProgress.nullable(),
  /** Its redos that ended, in the report's shape. */
  done: z.array(Redo),
});
export type TaskRedo = z.infer<typeof TaskRedo>;

/** Everything the run knows about one task, grouped by concern; the report and the status files are views of it. */
const TaskRunShape = z.strictObject({
  id: z.string(),
  agent: z.string(),
  dependencies: z.array(z.string()),
  /** The argv of its own agent (the report's); an escalated attempt's is its agent's (TaskPlan.agents). */
  argv: z.array(z.string()),
  /** `pending` until the task starts or is skipped. */
  state: z.union([TaskState, z.literal("pending")]),
  reason: Reason.nullable(),
  detail: z.string().nullable(),
  /** Failed (blocked) and its agent asked for a person (its decision's routing.recommended_next_actor "human"). */
  needsHuman: z.boolean(),
  attempts: z.number().int().min(0),
  /** Epoch ms. */
  startedAt: z.number().nullable(),
  finishedAt: z.number().nullable(),
  git: TaskGit,
  current: CurrentAttempt,
  waiting: TaskWaiting,
  result: TaskResult,
  /** Scale-out: the worker and host of each attempt (empty in a local run). */
  hosts: z.array(AttemptHost),
  redo: TaskRedo,
  /** Its attempts, in order (the report's attempt_history). */
  history: z.array(AttemptRecord),
  /**
   * The attempt that follows the last one, once the policy chose it and before it is counted: a
   * resume carries it out rather than judging the last attempt again (its worktree may have moved).
   */
  next: NextAttempt.nullable(),
});

/**
 * A task record as an earlier termorch wrote it (state.json, task journal): one flat object of
 * 35 fields, some of them added later (absent in older files). Read into the groups, so a run
 * interrupted before an upgrade still resumes.
 */
function fromFlat(raw: unknown): unknown {
  if (typeof raw !== "object" || raw === null || "git" in raw) return raw;
  const {
    branch = null,
    startCommit = null,
    commit = null,
    refsCreated = [],
    gitControls = [],
    agentIndex = 0,
    attemptDir = null,
    attemptStartedAt = null,
    session = null,
    waitingSince = null,
    waitingFor = null,
    waitingAnswers = [],
    stateFrom = null,
    exitCode = null,
    logs = null,
    artifacts = [],
    gates = [],
    agentResult = null,
    usage = null,
    redo = null,
    redone = [],
    hosts = [],
    history = [],
    next = null,
    needsHuman = false,
    ...rest
  } = raw as Record<string, unknown>;
  return {
    ...rest,
    needsHuman,
    git: { branch, startCommit, commit, refsCreated, controls: gitControls },
    current: { agentIndex, dir: attemptDir, startedAt: attemptStartedAt, session },
    waiting: { since: waitingSince, for: waitingFor, answers: waitingAnswers, stateFrom },
    result: { exitCode, logs, artifacts, gates, agentResult, usage },
    hosts,
    redo: { progress: redo, done: redone },
    history,
    next,
  };
}

export const TaskRun = z.preprocess(fromFlat, TaskRunShape);
export type TaskRun = z.infer<typeof TaskRun>;

/**
 * `state.json`: the run's persisted state machine, so `termorch resume` (or a restarted daemon)
 * can finish a run after any interruption. While the run is live, every task transition is
 * appended to `task_journal` (JSON lines, one TaskRun each, the last line of a task wins), which
 * supersedes the copies in `tasks`: a transition costs one append, however many tasks the run
 * has. Read it with `readRunStateFile`, which merges the two. Once the run is reported, `tasks`
 * is complete and `task_journal` is null.
 */
export const RunState = z.strictObject({
  schema_version: z.literal(1),
  run_id: z.string(),
  /** running: being driven (or interrupted); reported: the report was written, nothing left to do. */
  phase: z.enum(["running", "reported"]),
  /** Process driving the run (for status and cancel). */
  pid: z.number().int(),
  assignments_file: z.string(),
  /** SHA-256 of the assignments file as validated: a resume refuses a changed file. */
  assignments_sha256: z.string(),
  /** The config file (re-read on resume, so no secret of it is copied here), or null. */
  config_file: z.string().nullable(),
  /** Where the run was started from (config-relative agent paths resolve against it). */
  cwd: z.string(),
  /** Folder `workspace_dir` is relative to (the daemon moves files out of its inbox). */
  base_dir: z.string(),
  run_dir: z.string(),
  workspace: z.string(),
  socket: z.string(),
  socket_path: z.string(),
  options: z.strictObject({
    max_parallel: z.number().int().positive(),
    schedule: z.enum(["eager", "waves"]),
    fail_fast: z.boolean(),
    verify: z.boolean(),
    sessions: z.enum(["default", "keep", "clean"]),
    keep_branches: z.boolean(),
    allow_dirty: z.boolean(),
    /** Where the tasks run: bullmq sends them to workers (a resume reconnects to the same Redis). */
    backend: z.enum(["local", "bullmq"]).default("local"),
    on_conflict: OnConflict.default("halt"),
    redo_attempts: z.number().int().min(1).default(1),
    on_gate_failure: OnGateFailure.default("halt"),
    gate_fix_attempts: z.number().int().min(1).default(DEFAULT_GATE_FIX_ATTEMPTS),
    /** The run's budget (resource_limits.max_cost_usd and max_tokens); null: none. */
    budget: Budget.nullable().default(null),
    /** What a budget reached does to the running attempts (resource_limits.on_budget). */
    on_budget: OnBudget.default("stop"),
  }),
  git: z
    .strictObject({
      root: z.string(),
      base_commit: z.string(),
      target_ref: z.string().nullable(),
      prefix: z.string(),
    })
    .nullable(),
  started_at: z.number(),
  updated_at: z.number(),
  waves: z.array(z.array(z.string())),
  tasks: z.array(TaskRun),
  /** The task journal while the run is live, else null. */
  task_journal: z.string().nullable().default(null),
  /** What the driver wants the operator to know while the run goes on (e.g. no worker takes its jobs). */
  notices: z.array(z.string()).default([]),
  /** Where the merge stage is while it runs (the views' merge line); null before it and once reported. */
  merge: MergeProgress.nullable().default(null),
  /** Path of the report once written. */
  report: z.string().nullable(),
  /** The run stopped at a wave boundary (its report and handoff say so): `termorch resume` goes on. */
  stopped: BoundaryWhy.nullable().default(null),
  exit_code: z.number().int().nullable(),
});
export type RunState = z.infer<typeof RunState>;

/** One entry of the per-user run registry: how operator commands find a run by its id. */
export const RegistryEntry = z.strictObject({
  run_id: z.string(),
  run_dir: z.string(),
  socket: z.string(),
  pid: z.number().int(),
  started_at: z.string(),
});
export type RegistryEntry = z.infer<typeof RegistryEntry>;

/**
 * What any version's state.json says about the run that holds its folder: read loosely, so a
 * folder another termorch wrote is still recognised as taken.
 */
export const StateHeader = z.looseObject({ run_id: z.string().optional(), phase: z.string().optional() });
