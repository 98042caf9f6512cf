import { existsSync, mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { opsWorld, stateOf, waitForStatus } from "../fixtures/ops-helpers.js";
import { readReport, STEP, uniqueSocket, waitFor, writeAssignments } from "./harness.js";

const world = opsWorld(uniqueSocket("ops-cancel"));
afterAll(() => world.teardown());

describe("termorch cancel", () => {
  it("cancels a live one-shot run: its report is written and the run exits 130", async () => {
    const { dir } = world.workspace();
    const never = join(dir, "never");
    const file = writeAssignments(dir, [
      { id: "slow", env: { WAIT_FILE: never } },
      { id: "later", dependencies: ["slow"] },
    ]);
    const run = world.start(["run", file]);
    await waitForStatus(dir, "slow", "running");
    const runId = stateOf(dir)!.run_id;

    const cancel = await world.cli(["cancel", runId]);
    expect(cancel.stderr).toBe("");
    expect(cancel.exitCode).toBe(0);
    expect(cancel.stdout).toContain(`cancel requested for run ${runId} (driver pid ${run.pid} is live)`);
    expect(cancel.stdout).toContain(`run ${runId} stopped; exit code 130`);
    expect(cancel.stdout).toContain(`report: ${join(dir, "execution_report.json")}`);
    expect((await run).exitCode).toBe(130);
    const report = readReport(dir);
    expect(report.exit_code).toBe(130);
    expect(report.tasks.map((t) => [t.id, t.status, t.reason])).toEqual([
      ["slow", "failed", "cancelled"],
      ["later", "skipped", "cancelled"],
    ]);

    // Again: nothing left to cancel, and it says where the report is.
    const again = await world.cli(["cancel", dir]);
    expect(again.exitCode).toBe(0);
    expect(again.stdout).toContain("already finished (exit 130)");
  });

  // That a resumed run stops at once on the recorded cancel (exit 130, the task cancelled) is the
  // middle tier's (test/middle/policy.test.ts); here, what the CLI says and the file it leaves.
  it("records the cancel of an interrupted run, for its resume to take up", async () => {
    const { dir } = world.workspace();
    const never = join(dir, "never");
    const file = writeAssignments(dir, [{ id: "orphan", env: { WAIT_FILE: never } }]);
    const run = world.start(["run", file]);
    await waitForStatus(dir, "orphan", "running");
    const runId = stateOf(dir)!.run_id;
    run.kill("SIGKILL");
    await run;

    const cancel = await world.cli(["cancel", runId]);
    expect(cancel.exitCode).toBe(1);
    expect(cancel.stdout).toContain("the run is not live");
    expect(cancel.stdout).toContain(`termorch resume ${dir}`);
    expect(existsSync(join(dir, ".termorch", runId, "cancel"))).toBe(true);
  });

  it("cancels a daemon's run the same way: the daemon writes its report and answer, and goes on", async () => {
    const home = mkdtempSync(join(tmpdir(), "termorch-ops-home-"));
    try {
      const daemon = world.start(["daemon", "--home", home]);
      await waitFor(() => existsSync(join(home, "inbox")), 30_000, "the daemon's inbox");
      const { repo, dir } = world.workspace();
      const body = {
        run_id: "dcancel",
        tasks: [
          {
            id: "slow",
            agent: "step",
            context_path: "ctx/task.md",
            command: ["bash", STEP],
            env: { WAIT_FILE: join(dir, "never") },
          },
        ],
        environment: { workspace_dir: repo },
      };
      // A producer writes then renames, so the daemon never sees a partial file.
      writeFileSync(join(home, "inbox", ".dcancel.json.tmp"), JSON.stringify(body));
      renameSync(join(home, "inbox", ".dcancel.json.tmp"), join(home, "inbox", "dcancel.json"));
      const runDir = join(home, "runs", "dcancel");
      await waitForStatus(runDir, "slow", "running");
      expect(stateOf(runDir)!.pid).toBe(daemon.pid);

      const cancel = await world.cli(["cancel", "dcancel"]);
      expect(cancel.exitCode).toBe(0);
      expect(cancel.stdout).toContain("run dcancel stopped; exit code 130");
      // The daemon answers in its outbox once the report is written.
      const outbox = join(home, "outbox", "dcancel.json");
      await waitFor(() => existsSync(outbox), 30_000, "the daemon's answer");
      const answer = JSON.parse(readFileSync(outbox, "utf8"));
      expect(answer.exit_code).toBe(130);
      expect(answer.tasks[0]).toMatchObject({ status: "failed", reason: "cancelled" });
      // Cancelling one run does not stop the daemon.
      expect(daemon.exitCode).toBeNull();
      daemon.kill("SIGTERM");
      await daemon;
    } finally {
      rmSync(home, { recursive: true, force: true });
    }
  });

  it("names an unknown run clearly (exit 2)", async () => {
    const r = await world.cli(["cancel", "no-such-run"]);
    expect(r.exitCode).toBe(2);
    expect(r.stderr).toContain('no run "no-such-run"');
    expect(r.stderr).toContain("termorch status");
    const dir = world.workspace().dir;
    writeFileSync(join(dir, "x"), "");
    const notRun = await world.cli(["cancel", dir]);
    expect(notRun.exitCode).toBe(2);
    expect(notRun.stderr).toContain("has no state.json");
  });
});
