import { describe, expect, it } from "vitest";
import { AttemptMetrics } from "../../src/contract/report.js";
import { attemptMetrics, type TaskAttempts } from "../../src/report/attempt-metrics.js";
import { buildReport, skippedMerge } from "../../src/report/build.js";
import { openRecord } from "../../src/task/attempt-history.js";
import { newTaskRun, type TaskRun } from "../../src/task/task-run.js";

// The ledgerflow seed's metrics (section 10) over a run's attempts (issue 36, item 4).

const ok = { reason: null, decision: null } as const;
const failed = { reason: "validation", decision: null } as const;

describe("attemptMetrics", () => {
  it("counts every attempt of every task, and each decision over all of them", () => {
    const tasks: TaskAttempts[] = [
      // Escalated, then done by the stronger agent: succeeded only after the first attempt failed.
      { succeeded: true, attempts: [{ reason: "escalated", decision: "escalate_to_max" }, ok] },
      // Blocked at once.
      { succeeded: false, attempts: [{ reason: "blocked", decision: "blocked" }] },
      // An invalid envelope.
      { succeeded: false, attempts: [{ reason: "invalid_decision", decision: "invalid" }] },
      // Failed twice, then succeeded with a completed decision.
      { succeeded: true, attempts: [failed, failed, { reason: null, decision: "completed" }] },
      // Succeeded at once, saying nothing.
      { succeeded: true, attempts: [ok] },
    ];
    const m = AttemptMetrics.parse(attemptMetrics(tasks));
    expect(m).toEqual({
      total: 8,
      with_decision: 4,
      escalated: 1,
      blocked: 1,
      invalid: 1,
      escalation_rate: 0.125,
      block_rate: 0.125,
      invalid_rate: 0.125,
      // (2 + 3 + 1) / 3
      per_successful_task: 2,
      succeeded_after_feedback: 2,
    });
  });

  it("rounds the rates and the mean", () => {
    const m = attemptMetrics([
      { succeeded: true, attempts: [{ reason: "blocked", decision: "blocked" }, ok] },
      { succeeded: true, attempts: [ok] },
      { succeeded: true, attempts: [ok] },
    ]);
    expect(m.block_rate).toBe(0.25);
    expect(m.per_successful_task).toBe(1.33);
    const thirds = attemptMetrics([
      { succeeded: false, attempts: [failed, failed, { reason: "blocked", decision: "blocked" }] },
    ]);
    expect(thirds.block_rate).toBe(0.3333);
  });

  it("does not count a first success redone after a merge conflict as succeeding after feedback", () => {
    expect(attemptMetrics([{ succeeded: true, attempts: [ok, ok] }]).succeeded_after_feedback).toBe(0);
  });

  it("counts a success after an escalation whose attempt passed its gates", () => {
    const escalated = { reason: null, decision: "escalate_to_max" } as const;
    expect(attemptMetrics([{ succeeded: true, attempts: [escalated, ok] }]).succeeded_after_feedback).toBe(1);
  });

  it("has no rates without attempts and no mean without a successful task", () => {
    expect(attemptMetrics([])).toEqual({
      total: 0,
      with_decision: 0,
      escalated: 0,
      blocked: 0,
      invalid: 0,
      escalation_rate: null,
      block_rate: null,
      invalid_rate: null,
      per_successful_task: null,
      succeeded_after_feedback: 0,
    });
    expect(attemptMetrics([{ succeeded: false, attempts: [failed] }]).per_successful_task).toBeNull();
  });
});

describe("the report's summary.metrics.attempts", () => {
  /** An attempt record of the task's history, ended as given. */
  const record = (
    n: number,
    reason: TaskRun["reason"],
    status: "escalate_to_max" | "blocked" | "invalid" | null,
  ) => ({
    ...openRecord(n, "claude", 0, { from: null, escalated: false, feedback: null }),
    finished_at: new Date(1).toISOString(),
    reason,
    decision:
      status === null
        ? null
        : {
            status,
            reason: "r",
            confidence: null,
            recommended_next_actor: null,
            file: `artifacts/t/attempt-${n}/d`,
          },
  });

  it("are the attempt histories' metrics", () => {
    const task = (id: string, state: TaskRun["state"], history: TaskRun["history"]): TaskRun => ({
      ...newTaskRun(id, "claude", [], ["claude"]),
      state,
      attempts: history.length,
      history,
    });
    const report = buildReport({
      runId: "r1",
      startedAt: 0,
      finishedAt: 10,
      dryRun: false,
      waves: [["A", "B", "C"]],
      tasks: [
        task("A", "success", [record(1, "escalated", "escalate_to_max"), record(2, null, null)]),
        task("B", "failed", [record(1, "blocked", "blocked")]),
        task("C", "failed", [record(1, "invalid_decision", "invalid")]),
      ],
      merge: skippedMerge("test"),
      validation: "skipped",
      cancelled: false,
      stopped: null,
      error: null,
      workspace: "/w",
      tmuxSocket: null,
      criticalPath: ["A"],
      maxParallel: 3,
      peakParallelism: 3,
    });
    expect(report.summary.metrics?.attempts).toEqual({
      total: 4,
      with_decision: 3,
      escalated: 1,
      blocked: 1,
      invalid: 1,
      escalation_rate: 0.25,
      block_rate: 0.25,
      invalid_rate: 0.25,
      per_successful_task: 2,
      succeeded_after_feedback: 1,
    });
  });
});
