// Scheduling, stopping and resuming decisions that used to be tested only through real tmux
// (test/integration/lifecycle, run, run-summary, resume, ops-cancel), driven here through
// runAssignments/resumeRun with the fake runner and fake timers. What those files keep is what
// only a real part can show: signals and process groups, tmux sessions, git, the CLI.
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import PQueue from "p-queue";
import { describe, expect, it } from "vitest";
import { InputError } from "../../src/errors.js";
import { resumeRun, runAssignments } from "../../src/run/runner.js";
import type { FakeAttempt } from "./fake-runner.js";
import { MiddleRun, middleTier } from "./harness.js";

let run: MiddleRun;

middleTier(() => run);

const ids = (attempts: readonly FakeAttempt[]): string[] => attempts.map((a) => a.spec.taskId);
const live = (): string[] => ids(run.host.attempts.filter((a) => !a.done)).sort();

describe("schedule", () => {
  it("--schedule waves holds the next wave until the slowest task of the previous one ends", async () => {
    run = new MiddleRun([{ id: "fast" }, { id: "slow" }, { id: "next", dependencies: ["fast"] }]);
    // Every task takes a slot of the host's queue as it starts: it shows what the driver started.
    const hostQueue = new PQueue();
    let started = 0;
    hostQueue.on("add", () => started++);
    const done = runAssignments({
      assignmentsFile: run.file,
      ...run.options({ hostQueue }),
      overrides: { schedule: "waves" },
    });
    const [fast, slow] = await Promise.all([run.host.launched("fast"), run.host.launched("slow")]);
    expect(started).toBe(2);
    fast.exit(0);
    await run.until((tasks) => tasks.get("fast")?.state === "success");
    // What the driver decides after fast's success takes no I/O: it is decided once the promise
    // continuations ran. Its own dependency is done, but slow (of the first wave) still runs.
    await new Promise((resolve) => setImmediate(resolve));
    expect(started).toBe(2);
    expect(ids(run.host.attempts)).toEqual(["fast", "slow"]);
    slow.exit(0);
    const next = await run.host.launched("next");
    expect(started).toBe(3);
    next.exit(0);
    const report = run.report(await done);
    expect(report.exit_code).toBe(0);
    expect(report.waves).toEqual([["fast", "slow"], ["next"]]);
  });

  it("eager (the default) starts a task as soon as its own dependency is done, while the slow one still runs", async () => {
    run = new MiddleRun([{ id: "fast" }, { id: "slow" }, { id: "next", dependencies: ["fast"] }]);
    const done = runAssignments({ assignmentsFile: run.file, ...run.options() });
    const [fast, slow] = await Promise.all([run.host.launched("fast"), run.host.launched("slow")]);
    fast.exit(0);
    const next = await run.host.launched("next");
    expect(slow.done).toBe(false);
    expect(live()).toEqual(["next", "slow"]);
    next.exit(0);
    slow.exit(0);
    expect(run.report(await done).exit_code).toBe(0);
  });

  it("never runs more than max_parallel tasks at once, and reaches it", async () => {
    const tasks = ["a", "b", "c", "d", "e", "f"].map((id) => ({ id }));
    run = new MiddleRun(tasks, {
      assignment: { environment: { workspace_dir: "ws", resource_limits: { max_parallel: 2 } } },
    });
    let peak = 0;
    run.host.onLaunch = () => {
      peak = Math.max(peak, run.host.attempts.filter((a) => !a.done).length);
    };
    const done = runAssignments({ assignmentsFile: run.file, ...run.options() });
    // Each agent ends as soon as it runs; the next ones start as slots free up.
    for (const id of ["a", "b", "c", "d", "e", "f"]) (await run.host.launched(id)).exit(0);
    const report = run.report(await done);
    expect(report.exit_code).toBe(0);
    expect(ids(run.host.attempts).sort()).toEqual(["a", "b", "c", "d", "e", "f"]);
    expect(peak).toBe(2);
    expect(report.summary.metrics?.peak_parallelism).toBe(2);
  });
});

describe("--fail-fast", () => {
  it("puts the tasks it ended or kept from starting in cancelled_tasks, not failed_tasks", async () => {
    run = new MiddleRun(
      [
        { id: "bad" },
        { id: "child", dependencies: ["bad"] },
        { id: "slow" },
        { id: "later", dependencies: ["slow"] },
      ],
      { assignment: { environment: { workspace_dir: "ws", resource_limits: { max_parallel: 2 } } } },
    );
    const done = runAssignments({
      assignmentsFile: run.file,
      ...run.options(),
      overrides: { failFast: true },
    });
    const [bad] = await Promise.all([run.host.launched("bad"), run.host.launched("slow")]);
    // Fails once "slow" is running, so --fail-fast finds it running.
    await run.running("slow");
    bad.exit(1);
    const report = run.report(await done);
    expect(report.exit_code).toBe(1);
    expect(report.tasks.map((t) => [t.id, t.status, t.reason])).toEqual([
      ["bad", "failed", "exit_code"],
      ["child", "skipped", "dependency_failed"],
      ["slow", "failed", "cancelled"],
      ["later", "skipped", "cancelled"],
    ]);
    expect(report.summary).toMatchObject({
      failed_tasks: ["bad"],
      skipped_tasks: ["child"],
      cancelled_tasks: ["slow", "later"],
    });
  });
});

describe("--fail-fast, a task waiting for a slot", () => {
  it("is skipped, never started, when the failure frees the slot it waited for", async () => {
    run = new MiddleRun([{ id: "a-bad" }, { id: "b-slow" }, { id: "c-queued" }], {
      assignment: { environment: { workspace_dir: "ws", resource_limits: { max_parallel: 2 } } },
    });
    const done = runAssignments({
      assignmentsFile: run.file,
      ...run.options(),
      overrides: { failFast: true },
    });
    const [bad] = await Promise.all([run.host.launched("a-bad"), run.host.launched("b-slow")]);
    // Released in id order: the third waits for a slot.
    await run.running("b-slow");
    bad.exit(1);
    const report = run.report(await done);
    expect(run.host.of("c-queued")).toHaveLength(0);
    expect(report.tasks.find((t) => t.id === "c-queued")).toMatchObject({
      status: "skipped",
      reason: "cancelled",
      detail: "the run stopped before it started",
    });
    expect(report.summary.failed_tasks).toEqual(["a-bad"]);
  });
});

describe("cancel and resume", () => {
  it("a cancel recorded while the driver was down stops the resumed run at once (exit 130)", async () => {
    run = new MiddleRun([{ id: "orphan" }]);
    const runDir = await run.detachedAt("orphan");
    // What `termorch cancel` leaves for a run that is not live: its file in the private folder.
    const privateDir = join(runDir, ".termorch", "middle");
    mkdirSync(privateDir, { recursive: true });
    writeFileSync(join(privateDir, "cancel"), "");
    const report = run.report(await resumeRun({ runDir, ...run.options() }));
    expect(report.exit_code).toBe(130);
    expect(report.tasks[0]).toMatchObject({ status: "failed", reason: "cancelled" });
    // It was ended, not launched again.
    expect(run.host.of("orphan")).toHaveLength(1);
    expect(run.host.of("orphan")[0]!.stops).toHaveLength(1);
    expect(run.events(runDir).find((e) => e.type === "run.cancel_requested")?.data).toEqual({
      by: "cancel file",
    });
  });

  it("refuses to resume when the assignments file changed since the run started, and starts nothing", async () => {
    run = new MiddleRun([{ id: "A" }]);
    const runDir = await run.detachedAt("A");
    const a = JSON.parse(readFileSync(run.file, "utf8"));
    a.tasks.push({ ...a.tasks[0], id: "Z" });
    writeFileSync(run.file, JSON.stringify(a));
    const resumed = resumeRun({ runDir, ...run.options() });
    await expect(resumed).rejects.toBeInstanceOf(InputError);
    await expect(resumed).rejects.toThrow(/changed since run middle started/);
    expect(ids(run.host.attempts)).toEqual(["A"]);
    expect(run.state(runDir).phase).toBe("running");
  });
});
