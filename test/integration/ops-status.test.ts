import { existsSync, mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { StatusView } from "../../src/contract/status-view.js";
import { logText, opsWorld, stateOf, waitForStatus } from "../fixtures/ops-helpers.js";
import { isAlive, uniqueSocket, waitFor, writeAssignments } from "./harness.js";

const world = opsWorld(uniqueSocket("ops-status"));
afterAll(() => world.teardown());

async function statusJson(args: string[] = []): Promise<StatusView> {
  const r = await world.cli(["status", ...args, "--json"]);
  expect(r.stderr).toBe("");
  expect(r.exitCode).toBe(0);
  // The schema is strict: an unknown or missing key fails here, so the shape is pinned.
  return StatusView.parse(JSON.parse(r.stdout));
}

describe("termorch status", () => {
  it("shows a finished run: states, reasons, durations, last log lines, the kept session", async () => {
    const { dir } = world.workspace();
    const out = join(dir, "home", "runs", "first");
    mkdirSync(out, { recursive: true });
    const file = writeAssignments(dir, [
      { id: "A", env: { SAY: "hello from A" } },
      { id: "B", env: { SAY: "last words of B", EXIT: "3" } },
      { id: "C", dependencies: ["B"] },
    ]);
    const run = await world.cli(["run", file, "--out", out]);
    expect(run.exitCode).toBe(1);
    const runId = stateOf(out)!.run_id;

    const view = await statusJson([out]);
    expect(view.schema_version).toBe(1);
    expect(view.problems).toEqual([]);
    expect(view.runs).toHaveLength(1);
    const r = view.runs[0]!;
    expect(r).toMatchObject({
      run_id: runId,
      run_dir: out,
      phase: "reported",
      exit_code: 1,
      report: join(out, "execution_report.json"),
      socket: world.socket,
      hint: null,
      driver_alive: false,
    });
    const [a, b, c] = r.tasks;
    expect(a).toMatchObject({
      id: "A",
      state: "success",
      reason: null,
      attempts: 1,
      exit_code: 0,
      elapsed_ms: null,
      last_line: "hello from A",
      session_exists: false,
      attach: null,
    });
    expect(a!.duration_ms).toBeGreaterThanOrEqual(0);
    expect(a!.logs!.stdout.startsWith(join(out, "logs"))).toBe(true);
    const session = `termorch-${runId}-B`;
    expect(b).toMatchObject({
      id: "B",
      state: "failed",
      reason: "exit_code",
      exit_code: 3,
      attempts: 1,
      last_line: "last words of B",
      session,
      session_exists: true,
      session_live: false,
      attach: {
        termorch: `termorch attach B --run ${runId}`,
        tmux: `tmux -L ${world.socket} attach -t =${session}`,
      },
    });
    expect(c).toMatchObject({
      id: "C",
      state: "skipped",
      reason: "dependency_failed",
      attempts: 0,
      logs: null,
      last_line: null,
      session_exists: false,
    });

    // The same run through the registry (by id, and listed with the others) and through a daemon home.
    expect((await statusJson([runId])).runs[0]!.run_id).toBe(runId);
    expect((await statusJson()).runs.map((x) => x.run_id)).toContain(runId);
    expect((await statusJson(["--home", join(dir, "home")])).runs.map((x) => x.run_id)).toEqual([runId]);

    const human = await world.cli(["status", runId]);
    expect(human.exitCode).toBe(0);
    expect(human.stdout).toContain(`run ${runId}: reported (exit 1)`);
    expect(human.stdout).toMatch(/B\s+failed\s+exit_code\s+1\s+\S+\s+last words of B/);
    expect(human.stdout).toContain(`tmux -L ${world.socket} attach -t =${session}`);
  });

  it("shows a live run: the running task, its elapsed time, last log line and how to attach", async () => {
    const { dir } = world.workspace();
    const gate = join(dir, "go");
    const file = writeAssignments(dir, [{ id: "L", env: { SAY: "working on it", WAIT_FILE: gate } }]);
    const run = world.start(["run", file]);
    await waitForStatus(dir, "L", "running");
    await waitFor(() => logText(dir, "L").includes("working on it"), 20_000, "L's log line");
    const runId = stateOf(dir)!.run_id;

    const r = (await statusJson([dir])).runs[0]!;
    expect(r).toMatchObject({ run_id: runId, phase: "running", driver_alive: true, pid: run.pid });
    expect(r.hint).toContain(`termorch cancel ${runId}`);
    const l = r.tasks[0]!;
    expect(l).toMatchObject({
      id: "L",
      state: "running",
      attempts: 1,
      duration_ms: null,
      last_line: "working on it",
      session_exists: true,
      session_live: true,
      attach: {
        termorch: `termorch attach L --run ${runId}`,
        tmux: `tmux -L ${world.socket} attach -t =termorch-${runId}-L`,
      },
    });
    expect(l.elapsed_ms).toBeGreaterThanOrEqual(0);

    writeFileSync(gate, "");
    expect((await run).exitCode).toBe(0);
    expect((await statusJson([dir])).runs[0]!.phase).toBe("reported");
  });

  it("shows a run whose driver was killed as interrupted, with the resume command", async () => {
    const { dir } = world.workspace();
    const gate = join(dir, "go");
    const file = writeAssignments(dir, [{ id: "I", env: { SAY: "still here", WAIT_FILE: gate } }]);
    const run = world.start(["run", file]);
    await waitForStatus(dir, "I", "running");
    const runId = stateOf(dir)!.run_id;
    run.kill("SIGKILL");
    await run;
    await waitFor(() => !isAlive(run.pid!), 10_000, "the driver to die");

    const r = (await statusJson([dir])).runs[0]!;
    expect(r).toMatchObject({ run_id: runId, phase: "interrupted", driver_alive: false });
    expect(r.hint).toContain(`termorch resume ${dir}`);
    // The agent outlives its driver: its session is still there to attach to.
    expect(r.tasks[0]).toMatchObject({ id: "I", state: "running", session_live: true });
    const human = await world.cli(["status", runId]);
    expect(human.stdout).toContain(`run ${runId}: interrupted`);
    expect(human.stdout).toContain(`termorch resume ${dir}`);

    // Finish it, so nothing is left running.
    writeFileSync(gate, "");
    expect((await world.cli(["resume", dir])).exitCode).toBe(0);
    expect((await statusJson([dir])).runs[0]!.phase).toBe("reported");
  });

  it("explains an unknown run and conflicting arguments (exit 2)", async () => {
    const unknown = await world.cli(["status", "no-such-run"]);
    expect(unknown.exitCode).toBe(2);
    expect(unknown.stderr).toContain('no run "no-such-run"');
    const both = await world.cli(["status", "x", "--home", "y"]);
    expect(both.exitCode).toBe(2);
    expect(both.stderr).toContain("either a run or --home");
    expect(existsSync(world.registry)).toBe(true);
  });
});
