import { addUsage } from "../contract/agent-result.js";
import type { Budget } from "../contract/assignments.js";
import type { CollisionOutcome } from "../contract/collision.js";
import type { OnConflict, OnGateFailure } from "../contract/merge-policy.js";
import type { Bisect, Conflict, Culprit, Gate, RefChange, Report, TaskReport } from "../contract/report.js";
import type { ReviewRecord } from "../contract/review.js";
import type { BoundaryWhy } from "../contract/session-handoff.js";
import type { TaskRun } from "../contract/state.js";
import {
  type ErrorKind,
  ExitCode as Exit,
  type ExitCode,
  exitCodeOfKind,
  type InputProblem,
} from "../errors.js";
import { HANDOFF_FILE } from "../fs/names.js";
import { budgetStanding } from "../spend/budget.js";
import { attemptMetrics } from "./attempt-metrics.js";

/** How the merge step ended (filled in by the merge stage; `skipped` until it runs). */
export interface MergeOutcome {
  result: Report["merge"]["result"];
  reason: string | null;
  conflicts: Conflict[];
  order: string[];
  baseCommit: string | null;
  resultCommit: string | null;
  target: string | null;
  gates: Gate[];
  /** The commit the run-level gates ran on. */
  validatedCommit: string | null;
  /** The tip of the target the result was merged onto, when the target moved during the run. */
  targetMovedTo: string | null;
  refsChanged: RefChange[];
  /** A halted merge's assignments files (artifacts/redo/<task>.json), relative to the run directory. */
  redoAssignments: string[];
  /** The bisects of a red run-level tests_cmd, and the task the last one found. */
  bisects: Bisect[];
  culprit: Culprit | null;
  /** The review of the integration (`merge.review`), when one ran. */
  review: ReviewRecord | null;
}

export function skippedMerge(reason: string): MergeOutcome {
  return {
    result: "skipped",
    reason,
    conflicts: [],
    order: [],
    baseCommit: null,
    resultCommit: null,
    target: null,
    gates: [],
    validatedCommit: null,
    targetMovedTo: null,
    refsChanged: [],
    redoAssignments: [],
    bisects: [],
    culprit: null,
    review: null,
  };
}

export interface RunError {
  kind: ErrorKind;
  message: string;
  hint: string | null;
  problems: InputProblem[];
}

export interface ReportInput {
  runId: string | null;
  startedAt: number;
  finishedAt: number;
  dryRun: boolean;
  waves: string[][];
  tasks: readonly TaskRun[];
  /** Which of each task's logs holds its output (the runner looks at the files); stderr when not given. */
  outputLogs?: ReadonlyMap<string, "stdout" | "stderr">;
  /** Each task's escalation agents and their argv (TaskReport.escalation); none when not given. */
  escalations?: ReadonlyMap<string, NonNullable<TaskReport["escalation"]>>;
  merge: MergeOutcome;
  /** The run's answer to conflicts (its settings); default "halt". */
  onConflict?: OnConflict;
  /** Its answer to a red run-level tests_cmd; default "halt". */
  onGateFailure?: OnGateFailure;
  /** Run-level validation, when it ran. */
  validation: "passed" | "failed" | "skipped";
  cancelled: boolean;
  /** Its predicted collisions and what became of them; absent: none. */
  collisions?: readonly CollisionOutcome[];
  /** It stopped at a wave boundary, and why; null or absent: it did not. */
  stopped?: BoundaryWhy | null;
  error: RunError | null;
  workspace: string | null;
  tmuxSocket: string | null;
  criticalPath: string[];
  maxParallel: number;
  peakParallelism: number;
  /** The run's budget (resource_limits); none when not given. */
  budget?: Budget | undefined;
}

/**
 * "bisect_and_fix": whether the culprit's (last) fix made the run-level gate pass on the merge
 * with it; null when none ran.
 */
function culpritFixed(
  task: string,
  tasks: readonly TaskRun[],
  onGateFailure: OnGateFailure | undefined,
): boolean | null {
  if (onGateFailure !== "bisect_and_fix") return null;
  const last = tasks.find((t) => t.id === task)?.redo.done.findLast((r) => r.cause === "gate");
  return last ? last.outcome === "resolved" : null;
}

const iso = (ms: number | null): string | null => (ms === null ? null : new Date(ms).toISOString());

/** The exit code of `run`/`resume`, from the outcome (README: Exit codes). */
export function exitCodeOf(
  input: Pick<ReportInput, "tasks" | "merge" | "validation" | "cancelled" | "stopped" | "error" | "dryRun">,
): ExitCode {
  if (input.error) {
    const code = exitCodeOfKind[input.error.kind];
    // What broke while the run was being cancelled is the interruption's doing.
    return code === Exit.internal && input.cancelled ? Exit.interrupted : code;
  }
  if (input.cancelled) return Exit.interrupted;
  if (input.stopped) return Exit.stopped;
  if (input.dryRun) return Exit.ok;
  if (input.merge.result === "conflict" || input.merge.conflicts.length > 0) return Exit.conflict;
  if (input.tasks.some((t) => t.state !== "success")) return Exit.failed;
  if (input.validation === "failed") return Exit.failed;
  if (input.merge.result === "failed" || input.merge.result === "rolled_back") return Exit.failed;
  return Exit.ok;
}

export function taskReport(
  t: TaskRun,
  outputLog: "stdout" | "stderr",
  escalation: NonNullable<TaskReport["escalation"]> = [],
): TaskReport {
  return {
    id: t.id,
    agent: t.agent,
    status: t.state === "pending" ? "skipped" : t.state,
    logs: { stdout: t.result.logs?.stdout ?? null, stderr: t.result.logs?.stderr ?? null },
    output_log: t.result.logs?.[outputLog] ?? null,
    artifacts: t.result.artifacts,
    exit_code: t.result.exitCode,
    reason: t.state === "pending" ? "cancelled" : t.reason,
    detail: t.detail,
    attempts: t.attempts,
    started_at: iso(t.startedAt),
    finished_at: iso(t.finishedAt),
    duration_ms: t.startedAt !== null && t.finishedAt !== null ? t.finishedAt - t.startedAt : null,
    session: t.current.session,
    branch: t.git.branch,
    commit: t.git.commit,
    refs_created: t.git.refsCreated,
    gates: t.result.gates,
    argv: t.argv,
    ...(escalation.length > 0 ? { escalation } : {}),
    dependencies: t.dependencies,
    agent_result: t.result.agentResult,
    usage: t.result.usage,
    ...(t.waiting.stateFrom !== null ? { state_from: t.waiting.stateFrom } : {}),
    ...(t.history.length > 0 ? { attempt_history: t.history } : {}),
    ...(t.hosts.length > 0 ? { hosts: t.hosts } : {}),
    ...(t.state === "failed" && t.needsHuman ? { needs_human: true as const } : {}),
    ...(t.git.controls.length > 0 ? { git_control_files: t.git.controls } : {}),
  };
}

function budgetOf(
  budget: Budget | undefined,
  tasks: readonly TaskReport[],
): Pick<Report["summary"], "budget"> {
  const standing = budgetStanding(
    budget,
    tasks.map((t) => t.usage),
  );
  return standing ? { budget: standing } : {};
}

/** Builds execution_report.json: the keys of docs/contract.md exactly, plus the additions docs/guides/ describe. */
export function buildReport(input: ReportInput): Report {
  const tasks = input.tasks.map((t) =>
    taskReport(
      // Not started because the run stopped at its boundary: its resume starts it.
      input.stopped && t.state === "pending"
        ? { ...t, detail: "not started: the run stopped at its wave boundary; termorch resume starts it" }
        : t,
      input.outputLogs?.get(t.id) ?? "stderr",
      input.escalations?.get(t.id),
    ),
  );
  const byStatus: Record<string, number> = {};
  for (const t of tasks) byStatus[t.status] = (byStatus[t.status] ?? 0) + 1;
  const wall = Math.max(0, input.finishedAt - input.startedAt);
  const busy = tasks.reduce((sum, t) => sum + (t.duration_ms ?? 0), 0);
  const conflicts = input.merge.conflicts;
  const exitCode = exitCodeOf(input);
  // Every task that did not succeed is in exactly one of the three lists.
  const idsWhere = (keep: (t: TaskReport) => boolean): string[] => tasks.filter(keep).map((t) => t.id);
  const cancelledTasks = idsWhere((t) => t.status !== "success" && t.reason === "cancelled");
  const failedTasks = idsWhere((t) => t.status === "failed" && t.reason !== "cancelled");
  const skippedTasks = idsWhere((t) => t.status === "skipped" && t.reason !== "cancelled");
  const completed =
    input.error === null &&
    !input.cancelled &&
    (input.dryRun ||
      (tasks.every((t) => t.status === "success") &&
        input.validation !== "failed" &&
        conflicts.length === 0 &&
        input.merge.result !== "failed" &&
        input.merge.result !== "rolled_back"));
  return {
    summary: {
      completed,
      failed_tasks: failedTasks,
      skipped_tasks: skippedTasks,
      cancelled_tasks: cancelledTasks,
      validation: input.validation,
      conflicts,
      usage: addUsage([...tasks.map((t) => t.usage), input.merge.review?.usage ?? null]),
      ...budgetOf(input.budget, tasks),
      metrics: {
        tasks_total: tasks.length,
        tasks_by_status: byStatus,
        wall_time_ms: wall,
        critical_path: input.criticalPath,
        critical_path_length: input.criticalPath.length,
        max_parallel: input.maxParallel,
        peak_parallelism: input.peakParallelism,
        parallelism_achieved: wall > 0 ? Math.round((busy / wall) * 100) / 100 : 0,
        attempts: attemptMetrics(
          input.tasks.map((t) => ({
            succeeded: t.state === "success",
            attempts: t.history.map((h) => ({ reason: h.reason, decision: h.decision?.status ?? null })),
          })),
        ),
      },
    },
    tasks,
    merge: {
      strategy: "topological",
      result: input.merge.result,
      conflicts,
      on_conflict: input.onConflict ?? "halt",
      on_gate_failure: input.onGateFailure ?? "halt",
      // Each task keeps its own; the run's are in the order they started.
      redone: input.tasks
        .flatMap((t) => t.redo.done)
        .sort((a, b) => a.started_at.localeCompare(b.started_at)),
      redo_assignments: input.merge.redoAssignments,
      bisects: input.merge.bisects,
      culprit: input.merge.culprit && {
        ...input.merge.culprit,
        fixed: culpritFixed(input.merge.culprit.task, input.tasks, input.onGateFailure),
      },
      reason: input.merge.reason,
      order: input.merge.order,
      base_commit: input.merge.baseCommit,
      result_commit: input.merge.resultCommit,
      target: input.merge.target,
      gates: input.merge.gates,
      review: input.merge.review,
      validated_commit: input.merge.validatedCommit,
      target_moved: input.merge.targetMovedTo !== null,
      target_moved_to: input.merge.targetMovedTo,
      refs_changed: input.merge.refsChanged,
    },
    schema_version: 1,
    run_id: input.runId,
    started_at: new Date(input.startedAt).toISOString(),
    finished_at: new Date(input.finishedAt).toISOString(),
    dry_run: input.dryRun,
    waves: input.waves,
    workspace: input.workspace,
    tmux_socket: input.tmuxSocket,
    exit_code: exitCode,
    predicted_collisions: [...(input.collisions ?? [])],
    stopped: input.stopped ? { reason: input.stopped, handoff: HANDOFF_FILE } : null,
    error: input.error,
  };
}
