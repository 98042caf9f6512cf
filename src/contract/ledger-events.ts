import { z } from "zod";
import { StateSource } from "./agent-state.js";
import { Budget } from "./assignments.js";
import { BudgetStanding } from "./budget.js";
import { DecisionStatus, NextActor } from "./decision.js";
import { KeyAnswer } from "./keys.js";
import { Reason } from "./reason.js";
import { Gate } from "./report.js";
import { ReviewRecord } from "./review.js";
import { BoundaryWhy } from "./session-handoff.js";
import { StatusFile } from "./status.js";

/**
 * The events of a run's ledger (events.jsonl), each a `type` and its `data`. The run writes them
 * through `Ledger.append`, which takes only these; the timeline and the operators' views read
 * them back with `ledgerEntryOf`. Data objects are loose: an event may carry more than what is
 * named here (a merge's whole outcome), and a reader keeps only what it knows.
 */
const entry = <T extends string, S extends z.ZodRawShape>(type: T, data: S) =>
  z.object({ type: z.literal(type), data: z.looseObject(data) });

/**
 * The same event as a reader takes it: a field that is missing or of another type is read as
 * absent (a ledger cut short, written by another version), never the whole event lost.
 */
const lenientEntry = <T extends string, S extends z.ZodRawShape>(type: T, data: S) =>
  z.object({
    type: z.literal(type),
    data: z.looseObject(
      Object.fromEntries(
        Object.entries(data).map(([k, v]) => [k, (v as z.ZodType).optional().catch(undefined)]),
      ) as unknown as { [K in keyof S]: z.ZodCatch<z.ZodOptional<S[K]>> },
    ),
  });

const nullableString = z.string().nullable();
const Logs = z.object({ stdout: z.string(), stderr: z.string() }).nullable();
/** A reviewer's verdict as the ledger records it (its record less its usage). */
const ReviewFacts = ReviewRecord.omit({ usage: true }).shape;
const ApprovalWaitFacts = {
  at: z.enum(["start", "result", "merge"]),
  attempt: z.number(),
  until: nullableString,
};
const ApprovalDecided = {
  at: z.enum(["start", "result", "merge"]),
  attempt: z.number(),
  decision: z.enum(["approve", "reject", "timeout"]),
  reason: nullableString,
  by: z.string(),
  decided_at: z.string().optional(),
};
const ReviewStarted = {
  attempt: z.number(),
  agent: z.string(),
  session: z.string(),
  logs: Logs,
  /** It ran in a sandbox, its copy of the work read-only. */
  sandboxed: z.boolean().optional(),
};

/** A task's change of state: its status file as written, with its gates, branch and commit. */
const TaskStateData = {
  ...StatusFile.shape,
  gates: z.array(Gate),
  branch: nullableString,
  commit: nullableString,
};

/** The merge's outcome as the report has it (camel-cased, as `MergeOutcome`), and its validation. */
const MergeData = {
  result: z.enum(["success", "conflict", "failed", "skipped", "rolled_back"]),
  reason: nullableString,
  validation: z.string(),
  /** A halt's artifacts/redo files, relative to the run directory. */
  redoAssignments: z.array(z.string()),
};

/** Each event's type and the shape of its data. */
const EVENTS = {
  "run.accepted": {
    run_id: z.string(),
    assignments: z.string(),
    workspace: z.string(),
    tasks: z.array(z.object({ id: z.string(), agent: z.string(), dependencies: z.array(z.string()) })),
    base_commit: nullableString,
    target: nullableString,
  },
  "run.planned": {
    waves: z.array(z.array(z.string())),
    critical_path: z.array(z.string()),
    max_parallel: z.number(),
    schedule: z.string(),
    argv: z.record(z.string(), z.array(z.string())),
  },
  "run.resumed": {
    pid: z.number(),
    /** It goes on from a stop at its wave boundary (why it stopped). */
    stopped: BoundaryWhy.optional(),
    tasks: z.array(z.object({ id: z.string(), state: z.string(), attempts: z.number() })),
  },
  "run.cancel_requested": { by: z.string() },
  "run.budget_warning": BudgetStanding.shape,
  "run.budget_exhausted": BudgetStanding.shape,
  /** A resume raised the run's budget; the tasks it ended (and those skipped for them) go on. */
  "run.budget_raised": { from: Budget.nullable(), to: Budget.nullable(), reopened: z.array(z.string()) },
  "run.detached": { pid: z.number() },
  "run.cleaned": { pooled: z.number(), removed: z.number(), kept_branches: z.array(z.string()) },
  "report.written": {
    exit_code: z.number(),
    completed: z.boolean(),
    failed_tasks: z.array(z.string()),
    skipped_tasks: z.array(z.string()),
    cancelled_tasks: z.array(z.string()),
  },
  "notify.failed": {
    event: z.string(),
    task_id: nullableString,
    kind: z.enum(["not_started", "failed", "timeout"]),
    detail: z.string(),
  },
  "merge.success": MergeData,
  "merge.conflict": MergeData,
  "merge.failed": MergeData,
  "merge.skipped": MergeData,
  "merge.rolled_back": MergeData,
  "merge.interrupted_update": { ref: z.string(), old: z.string(), new: z.string(), outcome: z.string() },
  "merge.started": {
    on_conflict: z.enum(["halt", "redo"]),
    on_gate_failure: z.enum(["halt", "bisect", "bisect_and_fix"]).optional(),
    order: z.array(z.string()),
  },
  /** The run-level gate is red on the integration: a bisect begins (or goes on, `judged` gate runs in). */
  "merge.bisect_started": {
    gate: z.string(),
    integration: z.string(),
    tasks: z.number(),
    judged: z.number(),
  },
  /** One gate run of a bisect: on the merge of the first k of `of` tasks (k = 0: the base; `task` the k-th). */
  "merge.probe": {
    k: z.number(),
    of: z.number(),
    task: nullableString,
    commit: z.string(),
    passed: z.boolean(),
    duration_ms: z.number(),
    detail: z.string(),
  },
  /** A bisect ended: the culprit it found, or the gate red on the base (culprit null). */
  "merge.bisect_finished": {
    outcome: z.enum(["culprit", "red_on_base"]),
    culprit: nullableString,
    probes: z.number(),
    gate_runs: z.number(),
    time_ms: z.number(),
  },
  /**
   * A task's redo begins (task_id set): the conflict it is to resolve (cause conflict), or the red
   * run-level gate its merge caused (cause gate, a bisect's fix), and where it starts.
   */
  "merge.redo_started": {
    cause: z.enum(["conflict", "gate"]).optional(),
    redo: z.number(),
    attempt: z.number(),
    conflicted_with: z.array(z.string()),
    files: z.array(z.string()),
    detail: z.string(),
    start_commit: z.string(),
    before_commit: z.string(),
  },
  /** A redo ended (task_id set); `restored`: its earlier result was put back (no redo resolved it). */
  "merge.redo_finished": {
    cause: z.enum(["conflict", "gate"]).optional(),
    redo: z.number(),
    attempt: z.number(),
    outcome: z.enum(["resolved", "failed", "cancelled"]),
    reason: Reason.nullable(),
    detail: nullableString,
    commit: nullableString,
    restored: z.boolean(),
  },
  /** A halted merge wrote artifacts/redo/<task>.json files (relative to the run directory). */
  "merge.redo_assignments": { files: z.array(z.string()), start_commit: z.string() },
  "merge.target_put_back": { ref: z.string(), old: z.string(), new: nullableString, kept_on: nullableString },
  "task.running": TaskStateData,
  "task.success": TaskStateData,
  "task.failed": TaskStateData,
  "task.skipped": TaskStateData,
  "task.waiting_input": {
    attempt: z.number(),
    since: z.string(),
    asks: nullableString,
    /** The keys that answer it, when termorch knows the question (absent otherwise). */
    answers: z.array(KeyAnswer).optional(),
    by: StateSource.optional(),
  },
  "task.input_resumed": { attempt: z.number(), by: StateSource.optional() },
  "task.waiting_quota": { attempt: z.number(), until: z.string() },
  "task.quota_resumed": { attempt: z.number() },
  /** `termorch stop --at-boundary` (or MCP `stop`): nothing new starts, running tasks finish, nothing is merged. */
  "run.stop_requested": { at: z.literal("boundary"), by: z.string() },
  /** handoff.json was written beside the report: why the run ended, what a resume starts with. */
  "run.handoff": {
    stop_reason: z.string(),
    file: z.string(),
    next_tasks: z.array(z.string()),
    blockers: z.number(),
  },
  /** A task waits for a person's decision (its `approval`): before it starts, or on its attempt's result. */
  "task.waiting_approval": ApprovalWaitFacts,
  /** The run's integration waits for a person's decision before it is merged (merge.approval). */
  "run.waiting_approval": ApprovalWaitFacts,
  /** A person decided (AUTO-008: who, when, what), or no one did in time (`timeout`, by termorch). */
  "task.approval_decided": ApprovalDecided,
  "run.approval_decided": ApprovalDecided,
  /** A reviewer was launched on a task attempt's change (success_criteria.review). */
  "task.review_started": ReviewStarted,
  /** A reviewer was launched on the run's integration (merge.review). */
  "run.review_started": ReviewStarted,
  /** `termorch plan`: its planner was launched, in a copy of the repository it cannot change. */
  "plan.planner_started": ReviewStarted,
  /** `termorch plan`: what termorch found in what its planner wrote (none: the plan was taken). */
  "plan.tried": { attempt: z.number(), problems: z.array(z.string()) },
  /** A task's reviewer's verdict: `invalid` when it wrote none that validates. */
  "task.reviewed": { attempt: z.number(), ...ReviewFacts },
  /** The run's reviewer's verdict on its integration, before it is merged. */
  "run.reviewed": { commit: z.string(), ...ReviewFacts },
  "task.worktree": { branch: z.string(), start_commit: z.string(), path: z.string(), reused: z.boolean() },
  "task.published": { branch: z.string(), start_commit: z.string(), remote: z.string(), ref: z.string() },
  "task.launched": {
    attempt: z.number(),
    session: nullableString,
    logs: Logs,
    argv: z.array(z.string()).optional(),
    cwd: z.string().optional(),
    /** Scale-out: where the attempt runs. */
    host: z.string().optional(),
    worker: z.string().optional(),
    socket: z.string().optional(),
    delivery: z.number().optional(),
    /** Its sandbox's network ("host", "none" or the hosts allowed); absent: not sandboxed. */
    sandbox: z.object({ network: z.union([z.string(), z.array(z.string())]) }).optional(),
  },
  "task.adopted": { attempt: z.number(), session: nullableString, finished: z.boolean(), live: z.boolean() },
  "task.exited": {
    attempt: z.number(),
    exit_code: z.number().nullable(),
    /** The supervisor's times of the agent process (a worker's result has none). */
    started_at: nullableString.optional(),
    finished_at: z.string().optional(),
    host: z.string().optional(),
    worker: z.string().optional(),
    state: z.string().optional(),
  },
  /**
   * The decision its agent left at $TERMORCH_DECISION for an attempt: valid (its verdict) or
   * invalid (what is wrong; quarantined). `file`: where it is kept, relative to the run directory.
   */
  "task.decision": {
    attempt: z.number(),
    kind: z.enum(["valid", "invalid"]),
    status: DecisionStatus.optional(),
    reason: z.string().optional(),
    confidence: z.number().optional(),
    recommended_next_actor: NextActor.nullable().optional(),
    problems: z.array(z.string()).optional(),
    file: nullableString,
  },
  "task.retrying": {
    attempt: z.number(),
    reason: Reason,
    detail: nullableString,
    /** The agent that attempt ran, where the next one starts, and its feedback section (run-dir-relative). */
    agent: z.string().optional(),
    from: z.enum(["base", "last_work", "last_commit"]).optional(),
    escalated: z.boolean().optional(),
    feedback: nullableString.optional(),
    /** A rate limit's wait: the next attempt starts no sooner. */
    not_before: z.string().optional(),
    /** A rate limit's fallback: the agent that runs the next attempt. */
    fallback_to: z.string().optional(),
  },
  "task.work_not_kept": { attempt: z.number(), why: z.string() },
  "task.setup_started": { attempt: z.number(), cwd: z.string() },
  "task.setup": { attempt: z.number(), passed: z.boolean().nullable(), detail: z.string() },
  "task.head_taken": { from: nullableString, branch: z.string(), commit: z.string() },
  "task.finish_requested": { attempt: z.number(), by: z.string() },
  "task.prompt_delivered": { attempt: z.number(), by: StateSource },
  "task.prompt_pasted": { attempt: z.number(), screen_ready: z.boolean() },
  /** Its pasted prompt sat in the CLI's input box unsent (the Enter taken as a line break): Enter again. */
  "task.prompt_resubmitted": { attempt: z.number(), n: z.number() },
} as const;
type Events = typeof EVENTS;

type WriteUnion = { [T in keyof Events]: ReturnType<typeof entry<T, Events[T]>> }[keyof Events];
type ReadUnion = { [T in keyof Events]: ReturnType<typeof lenientEntry<T, Events[T]>> }[keyof Events];

const union = <U extends z.ZodObject>(make: (type: keyof Events) => U) =>
  z.discriminatedUnion(
    "type",
    Object.keys(EVENTS).map((type) => make(type as keyof Events)) as unknown as [U, ...U[]],
  );

/** Every event a run writes, checked as written. */
export const LedgerEntry = union((type) => entry(type, EVENTS[type])) as unknown as z.ZodDiscriminatedUnion<
  WriteUnion[]
>;
/** Every event a reader knows, each field of its data optional and read leniently. */
const LenientLedgerEntry = union((type) =>
  lenientEntry(type, EVENTS[type]),
) as unknown as z.ZodDiscriminatedUnion<ReadUnion[]>;
/** An event as the run writes it. */
export type LedgerEntry = z.input<typeof LedgerEntry>;
/** An event as a reader gets it back: its known fields checked, each possibly absent. */
export type ReadLedgerEntry = z.infer<typeof LenientLedgerEntry>;
export type LedgerEntryType = LedgerEntry["type"];
/** The data of one type of event. */
export type LedgerData<T extends LedgerEntryType> = (LedgerEntry & { type: T })["data"];

/** An event of events.jsonl with its data checked against its type; null for one this version does not know. */
export function ledgerEntryOf(event: { type: string; data: unknown }): ReadLedgerEntry | null {
  const parsed = LenientLedgerEntry.safeParse({ type: event.type, data: event.data });
  return parsed.success ? parsed.data : null;
}
