// Stop at a wave boundary (issue 38): `termorch stop --at-boundary` lets running tasks finish,
// starts nothing new, merges nothing, and ends the run with a session handoff (handoff.json, in
// the seed's shape) and exit 5; `termorch resume` goes on with the tasks not done and runs none
// twice. An approval's timeout with on_timeout "stop" stops the same way (hitl_gate). The real
// pipeline with the fake runner and fake timers.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it, vi } from "vitest";
import { SessionHandoff } from "../../src/contract/session-handoff.js";
import { decide } from "../../src/ops/approval.js";
import { requestStop } from "../../src/ops/stop.js";
import { resumeRun, runAssignments } from "../../src/run/runner.js";
import { MiddleRun, middleTier } from "./harness.js";

let run: MiddleRun;

middleTier(() => run);

const handoffOf = (): SessionHandoff =>
  SessionHandoff.parse(JSON.parse(readFileSync(join(run.dir, "handoff.json"), "utf8")));

describe("stop at a wave boundary", () => {
  it("during wave 2 of 3: running tasks finish, nothing new starts, exit 5 with a handoff; resume runs the rest, none twice", async () => {
    run = new MiddleRun([
      { id: "a" },
      { id: "b", dependencies: ["a"] },
      { id: "d", dependencies: ["a"] },
      { id: "c", dependencies: ["b"] },
    ]);
    const done = runAssignments({ assignmentsFile: run.file, ...run.options() });
    (await run.host.launched("a")).exit(0);
    const b = await run.host.launched("b");
    const d = await run.host.launched("d");
    await requestStop(run.dir, "tester", { env: run.options().env!, cwd: run.dir, now: Date.now() });
    // The driver hears the file (bounded): nothing of what runs is ended.
    await vi.waitFor(() => expect(run.events().some((e) => e.type === "run.stop_requested")).toBe(true), {
      timeout: 4_000,
      interval: 20,
    });
    expect(b.stops).toEqual([]);
    b.exit(0);
    d.exit(0);
    const stopped = run.report(await done);
    expect(stopped.exit_code).toBe(5);
    expect(stopped.stopped).toEqual({ reason: "wave_complete", handoff: "handoff.json" });
    expect(stopped.merge.result).toBe("skipped");
    expect(stopped.merge.reason).toContain("stopped at a wave boundary");
    expect(stopped.tasks.map((t) => [t.id, t.status])).toEqual([
      ["a", "success"],
      ["b", "success"],
      ["d", "success"],
      ["c", "skipped"],
    ]);
    expect(run.host.of("c")).toHaveLength(0);
    expect(stopped.tasks[3]!.detail).toBe(
      "not started: the run stopped at its wave boundary; termorch resume starts it",
    );
    const handoff = handoffOf();
    expect(handoff).toMatchObject({
      type: "session_handoff",
      session_id: "middle",
      stop_reason: "wave_complete",
      progress: { completed_tasks: ["a", "b", "d"], current_wave: 3, total_waves: 3, waves_remaining: 1 },
      resume: { command: `termorch resume ${run.dir}`, next_tasks: ["c"], blockers: [] },
    });
    expect(run.events().find((e) => e.type === "run.handoff")?.data).toMatchObject({
      stop_reason: "wave_complete",
      next_tasks: ["c"],
    });

    const resumed = resumeRun({ runDir: run.dir, ...run.options() });
    (await run.host.launched("c")).exit(0);
    const report = run.report(await resumed);
    expect(report.exit_code).toBe(0);
    expect(report.stopped).toBeNull();
    expect(report.tasks.every((t) => t.status === "success")).toBe(true);
    expect(["a", "b", "c", "d"].map((id) => run.host.of(id).length)).toEqual([1, 1, 1, 1]);
    expect(handoffOf()).toMatchObject({
      stop_reason: "scope_complete",
      resume: { command: null, next_tasks: [] },
    });
  });

  it("a resume refuses a stopped run whose handoff and state disagree, running nothing", async () => {
    run = new MiddleRun([{ id: "a" }, { id: "b", dependencies: ["a"] }]);
    const done = runAssignments({ assignmentsFile: run.file, ...run.options() });
    const a = await run.host.launched("a");
    await requestStop(run.dir, "tester", { env: run.options().env!, cwd: run.dir, now: Date.now() });
    await vi.waitFor(() => expect(run.events().some((e) => e.type === "run.stop_requested")).toBe(true), {
      timeout: 4_000,
      interval: 20,
    });
    a.exit(0);
    expect(run.report(await done).exit_code).toBe(5);
    // Someone edited what the run checked (CONT-002): it is named, not assumed away.
    const file = join(run.dir, "handoff.json");
    const h = JSON.parse(readFileSync(file, "utf8"));
    h.progress.completed_tasks = [];
    const { writeFileSync } = await import("node:fs");
    writeFileSync(file, JSON.stringify(h));
    await expect(resumeRun({ runDir: run.dir, ...run.options() })).rejects.toMatchObject({
      problems: [{ message: expect.stringContaining("its state says a is done, its handoff does not") }],
    });
    expect(run.host.of("b")).toHaveLength(0);
  });

  it("an approval's timeout with on_timeout stop stops the run at its boundary (hitl_gate); a decision and a resume go on", async () => {
    run = new MiddleRun([
      { id: "a", approval: { at: "result", timeout_s: 30, on_timeout: "stop" } },
      { id: "b" },
    ]);
    run.host.onLaunch = (x) => x.exit(0);
    const done = runAssignments({ assignmentsFile: run.file, ...run.options() });
    await run.when(
      (tasks) => Boolean(tasks.get("a")?.waiting.approval) && tasks.get("b")?.state === "success",
    );
    await vi.advanceTimersByTimeAsync(30_000);
    const stopped = run.report(await done);
    expect(stopped.exit_code).toBe(5);
    expect(stopped.stopped?.reason).toBe("hitl_gate");
    const handoff = handoffOf();
    expect(handoff.stop_reason).toBe("hitl_gate");
    expect(handoff.resume.blockers.join("\n")).toContain(
      "a: waiting for a person to approve attempt 1's result",
    );
    await decide(
      run.dir,
      "a",
      { decision: "approve", reason: null, by: "tester" },
      { env: run.options().env!, cwd: run.dir, now: Date.now() },
    );
    const resumed = resumeRun({ runDir: run.dir, ...run.options() });
    await vi.advanceTimersByTimeAsync(500);
    const report = run.report(await resumed);
    expect(report.exit_code).toBe(0);
    expect(run.host.of("a")).toHaveLength(1);
  });
});
