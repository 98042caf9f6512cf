// The pipeline's decisions, driven through runAssignments/resumeRun with a fake task runner and
// fake timers: dispatch order and parallelism, dependents of failures, retries, timeouts with
// their grace, fail-fast, cancel, detach and adoption on resume.
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it, vi } from "vitest";
import { readRunStateFile } from "../../src/fs/run-state-file.js";
import { resumeRun, runAssignments } from "../../src/run/runner.js";
import { flatTaskRun } from "../fixtures/flat-task-run.js";
import { FakeRunner } from "./fake-runner.js";
import { MiddleRun, middleTier } from "./harness.js";

let run: MiddleRun;

middleTier(() => run);

const ids = (attempts: { spec: { taskId: string } }[]): string[] => attempts.map((a) => a.spec.taskId);

describe("dispatch", () => {
  it("runs independent tasks in parallel up to max_parallel and a dependent once its dependency succeeded", async () => {
    run = new MiddleRun([{ id: "a" }, { id: "b" }, { id: "c" }, { id: "d", dependencies: ["a"] }]);
    const done = runAssignments({
      assignmentsFile: run.file,
      ...run.options(),
      overrides: { maxParallel: 2 },
    });
    const [a, b] = await Promise.all([run.host.launched("a"), run.host.launched("b")]);
    // Two slots: c waits for one of them.
    expect(ids(run.host.attempts)).toEqual(["a", "b"]);
    b.exit(0);
    const c = await run.host.launched("c");
    expect(ids(run.host.attempts)).toEqual(["a", "b", "c"]);
    a.exit(0);
    const d = await run.host.launched("d");
    c.exit(0);
    d.exit(0);
    const report = run.report(await done);
    expect(report.exit_code).toBe(0);
    expect(report.tasks.map((t) => [t.id, t.status])).toEqual([
      ["a", "success"],
      ["b", "success"],
      ["c", "success"],
      ["d", "success"],
    ]);
    expect(report.summary.metrics?.peak_parallelism).toBe(2);
  });

  it("skips the dependents of a failed task and runs the rest", async () => {
    run = new MiddleRun([
      { id: "a" },
      { id: "b", dependencies: ["a"] },
      { id: "c", dependencies: ["b"] },
      { id: "x" },
    ]);
    run.host.onLaunch = (attempt) => attempt.exit(attempt.spec.taskId === "a" ? 3 : 0);
    const report = run.report(await runAssignments({ assignmentsFile: run.file, ...run.options() }));
    expect(report.exit_code).toBe(1);
    const byId = new Map(report.tasks.map((t) => [t.id, t]));
    expect(byId.get("a")).toMatchObject({ status: "failed", reason: "exit_code" });
    expect(byId.get("b")).toMatchObject({ status: "skipped", reason: "dependency_failed" });
    expect(byId.get("c")).toMatchObject({
      status: "skipped",
      reason: "dependency_failed",
      detail: expect.stringContaining("a (exit_code) via b"),
    });
    expect(byId.get("x")).toMatchObject({ status: "success" });
    expect(ids(run.host.attempts).sort()).toEqual(["a", "x"]);
  });
});

describe("retries", () => {
  it("runs a failing task again in a fresh session, up to retries + 1 attempts, then succeeds", async () => {
    run = new MiddleRun([{ id: "a", retries: 2 }]);
    const closedAtLaunch: number[] = [];
    run.host.onLaunch = () => closedAtLaunch.push(run.host.closed.length);
    const done = runAssignments({ assignmentsFile: run.file, ...run.options() });
    (await run.host.launched("a", 1)).exit(1);
    (await run.host.launched("a", 2)).end({ signal: "SIGSEGV" });
    const third = await run.host.launched("a", 3);
    third.exit(0);
    const report = run.report(await done);
    expect(report.tasks[0]).toMatchObject({ status: "success", attempts: 3, reason: null });
    // Each attempt in its own folder, told its number; the previous session closed before the next.
    const attempts = run.host.of("a");
    expect(attempts.map((a) => a.spec.attempt)).toEqual([1, 2, 3]);
    expect(attempts.map((a) => a.spec.env.TERMORCH_ATTEMPT)).toEqual(["1", "2", "3"]);
    expect(new Set(attempts.map((a) => a.spec.attemptDir)).size).toBe(3);
    expect(closedAtLaunch).toEqual([0, 1, 2]);
    expect(new Set(run.host.closed)).toEqual(new Set([third.spec.session]));
  });

  it("reports the last attempt's reason once the retries are used up", async () => {
    run = new MiddleRun([{ id: "a", retries: 1 }]);
    run.host.onLaunch = (attempt) => attempt.exit(attempt.spec.attempt === 1 ? 1 : 127);
    const report = run.report(await runAssignments({ assignmentsFile: run.file, ...run.options() }));
    expect(report.tasks[0]).toMatchObject({
      status: "failed",
      attempts: 2,
      reason: "exit_code",
      detail: "exited with code 127 (command not found?)",
    });
  });
});

describe("timeouts", () => {
  it("sends TERM at the timeout and KILL after kill_grace_s to an agent that ignores TERM", async () => {
    run = new MiddleRun([{ id: "a", timeout_s: 10 }], { config: { defaults: { kill_grace_s: 3 } } });
    run.host.onLaunch = (attempt) => {
      attempt.onTerm = "ignore";
    };
    const started = Date.now();
    const done = runAssignments({ assignmentsFile: run.file, ...run.options() });
    await run.running("a");
    const a = run.host.of("a")[0]!;
    await vi.advanceTimersByTimeAsync(9_999);
    expect(a.stops).toEqual([]);
    await vi.advanceTimersByTimeAsync(1);
    expect(a.stops).toEqual([{ at: started + 10_000, graceMs: 3_000 }]);
    expect(a.done).toBe(false);
    await vi.advanceTimersByTimeAsync(3_000);
    const report = run.report(await done);
    expect(report.tasks[0]).toMatchObject({
      status: "failed",
      reason: "timeout",
      detail: "timed out after 10 s; its process group was terminated",
    });
    expect(report.tasks[0]!.gates[0]).toMatchObject({ name: "core", passed: false, detail: "timed out" });
  });

  it("takes the task's timeout before its agent's, the assignment's and the config's", async () => {
    run = new MiddleRun([{ id: "a", timeout_s: 5 }, { id: "b" }], {
      config: { defaults: { timeout_s: 100 } },
      assignment: { environment: { workspace_dir: "ws", resource_limits: { timeout_s: 20 } } },
    });
    const done = runAssignments({ assignmentsFile: run.file, ...run.options() });
    await Promise.all([run.running("a"), run.running("b")]);
    await vi.advanceTimersByTimeAsync(5_000);
    expect(run.host.of("a")[0]!.stops).toHaveLength(1);
    expect(run.host.of("b")[0]!.stops).toHaveLength(0);
    await vi.advanceTimersByTimeAsync(15_000);
    expect(run.host.of("b")[0]!.stops).toHaveLength(1);
    const report = run.report(await done);
    expect(report.tasks.map((t) => t.reason)).toEqual(["timeout", "timeout"]);
  });
});

describe("stopping a run", () => {
  it("--fail-fast stops the running tasks and skips the pending ones once a task failed", async () => {
    run = new MiddleRun([{ id: "a" }, { id: "b" }, { id: "c", dependencies: ["b"] }]);
    const done = runAssignments({
      assignmentsFile: run.file,
      ...run.options(),
      overrides: { failFast: true },
    });
    const [a, b] = await Promise.all([run.host.launched("a"), run.host.launched("b")]);
    await run.running("b");
    a.exit(2);
    const report = run.report(await done);
    expect(b.stops).toHaveLength(1);
    const byId = new Map(report.tasks.map((t) => [t.id, t]));
    expect(byId.get("a")).toMatchObject({ status: "failed", reason: "exit_code" });
    expect(byId.get("b")).toMatchObject({ status: "failed", reason: "cancelled" });
    expect(byId.get("c")).toMatchObject({ status: "skipped" });
    // A fail-fast stop is not a cancel: the run fails with the task's exit code.
    expect(report.exit_code).toBe(1);
    expect(ids(run.host.attempts).sort()).toEqual(["a", "b"]);
  });

  it("a cancel ends the running task, skips the pending ones and reports exit 130", async () => {
    run = new MiddleRun([{ id: "a" }, { id: "b", dependencies: ["a"] }]);
    const cancel = new AbortController();
    const done = runAssignments({ assignmentsFile: run.file, ...run.options({ signal: cancel.signal }) });
    await run.running("a");
    cancel.abort();
    const report = run.report(await done);
    expect(run.host.of("a")[0]!.stops).toHaveLength(1);
    expect(report.exit_code).toBe(130);
    expect(report.tasks.map((t) => [t.id, t.status, t.reason])).toEqual([
      ["a", "failed", "cancelled"],
      ["b", "skipped", "cancelled"],
    ]);
  });

  it("a detach leaves the running agent alone and the pending tasks pending, with no report", async () => {
    run = new MiddleRun([{ id: "a" }, { id: "b", dependencies: ["a"] }]);
    const detach = new AbortController();
    const done = runAssignments({ assignmentsFile: run.file, ...run.options({ detach: detach.signal }) });
    await run.running("a");
    detach.abort();
    const result = await done;
    expect(result).toMatchObject({ detached: true });
    const a = run.host.of("a")[0]!;
    expect(a.stops).toEqual([]);
    expect(a.released).toBe(true);
    const state = run.state((result as { runDir: string }).runDir);
    expect(state.tasks.map((t) => [t.id, t.state])).toEqual([
      ["a", "running"],
      ["b", "pending"],
    ]);
  });
});

describe("stop reasons that come together", () => {
  it("a cancel during a --fail-fast stop still reports exit 130", async () => {
    run = new MiddleRun([{ id: "a" }, { id: "b" }], { config: { defaults: { kill_grace_s: 5 } } });
    const cancel = new AbortController();
    const done = runAssignments({
      assignmentsFile: run.file,
      ...run.options({ signal: cancel.signal }),
      overrides: { failFast: true },
    });
    const [a, b] = await Promise.all([run.host.launched("a"), run.host.launched("b")]);
    b.onTerm = "ignore";
    await run.running("b");
    a.exit(1);
    await b.stopped;
    cancel.abort();
    await vi.advanceTimersByTimeAsync(5_000);
    const report = run.report(await done);
    expect(report.exit_code).toBe(130);
    expect(report.tasks.map((t) => [t.id, t.reason])).toEqual([
      ["a", "exit_code"],
      ["b", "cancelled"],
    ]);
  });

  it("a detach during a cancel leaves at once, the agent still running, instead of waiting out the grace", async () => {
    run = new MiddleRun([{ id: "a" }], { config: { defaults: { kill_grace_s: 30 } } });
    const cancel = new AbortController();
    const detach = new AbortController();
    const done = runAssignments({
      assignmentsFile: run.file,
      ...run.options({ signal: cancel.signal, detach: detach.signal }),
    });
    const a = await run.host.launched("a");
    a.onTerm = "ignore";
    await run.running("a");
    cancel.abort();
    await a.stopped;
    detach.abort();
    expect(await done).toMatchObject({ detached: true });
    expect(a.done).toBe(false);
    expect(a.released).toBe(true);
  });
});

describe("resume", () => {
  it("adopts the attempt a detached run left running, never launching it again, and runs the rest", async () => {
    run = new MiddleRun([
      { id: "a", timeout_s: 60 },
      { id: "b", dependencies: ["a"] },
    ]);
    const runDir = await run.detachedAt("a");
    await vi.advanceTimersByTimeAsync(30_000);
    const runner = new FakeRunner(run.host);
    const resumed = resumeRun({ runDir, ...run.options({ seams: { runner } }) });
    await run.running("a");
    const a = run.host.of("a")[0]!;
    expect(runner.adopted).toEqual([a]);
    // The adopted attempt keeps its deadline: 30 of its 60 s are left.
    await vi.advanceTimersByTimeAsync(29_999);
    expect(a.stops).toEqual([]);
    a.exit(0);
    (await run.host.launched("b")).exit(0);
    const report = run.report(await resumed);
    expect(report.exit_code).toBe(0);
    expect(run.host.of("a")).toHaveLength(1);
    expect(report.tasks.map((t) => [t.id, t.status, t.attempts])).toEqual([
      ["a", "success", 1],
      ["b", "success", 1],
    ]);
    const adopted = readFileSync(join(runDir, "events.jsonl"), "utf8")
      .split("\n")
      .filter((line) => line.includes('"task.adopted"'))
      .map((line) => JSON.parse(line) as { data: Record<string, unknown> });
    expect(adopted.map((e) => e.data)).toEqual([
      { attempt: 1, session: a.spec.session, finished: false, live: true },
    ]);
  });

  it("resumes a run whose state.json and task journal an earlier version wrote (flat task records)", async () => {
    run = new MiddleRun([
      { id: "a", timeout_s: 60 },
      { id: "b", dependencies: ["a"] },
    ]);
    const runDir = await run.detachedAt("a");
    const read = readRunStateFile(runDir);
    if (!read.ok) throw new Error(read.problem);
    const { state } = read;
    const flat = state.tasks.map(flatTaskRun);
    writeFileSync(join(runDir, "state.json"), JSON.stringify({ ...state, tasks: flat }));
    writeFileSync(state.task_journal!, flat.map((t) => `${JSON.stringify(t)}\n`).join(""));
    const runner = new FakeRunner(run.host);
    const resumed = resumeRun({ runDir, ...run.options({ seams: { runner } }) });
    await run.running("a");
    const a = run.host.of("a")[0]!;
    // Its live attempt is found by the session and folder the flat record names: adopted, not launched again.
    expect(runner.adopted).toEqual([a]);
    a.exit(0);
    (await run.host.launched("b")).exit(0);
    const report = run.report(await resumed);
    expect(report.tasks.map((t) => [t.id, t.status, t.attempts])).toEqual([
      ["a", "success", 1],
      ["b", "success", 1],
    ]);
  });

  it("fails an attempt recorded as running whose session vanished as lost, without launching it again", async () => {
    run = new MiddleRun([{ id: "a" }]);
    const runDir = await run.detachedAt("a");
    run.host.attempts.length = 0;
    const report = run.report(await resumeRun({ runDir, ...run.options() }));
    expect(run.host.attempts).toEqual([]);
    expect(report.tasks[0]).toMatchObject({ status: "failed", reason: "lost", attempts: 1 });
  });

  it("launches an attempt that was recorded but never started, under the same attempt number", async () => {
    run = new MiddleRun([{ id: "a" }]);
    const runDir = await run.detachedAt("a");
    // As if the driver had died between recording the attempt and launching it: the attempt is
    // in state.json, the task not yet running, and nothing was launched.
    run.host.attempts.length = 0;
    const state = run.state(runDir);
    const recorded = { ...state.tasks[0]!, state: "pending" as const };
    writeFileSync(
      join(runDir, "state.json"),
      JSON.stringify({ ...state, task_journal: null, tasks: [recorded] }),
    );
    const resumed = resumeRun({ runDir, ...run.options() });
    const again = await run.host.launched("a");
    expect(again.spec).toMatchObject({
      attempt: 1,
      attemptDir: recorded.current.dir,
      session: recorded.current.session,
    });
    again.exit(0);
    const report = run.report(await resumed);
    expect(report.tasks[0]).toMatchObject({ status: "success", attempts: 1 });
  });
});
