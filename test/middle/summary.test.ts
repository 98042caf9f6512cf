// What a run's report and status files say of its tasks, driven through runAssignments with the
// fake runner: the summary's lists, a skipped task's root failure, one status file per task, and a
// workspace that is not a repository (tasks run in it; nothing to merge), and status files an
// agent forged. These used to take a real run each (test/integration/run, run-summary, lifecycle,
// status-forged); those keep the tmux sessions kept for inspection and the CLI's own lines.
import { readdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { jsonSchemaOf } from "../../src/contract/json-schema.js";
import { runAssignments } from "../../src/run/runner.js";
import { MiddleRun, middleTier } from "./harness.js";

let run: MiddleRun;

middleTier(() => run);

describe("the run's summary", () => {
  it("lists failed and skipped tasks apart, names a skipped task's root failure, and writes one status file per task", async () => {
    // "alpha" sorts before "mid", which it depends on: the skip batch is not in dependency order.
    run = new MiddleRun([
      { id: "bad" },
      { id: "mid", dependencies: ["bad"] },
      { id: "alpha", dependencies: ["mid"] },
      { id: "free" },
    ]);
    run.host.onLaunch = (attempt) => attempt.exit(attempt.spec.taskId === "bad" ? 7 : 0);
    const report = run.report(await runAssignments({ assignmentsFile: run.file, ...run.options() }));
    expect(report.exit_code).toBe(1);
    expect(report.summary).toMatchObject({
      completed: false,
      failed_tasks: ["bad"],
      skipped_tasks: ["mid", "alpha"],
      cancelled_tasks: [],
    });
    const byId = Object.fromEntries(report.tasks.map((t) => [t.id, t]));
    expect(byId.bad).toMatchObject({ status: "failed", reason: "exit_code", exit_code: 7 });
    expect(byId.mid).toMatchObject({
      status: "skipped",
      reason: "dependency_failed",
      detail: "a dependency failed: bad (exit_code)",
    });
    expect(byId.alpha).toMatchObject({
      status: "skipped",
      reason: "dependency_failed",
      detail: "a dependency failed: bad (exit_code) via mid",
    });
    expect(byId.free).toMatchObject({ status: "success" });
    // The skipped never started.
    expect(run.host.attempts.map((a) => a.spec.taskId).sort()).toEqual(["bad", "free"]);
    expect(readdirSync(join(run.dir, "status")).sort()).toEqual([
      "alpha.skipped",
      "bad.failed",
      "free.success",
      "mid.skipped",
    ]);
  });

  it("documents each list in the report's JSON Schema", () => {
    const summary = (
      jsonSchemaOf("report") as {
        properties: { summary: { required: string[]; properties: Record<string, { description: string }> } };
      }
    ).properties.summary;
    expect(summary.required).toEqual(
      expect.arrayContaining(["failed_tasks", "skipped_tasks", "cancelled_tasks"]),
    );
    expect(summary.properties.failed_tasks?.description).toMatch(
      /own attempt failed.*not the skipped or cancelled/is,
    );
    expect(summary.properties.skipped_tasks?.description).toMatch(/dependency/);
    expect(summary.properties.cancelled_tasks?.description).toMatch(/cancel/);
  });
});

describe("status files an agent forged in the run directory", () => {
  it("do not outlive the task's real final state: each task ends with one status file", async () => {
    run = new MiddleRun([{ id: "A" }, { id: "B", dependencies: ["A"] }]);
    run.host.onLaunch = (attempt) => {
      if (attempt.spec.taskId === "A") {
        // The run directory is two folders up from the agent's artifacts folder.
        const status = join(attempt.spec.env.TERMORCH_ARTIFACTS_DIR!, "..", "..", "status");
        writeFileSync(join(status, "B.failed"), "{}\n");
        writeFileSync(join(status, "B.skipped"), "{}\n");
      }
      attempt.exit(0);
    };
    const report = run.report(await runAssignments({ assignmentsFile: run.file, ...run.options() }));
    expect(report.tasks.map((t) => t.status)).toEqual(["success", "success"]);
    expect(readdirSync(join(run.dir, "status")).sort()).toEqual(["A.success", "B.success"]);
  });
});

describe("a workspace that is not a git repository", () => {
  it("runs its tasks in the workspace itself and says why nothing was merged", async () => {
    run = new MiddleRun([{ id: "one", allowed_paths: ["one.txt"] }, { id: "two" }]);
    run.host.onLaunch = (attempt) => attempt.exit(0);
    const report = run.report(await runAssignments({ assignmentsFile: run.file, ...run.options() }));
    expect(report.exit_code).toBe(0);
    expect(run.host.attempts.map((a) => a.spec.cwd)).toEqual([join(run.dir, "ws"), join(run.dir, "ws")]);
    expect(report.merge).toMatchObject({
      result: "skipped",
      reason: expect.stringMatching(/not a git repository/),
    });
    expect(report.tasks[0]!.gates.find((g) => g.name === "allowed_paths")).toMatchObject({
      passed: null,
      detail: expect.stringMatching(/not a git repository/),
    });
    expect(report.tasks.map((t) => t.branch)).toEqual([null, null]);
  });
});
