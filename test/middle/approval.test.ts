// Approval by a person (issue 38): a task waits for a decision before it starts or on its
// attempt's result, the merge before it merges; `termorch approve|reject` (decide) answers it
// through the run's private folder; a rejection's reason is the next attempt's feedback; a wait
// survives a detach and resume, and a decision given meanwhile is taken. The real pipeline with
// the fake runner and fake timers.
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it, vi } from "vitest";
import type { InputError } from "../../src/errors.js";
import { decide } from "../../src/ops/approval.js";
import { resumeRun, runAssignments } from "../../src/run/runner.js";
import { MiddleRun, middleTier, notifyRecorder } from "./harness.js";

let run: MiddleRun;

middleTier(() => run);

/** Answers what waits in the run, as `termorch approve|reject` does, and lets the driver look. */
async function answer(
  taskId: string | undefined,
  decision: "approve" | "reject",
  reason: string | null = null,
) {
  const done = await decide(
    run.dir,
    taskId,
    { decision, reason, by: "tester" },
    { env: run.options().env!, cwd: run.dir, now: Date.now() },
  );
  await vi.advanceTimersByTimeAsync(500);
  return done;
}

/** Resolves once every task of `ids` waits for a decision (on attempt `attempt`'s result, or to start: 0). */
const waiting = (ids: string[], attempt = 1) =>
  run.when((tasks) => ids.every((id) => tasks.get(id)?.waiting.approval?.attempt === attempt));

describe("approval of a task's result", () => {
  it("waits once the attempt passed its gates; a rejection's reason is the next attempt's feedback; an approval ends it done", async () => {
    run = new MiddleRun([{ id: "a", retries: 1, approval: "result" }], {
      config: { notify: { command: ["never-run"] } },
    });
    run.host.onLaunch = (a) => a.exit(0);
    const { sent, seams } = notifyRecorder();
    const done = runAssignments({ assignmentsFile: run.file, ...run.options({ seams }) });
    await waiting(["a"]);
    await answer("a", "reject", "Use the other endpoint.");
    await waiting(["a"], 2);
    expect(run.host.of("a")).toHaveLength(2);
    await answer("a", "approve");
    const report = run.report(await done);
    expect(report.tasks[0]).toMatchObject({ status: "success", attempts: 2 });
    const [first, second] = report.tasks[0]!.attempt_history!;
    expect(first).toMatchObject({
      reason: "rejected",
      detail: "its result was rejected by tester: Use the other endpoint.",
    });
    const feedback = readFileSync(join(run.dir, second!.feedback!), "utf8");
    expect(feedback).toContain("### A person rejected the result");
    expect(feedback).toContain("Use the other endpoint.");
    expect(report.tasks[0]!.gates.at(-1)).toMatchObject({
      name: "approval",
      passed: true,
      detail: "approved by tester",
    });
    // AUTO-008: who decided what, when, in the ledger.
    const decided = run.events().filter((e) => e.type === "task.approval_decided");
    expect(decided.map((e) => [e.data.decision, e.data.by, e.data.attempt])).toEqual([
      ["reject", "tester", 1],
      ["approve", "tester", 2],
    ]);
    expect(decided.every((e) => typeof e.data.decided_at === "string")).toBe(true);
    // Each wait is told to notify, with what waits.
    expect(sent.filter((e) => e.event === "task.waiting_approval")).toMatchObject([
      { task_id: "a", approval: { at: "result", attempt: 1 } },
      { task_id: "a", approval: { at: "result", attempt: 2 } },
    ]);
  });

  it("a rejection with no attempts left ends the task (reason rejected); no decision within timeout_s is one", async () => {
    run = new MiddleRun([
      { id: "a", approval: "result" },
      { id: "b", approval: { at: "result", timeout_s: 60 } },
    ]);
    run.host.onLaunch = (a) => a.exit(0);
    const done = runAssignments({ assignmentsFile: run.file, ...run.options() });
    await waiting(["a", "b"]);
    await answer("a", "reject", "No.");
    await vi.advanceTimersByTimeAsync(60_000);
    const report = run.report(await done);
    expect(report.tasks.map((t) => [t.id, t.status, t.reason])).toEqual([
      ["a", "failed", "rejected"],
      ["b", "failed", "rejected"],
    ]);
    expect(report.tasks[1]!.detail).toContain("no one decided within 60 s");
    expect(
      run.events().find((e) => e.type === "task.approval_decided" && e.task_id === "b")?.data,
    ).toMatchObject({
      decision: "timeout",
      by: "termorch",
    });
  });
});

describe("approval of a task's start", () => {
  it("holds the task (and no slot) until approved; a rejection ends it before it starts and skips its dependents", async () => {
    run = new MiddleRun(
      [
        { id: "a", approval: "start" },
        { id: "b", dependencies: ["a"] },
        { id: "c", approval: "start" },
        { id: "d" },
      ],
      { assignment: { environment: { workspace_dir: "ws", resource_limits: { max_parallel: 1 } } } },
    );
    run.host.onLaunch = (a) => a.exit(0);
    const done = runAssignments({ assignmentsFile: run.file, ...run.options() });
    await waiting(["a", "c"], 0);
    // d ran meanwhile, with the one slot: neither wait holds it.
    await run.when((tasks) => tasks.get("d")?.state === "success");
    expect(run.host.of("a")).toHaveLength(0);
    await expect(
      decide(
        run.dir,
        "d",
        { decision: "approve", reason: null, by: "tester" },
        { env: run.options().env!, cwd: run.dir, now: Date.now() },
      ),
    ).rejects.toMatchObject({
      problems: [{ message: expect.stringContaining("task d of run middle is not waiting for approval") }],
    } satisfies Partial<InputError>);
    await answer("c", "reject", "Not now.");
    await answer("a", "approve");
    const report = run.report(await done);
    expect(report.tasks.map((t) => [t.id, t.status, t.reason])).toEqual([
      ["a", "success", null],
      ["b", "success", null],
      ["c", "failed", "rejected"],
      ["d", "success", null],
    ]);
    expect(report.tasks[2]!.detail).toBe("it was rejected by tester: Not now. before it started");
    expect(run.host.of("c")).toHaveLength(0);
  });

  it("a wait survives a detach; a decision given while no driver runs is taken at resume, and the task runs once", async () => {
    run = new MiddleRun([{ id: "a", approval: "result" }]);
    run.host.onLaunch = (a) => a.exit(0);
    const detach = new AbortController();
    const first = runAssignments({ assignmentsFile: run.file, ...run.options({ detach: detach.signal }) });
    await waiting(["a"]);
    detach.abort();
    const detached = await first;
    expect("detached" in detached).toBe(true);
    expect(run.state(run.dir).tasks[0]!.waiting.approval).toMatchObject({ at: "result", attempt: 1 });
    await decide(
      run.dir,
      "a",
      { decision: "approve", reason: null, by: "tester" },
      { env: run.options().env!, cwd: run.dir, now: Date.now() },
    );
    const resumed = resumeRun({ runDir: run.dir, ...run.options() });
    await vi.advanceTimersByTimeAsync(500);
    const report = run.report(await resumed);
    expect(report.tasks[0]).toMatchObject({ status: "success", attempts: 1 });
    expect(run.host.of("a")).toHaveLength(1);
    expect(existsSync(join(run.dir, ".termorch", "middle", "approvals", "a.json"))).toBe(false);
  });
});

describe("approval of the merge (merge.approval)", () => {
  it("waits once the run-level gates passed; a rejection merges nothing, its reason in the report; an approval merges", async () => {
    for (const decision of ["reject", "approve"] as const) {
      run = new MiddleRun([{ id: "a" }], {
        git: true,
        assignment: { run_id: `approval-${process.pid}-${decision}`, mode: { merge: { approval: true } } },
      });
      run.host.onLaunch = (a) => {
        writeFileSync(join(a.spec.cwd, "a.txt"), "a\n");
        a.exit(0);
      };
      const done = runAssignments({ assignmentsFile: run.file, ...run.options() });
      // The merge tells no progress hook: its wait is found in the ledger (bounded).
      await vi.waitFor(() => expect(run.events().some((e) => e.type === "run.waiting_approval")).toBe(true), {
        timeout: 4_000,
        interval: 20,
      });
      const status = await decide(
        run.dir,
        undefined,
        { decision, reason: decision === "reject" ? "Not this week." : null, by: "tester" },
        { env: run.options().env!, cwd: run.dir, now: Date.now() },
      );
      expect(status.wait).toMatchObject({ at: "merge", attempt: 0 });
      await vi.advanceTimersByTimeAsync(500);
      const report = run.report(await done);
      expect(report.merge.gates.at(-1)).toMatchObject({
        name: "run.approval",
        passed: decision === "approve",
      });
      expect(report.merge.result).toBe(decision === "approve" ? "success" : "skipped");
      if (decision === "reject")
        expect(report.merge.gates.at(-1)!.detail).toBe("rejected by tester: Not this week.");
      expect(existsSync(join(run.dir, "ws", "a.txt"))).toBe(decision === "approve");
      expect(run.events().find((e) => e.type === "run.approval_decided")?.data).toMatchObject({
        decision,
        by: "tester",
      });
      run.cleanup();
    }
  });
});
