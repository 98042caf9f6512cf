import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import type { RunState } from "../../src/contract/state.js";
import { statusView } from "../../src/ops/status.js";
import { runStateFixture } from "../fixtures/run-state.js";

const dir = mkdtempSync(join(tmpdir(), "termorch-settled-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** A pid no process has: the kernel's default pid_max is far below it. */
const DEAD_PID = 2 ** 22 + 12345;

function state(runDir: string, phase: RunState["phase"]): RunState {
  return runStateFixture(runDir, {
    phase,
    pid: DEAD_PID,
    report: phase === "reported" ? join(runDir, "execution_report.json") : null,
    exit_code: phase === "reported" ? 0 : null,
  });
}

describe("status views of a run whose driver just exited", () => {
  it("read its state again before calling it interrupted: a driver that reported in between is not", async () => {
    const runDir = mkdtempSync(join(dir, "run-"));
    // What the view read first (running), and what the driver wrote before it exited (reported).
    const first = state(runDir, "running");
    writeFileSync(join(runDir, "state.json"), JSON.stringify(state(runDir, "reported")));
    const run = { runId: "r1", runDir, state: first, entry: null, problem: null, siblingRepo: null };
    const view = await statusView([run], () => new Map(), Date.now());
    expect(view.runs[0]).toMatchObject({ phase: "reported", exit_code: 0 });
  });

  it("still calls a run interrupted when its state says running and its driver is gone", async () => {
    const runDir = mkdtempSync(join(dir, "run-"));
    writeFileSync(join(runDir, "state.json"), JSON.stringify(state(runDir, "running")));
    const run = {
      runId: "r1",
      runDir,
      state: state(runDir, "running"),
      entry: null,
      problem: null,
      siblingRepo: null,
    };
    const view = await statusView([run], () => new Map(), Date.now());
    expect(view.runs[0]!.phase).toBe("interrupted");
  });
});
