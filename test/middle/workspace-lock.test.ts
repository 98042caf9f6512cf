// The workspace lock's decisions, driven through runAssignments with the fake runner: a lock file
// that holds nothing (damaged, or left empty by a process killed while taking it) is taken over; a
// live run's lock refuses a second run at once (exit 4, naming the holder), or holds it until the
// first ends when it waits. These used to take real runs (test/integration/damaged-lock,
// empty-lock, lifecycle); empty-lock keeps the worktree pool's lock, which needs git.
import { existsSync, mkdirSync, readFileSync, utimesSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it, vi } from "vitest";
import { LockedError } from "../../src/errors.js";
import { lockPath } from "../../src/fs/names.js";
import { runAssignments } from "../../src/run/runner.js";
import { MiddleRun, middleTier } from "./harness.js";

let run: MiddleRun;

middleTier(() => run);

/** Writes the lock file of the run's workspace as `text`, as of a minute ago. */
function planted(text: string): void {
  const file = lockPath(join(run.dir, "ws"));
  mkdirSync(join(file, ".."), { recursive: true, mode: 0o700 });
  writeFileSync(file, text);
  const past = new Date(Date.now() - 60_000);
  utimesSync(file, past, past);
}

describe("a workspace lock that holds nothing", () => {
  for (const [what, text] of [
    // JSON, but not a holder: it names no live process.
    ["an empty object", "{}"],
    [
      "a holder whose pid is text",
      '{"pid":"12","pid_start":null,"host":"h","run_id":"x","run_dir":"/x","acquired_at":"t"}',
    ],
    ["a list", "[1,2]"],
    // Found by the crash campaign (test/reliability/crash.mjs, seed 13013, trial 46, under load):
    // a daemon SIGKILLed between creating a lock file and writing its holder into it left it
    // empty, and every later taker waited for that holder's line for ever.
    ["a file left empty by a process killed while taking it", ""],
  ] as const) {
    it(`is taken over like a stale one: ${what}`, async () => {
      run = new MiddleRun([{ id: "a" }]);
      planted(text);
      run.host.onLaunch = (attempt) => attempt.exit(0);
      const report = run.report(await runAssignments({ assignmentsFile: run.file, ...run.options() }));
      expect(report.exit_code).toBe(0);
      expect(report.summary.completed).toBe(true);
    });
  }
});

describe("a workspace a live run holds", () => {
  /** Starts a run holding the workspace with task "hold", and writes a second file on the same workspace. */
  async function holding() {
    const first = runAssignments({ assignmentsFile: run.file, ...run.options() });
    const hold = await run.host.launched("hold");
    // A second file in a folder of its own, on the same workspace.
    mkdirSync(join(run.dir, "second"));
    const second = join(run.dir, "second", "second.json");
    const doc = JSON.parse(readFileSync(run.file, "utf8"));
    writeFileSync(
      second,
      JSON.stringify({
        ...doc,
        run_id: "second",
        tasks: [{ ...doc.tasks[0], id: "other" }],
        environment: { workspace_dir: "../ws" },
      }),
    );
    return { first, hold, second };
  }

  it("refuses a second run at once (exit 4), naming the holder and writing nothing", async () => {
    run = new MiddleRun([{ id: "hold" }]);
    const { first, hold, second } = await holding();
    const locked = runAssignments({ assignmentsFile: second, ...run.options() });
    await expect(locked).rejects.toBeInstanceOf(LockedError);
    await expect(locked).rejects.toThrow(/is locked by run middle \(pid \d+ on /);
    expect(existsSync(join(run.dir, "second", "execution_report.json"))).toBe(false);
    expect(run.host.of("other")).toHaveLength(0);
    hold.exit(0);
    expect(run.report(await first).exit_code).toBe(0);
  });

  it("holds a run that waits until the holder ends, then runs it; a detach while it waits gives up, saying so", async () => {
    run = new MiddleRun([{ id: "hold" }]);
    const { first, hold, second } = await holding();
    // Waiting, it is stopped by a detach (a daemon shutting down) before it starts anything.
    const detach = new AbortController();
    detach.abort();
    const given = runAssignments({
      assignmentsFile: second,
      ...run.options({ wait: true, detach: detach.signal }),
    });
    await expect(given).rejects.toBeInstanceOf(LockedError);
    await expect(given).rejects.toThrow(/gave up waiting for the lock of workspace /);
    const order: string[] = [];
    const waiting = runAssignments({
      assignmentsFile: second,
      ...run.options({ wait: true, hooks: { onStart: () => order.push("second started") } }),
    });
    hold.exit(0);
    expect(run.report(await first).exit_code).toBe(0);
    order.push("first reported");
    // It polls the lock.
    await vi.advanceTimersByTimeAsync(1_000);
    (await run.host.launched("other")).exit(0);
    const report = run.report(await waiting);
    expect(report.exit_code).toBe(0);
    expect(order).toEqual(["first reported", "second started"]);
  });
});
