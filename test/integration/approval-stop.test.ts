// Approval and stops through the CLI (issue 38), with real tmux, git and processes:
// - a driver SIGKILLed while a task waits for a person's approval: `termorch approve` while no
//   driver runs, then `termorch resume` takes the decision and merges, running the agent once;
// - `termorch stop --at-boundary` during wave 2 of 3: the running task finishes, nothing new
//   starts, exit 5 with a handoff that validates against its schema; `termorch resume` finishes
//   the run, no task run twice.
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { SessionHandoff } from "../../src/contract/session-handoff.js";
import { git, lines, readReport, termorch, testFile, waitFor, writeAssignments } from "./harness.js";

const { socket, workspace } = testFile("approval-stop");

const ledger = (dir: string): { type: string; task_id?: string; data: Record<string, unknown> }[] =>
  readFileSync(join(dir, "events.jsonl"), "utf8")
    .split("\n")
    .filter(Boolean)
    .map((l) => JSON.parse(l));

describe("a driver killed while a task waits for approval", () => {
  it("takes an approval given while no driver ran at resume, and merges once", async () => {
    const { dir, repo } = workspace({ git: true });
    const counter = join(dir, "starts");
    const file = writeAssignments(dir, [
      { id: "T", approval: "result", env: { COUNTER: counter, WRITE: "t.txt=t" } },
    ]);
    const first = await termorch(["run", file], {
      socket,
      env: { TERMORCH_FAULT: "kill-while-waiting-approval:T" },
    });
    expect(first.exitCode).toBe(-1); // SIGKILLed by the fault
    const status = await termorch(["status", dir], { socket });
    expect(status.stdout).toContain("T: waiting for a person to approve attempt 1's result");

    const approved = await termorch(["approve", dir, "T"], { socket });
    expect(approved.exitCode, approved.stderr).toBe(0);
    expect(approved.stdout).toContain("is not live");
    // Nothing else waits: a second answer is refused, and so is a task that does not wait.
    expect((await termorch(["reject", dir], { socket })).exitCode).toBe(2);

    const resumed = await termorch(["resume", dir], { socket });
    expect(resumed.exitCode, resumed.stderr).toBe(0);
    const report = readReport(dir);
    expect(report.tasks[0]).toMatchObject({ status: "success", attempts: 1 });
    expect(report.merge.result).toBe("success");
    expect(readFileSync(join(repo, "t.txt"), "utf8")).toBe("t\n");
    expect(lines(counter)).toEqual(["T"]);
    const decided = ledger(dir).filter((e) => e.type === "task.approval_decided");
    expect(decided).toHaveLength(1);
    expect(decided[0]!.data).toMatchObject({ decision: "approve", at: "result", attempt: 1 });
    expect(typeof decided[0]!.data.by).toBe("string");
  }, 90_000);
});

describe("termorch stop --at-boundary", () => {
  it("during wave 2 of 3: the running task finishes, exit 5 with a valid handoff; resume finishes, none run twice", async () => {
    const { dir, repo } = workspace({ git: true });
    const counter = join(dir, "starts");
    const gate = join(dir, "go");
    const file = writeAssignments(dir, [
      { id: "A", env: { COUNTER: counter, WRITE: "a.txt=a" } },
      { id: "B", dependencies: ["A"], env: { COUNTER: counter, WAIT_FILE: gate, WRITE: "b.txt=b" } },
      { id: "C", dependencies: ["B"], env: { COUNTER: counter, WRITE: "c.txt=c" } },
    ]);
    const running = termorch(["run", file], { socket });
    await waitFor(() => existsSync(join(dir, "status", "B.running")), 30_000, "B running");
    const stop = await termorch(["stop", dir, "--at-boundary"], { socket });
    expect(stop.exitCode, stop.stderr).toBe(0);
    await waitFor(() => ledger(dir).some((e) => e.type === "run.stop_requested"), 20_000, "the stop heard");
    writeFileSync(gate, "");
    const stopped = await running;
    expect(stopped.exitCode, stopped.stderr).toBe(5);
    const report = readReport(dir);
    expect(report.stopped).toEqual({ reason: "wave_complete", handoff: "handoff.json" });
    expect(report.tasks.map((t) => [t.id, t.status])).toEqual([
      ["A", "success"],
      ["B", "success"],
      ["C", "skipped"],
    ]);
    expect(existsSync(join(repo, "a.txt"))).toBe(false); // nothing merged
    const handoff = SessionHandoff.parse(JSON.parse(readFileSync(join(dir, "handoff.json"), "utf8")));
    expect(handoff).toMatchObject({
      stop_reason: "wave_complete",
      progress: { completed_tasks: ["A", "B"], current_wave: 3, total_waves: 3, waves_remaining: 1 },
      resume: { command: `termorch resume ${dir}`, next_tasks: ["C"] },
    });
    // The schema the CLI prints is the one it validates against.
    const schema = await termorch(["schema", "session-handoff"], { socket });
    expect(JSON.parse(schema.stdout).required).toEqual(
      expect.arrayContaining(["stop_reason", "progress", "resume"]),
    );

    const resumed = await termorch(["resume", dir], { socket });
    expect(resumed.exitCode, resumed.stderr).toBe(0);
    expect(readReport(dir).merge.result).toBe("success");
    expect(["a.txt", "b.txt", "c.txt"].map((f) => existsSync(join(repo, f)))).toEqual([true, true, true]);
    expect(lines(counter).sort()).toEqual(["A", "B", "C"]);
    expect(git(repo, "log", "--oneline").split("\n").filter(Boolean).length).toBeGreaterThan(1);
  }, 120_000);

  it("refuses a resume when a finished task's branch moved behind its back (CONT-004), running nothing", async () => {
    const { dir, repo } = workspace({ git: true });
    const gate = join(dir, "go");
    const counter = join(dir, "starts");
    const file = writeAssignments(dir, [
      { id: "A", env: { WAIT_FILE: gate, WRITE: "a.txt=a" } },
      { id: "B", dependencies: ["A"], env: { COUNTER: counter } },
    ]);
    const running = termorch(["run", file], { socket });
    await waitFor(() => existsSync(join(dir, "status", "A.running")), 30_000, "A running");
    await termorch(["stop", dir, "--at-boundary"], { socket });
    await waitFor(() => ledger(dir).some((e) => e.type === "run.stop_requested"), 20_000, "the stop heard");
    writeFileSync(gate, "");
    expect((await running).exitCode).toBe(5);
    const branch = readReport(dir).tasks[0]!.branch!;
    git(repo, "branch", "-f", branch, `${branch}~1`);
    const resumed = await termorch(["resume", dir], { socket });
    expect(resumed.exitCode).toBe(2);
    expect(resumed.stderr).toContain(`task A's branch ${branch} moved to`);
    expect(lines(counter)).toEqual([]);
  }, 90_000);
});

describe("approval with workers", () => {
  it('refuses a task\'s approval "result" with backend bullmq, before anything starts (exit 2)', async () => {
    const { dir, repo } = workspace({ git: true });
    const config = join(dir, "config.json");
    writeFileSync(config, JSON.stringify({ backend: "bullmq", redis: "redis://127.0.0.1:1" }));
    const file = writeAssignments(dir, [{ id: "T", approval: "result" }]);
    for (const command of ["validate", "run"]) {
      const r = await termorch([command, file, "--config", config], { socket });
      expect(r.exitCode).toBe(2);
      expect(r.stderr).toContain('approval "result" is not supported with backend bullmq yet');
    }
    expect(existsSync(join(dir, "state.json"))).toBe(false);
    expect(git(repo, "branch", "--list", "termorch/*")).toBe("");
  });
});

describe("a stop at the boundary while a task waits for approval", () => {
  it("leaves the wait for the resume: approved while stopped, the resume takes it, merges, the agent ran once", async () => {
    const { dir, repo } = workspace({ git: true });
    const counter = join(dir, "starts");
    const file = writeAssignments(dir, [
      { id: "T", approval: "result", env: { COUNTER: counter, WRITE: "t.txt=t" } },
    ]);
    const running = termorch(["run", file], { socket });
    await waitFor(
      () =>
        existsSync(join(dir, "events.jsonl")) && ledger(dir).some((e) => e.type === "task.waiting_approval"),
      30_000,
      "T waiting for approval",
    );
    expect((await termorch(["stop", dir, "--at-boundary"], { socket })).exitCode).toBe(0);
    const stopped = await running;
    expect(stopped.exitCode, stopped.stderr).toBe(5);
    const handoff = SessionHandoff.parse(JSON.parse(readFileSync(join(dir, "handoff.json"), "utf8")));
    expect(handoff.resume.blockers.join("\n")).toContain(
      "T: waiting for a person to approve attempt 1's result",
    );
    // Still waiting: it is answered while no driver runs, and `clean` leaves the stopped run alone.
    expect((await termorch(["approve", dir, "T"], { socket })).exitCode).toBe(0);
    const clean = await termorch(["clean", dir], { socket });
    expect(clean.stdout + clean.stderr).toContain("stopped at its wave boundary");
    const resumed = await termorch(["resume", dir], { socket });
    expect(resumed.exitCode, resumed.stderr).toBe(0);
    expect(readReport(dir).tasks[0]).toMatchObject({ status: "success", attempts: 1 });
    expect(readFileSync(join(repo, "t.txt"), "utf8")).toBe("t\n");
    expect(lines(counter)).toEqual(["T"]);
  }, 90_000);
});
