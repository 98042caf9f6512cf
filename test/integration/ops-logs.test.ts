import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { execa } from "execa";
import { afterAll, describe, expect, it } from "vitest";
import { editAssignments, logText, opsWorld, waitForStatus } from "../fixtures/ops-helpers.js";
import { BIN, ROOT, uniqueSocket, waitFor, writeAssignments } from "./harness.js";

const world = opsWorld(uniqueSocket("ops-logs"));
afterAll(() => world.teardown());

describe("termorch logs", () => {
  it("prints a finished task's stdout and stderr logs", async () => {
    const { dir } = world.workspace();
    const file = writeAssignments(dir, [{ id: "P", env: { SAY: "out line", WARN: "err line", LINES: "3" } }]);
    expect((await world.cli(["run", file])).exitCode).toBe(0);
    const out = await world.cli(["logs", "P", "--run", dir]);
    expect(out.exitCode).toBe(0);
    // (execa strips the final newline)
    expect(out.stdout).toBe("out line\nout line\nout line");
    const err = await world.cli(["logs", "P", "--run", dir, "--err"]);
    expect(err.exitCode).toBe(0);
    expect(err.stdout).toBe("err line");
    // Without --run: the newest registered run that has the task, named on stderr.
    const implicit = await world.cli(["logs", "P"]);
    expect(implicit.stdout).toBe(out.stdout);
    expect(implicit.stderr).toContain(dir);
    const unknown = await world.cli(["logs", "nope"]);
    expect(unknown.exitCode).toBe(2);
    expect(unknown.stderr).toContain("no task nope in any registered run");
  });

  it("--follow prints what is written after it started and exits when the task finishes", async () => {
    const { dir } = world.workspace();
    const gate = join(dir, "go");
    const file = writeAssignments(dir, [{ id: "F", env: { GATE: gate } }]);
    const runId = editAssignments(file, (a) => {
      a.tasks[0]!.command = [
        "bash",
        "-c",
        'echo before; while [ ! -e "$GATE" ]; do sleep 0.05; done; echo after-1; echo after-2; exit 4',
      ];
    });
    const run = world.start(["run", file]);
    await waitForStatus(dir, "F", "running");
    await waitFor(() => logText(dir, "F").includes("before"), 20_000, "the first line");

    const follow = execa(process.execPath, [BIN, "logs", "F", "--run", runId, "--follow"], {
      reject: false,
      cwd: ROOT,
      env: world.env,
      stdin: "ignore",
    });
    let printed = "";
    follow.stdout.on("data", (d: Buffer) => {
      printed += d.toString();
    });
    await waitFor(() => printed.includes("before"), 20_000, "follow to print what was there");
    expect(printed).not.toContain("after");
    writeFileSync(gate, "");
    const done = await follow;
    expect(done.exitCode).toBe(0);
    expect(printed).toBe("before\nafter-1\nafter-2\n");
    // It ended because the task did: the task's status is final.
    expect((await run).exitCode).toBe(1);
    expect(logText(dir, "F")).toBe(printed);
  });

  it("--follow moves on to a retry's new log", async () => {
    const { dir } = world.workspace();
    const gate = join(dir, "go");
    const mark = join(dir, "tried");
    const file = writeAssignments(dir, [{ id: "R", retries: 1, env: { GATE: gate, MARK: mark } }]);
    const runId = editAssignments(file, (a) => {
      a.tasks[0]!.command = [
        "bash",
        "-c",
        'if [ -e "$MARK" ]; then echo second; exit 0; fi; touch "$MARK"; echo first; while [ ! -e "$GATE" ]; do sleep 0.05; done; exit 1',
      ];
    });
    const run = world.start(["run", file]);
    await waitFor(() => logText(dir, "R").includes("first"), 30_000, "the first attempt's line");
    const follow = execa(process.execPath, [BIN, "logs", "R", "--run", runId, "--follow"], {
      reject: false,
      cwd: ROOT,
      env: world.env,
      stdin: "ignore",
    });
    let printed = "";
    follow.stdout.on("data", (d: Buffer) => {
      printed += d.toString();
    });
    await waitFor(() => printed.includes("first"), 20_000, "follow to print the first attempt");
    writeFileSync(gate, "");
    const done = await follow;
    expect(done.exitCode).toBe(0);
    expect(printed).toBe("first\nsecond\n");
    expect(done.stderr).toContain("attempt 2 of R writes a new log");
    expect((await run).exitCode).toBe(0);
  });
});
