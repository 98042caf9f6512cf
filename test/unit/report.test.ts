import { describe, expect, it } from "vitest";
import { Report } from "../../src/contract/report.js";
import { buildReport, skippedMerge } from "../../src/report/build.js";
import { newTaskRun } from "../../src/task/task-run.js";

function input(states: Array<"success" | "failed" | "skipped">) {
  const tasks = states.map((state, i) => ({
    ...newTaskRun(`T${i}`, "agent", [], ["true"]),
    state,
    startedAt: 1000,
    finishedAt: 3000,
  }));
  return {
    runId: "r1",
    startedAt: 0,
    finishedAt: 4000,
    dryRun: false,
    waves: [tasks.map((t) => t.id)],
    tasks,
    merge: skippedMerge("test"),
    validation: "skipped" as const,
    cancelled: false,
    error: null,
    workspace: "/w",
    tmuxSocket: "termorch",
    criticalPath: ["T0"],
    maxParallel: 2,
    peakParallelism: 2,
  };
}

describe("report", () => {
  it("keeps the seed's keys and validates against its own schema", () => {
    const report = buildReport(input(["success", "success"]));
    expect(Report.parse(report)).toEqual(report);
    expect(Object.keys(report.summary)).toEqual(
      expect.arrayContaining(["completed", "failed_tasks", "validation", "conflicts"]),
    );
    expect(report.merge.strategy).toBe("topological");
    expect(report.tasks[0]).toMatchObject({
      id: "T0",
      agent: "agent",
      status: "success",
      logs: { stdout: null, stderr: null },
      artifacts: [],
    });
    expect(report.summary.completed).toBe(true);
    expect(report.exit_code).toBe(0);
    expect(report.summary.metrics?.parallelism_achieved).toBe(1);
  });

  it("is not completed and exits 1 when a task failed", () => {
    const report = buildReport(input(["success", "failed", "skipped"]));
    expect(report.summary.completed).toBe(false);
    expect(report.summary).toMatchObject({
      failed_tasks: ["T1"],
      skipped_tasks: ["T2"],
      cancelled_tasks: [],
    });
    expect(report.exit_code).toBe(1);
    expect(report.summary.metrics?.tasks_by_status).toEqual({ success: 1, failed: 1, skipped: 1 });
  });

  it("exits 130 when cancelled and 3 on a merge conflict", () => {
    expect(buildReport({ ...input(["success"]), cancelled: true }).exit_code).toBe(130);
    const conflict = {
      ...skippedMerge(""),
      result: "conflict" as const,
      conflicts: [{ tasks: ["A", "B"], files: ["f"], detail: "content" }],
    };
    const report = buildReport({ ...input(["success"]), merge: conflict });
    expect(report.exit_code).toBe(3);
    expect(report.summary.conflicts).toHaveLength(1);
  });
});
