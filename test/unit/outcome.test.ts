import { describe, expect, it } from "vitest";
import type { ExitRecord } from "../../src/runner/task-runner.js";
import { classifyExit, coreGate } from "../../src/task/outcome.js";

const record = (r: Partial<ExitRecord>): ExitRecord => ({
  exit_code: 0,
  signal: null,
  started_at: null,
  finished_at: "2026-11-22T00:00:00.000Z",
  pid: 10,
  stdout_bytes: 0,
  stderr_bytes: 0,
  truncated: false,
  launch_failed: false,
  lost: false,
  ...r,
});
const self = { timeoutS: null, stopped: false };

describe("an attempt's end", () => {
  it("is termorch's doing first: a timed-out agent that died of its TERM timed out, a stopped one was cancelled", () => {
    const killed = record({ exit_code: null, signal: "SIGTERM" });
    expect(classifyExit(killed, { timeoutS: 30, stopped: true }).reason).toBe("timeout");
    expect(classifyExit(killed, { timeoutS: null, stopped: true }).reason).toBe("cancelled");
    expect(classifyExit(killed, self)).toEqual({ reason: "signal", detail: "killed by SIGTERM" });
  });

  it("then the record: launch failure, lost, signal, exit code, in that order", () => {
    expect(
      classifyExit(record({ exit_code: 127, launch_failed: true, detail: "x: not found" }), self),
    ).toEqual({
      reason: "launch_error",
      detail: "its command could not be started (exit 127): x: not found",
    });
    expect(classifyExit(record({ exit_code: null, signal: "SIGHUP", lost: true }), self).reason).toBe("lost");
    expect(classifyExit(record({ exit_code: 127 }), self).detail).toBe(
      "exited with code 127 (command not found?)",
    );
    expect(classifyExit(record({ exit_code: 2 }), self)).toEqual({
      reason: "exit_code",
      detail: "exited with code 2",
    });
    expect(classifyExit(record({}), self)).toEqual({ reason: null, detail: null });
  });

  it("names the core gate's failure", () => {
    expect(coreGate(null, "launch_error")).toMatchObject({ passed: false, detail: "never started" });
    expect(coreGate(record({ exit_code: null, signal: "SIGKILL" }), "timeout").detail).toBe("timed out");
    expect(coreGate(record({ exit_code: 0 }), null)).toEqual({
      name: "core",
      required: true,
      passed: true,
      detail: "exit code 0",
    });
  });
});
