import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import {
  killedAfterFile,
  readReport,
  running,
  termorch,
  testFile,
  waitFor,
  writeAssignments,
} from "./harness.js";

const { socket, workspace } = testFile("gate-leftovers");

/** Processes the gates start; any still running when the file ends are killed. */
const started = killedAfterFile();

/**
 * A tests_cmd that leaves a process in a session of its own (setsid: out of the gate's process
 * group), records its pid, and passes.
 */
const leaving = (pidFile: string): string =>
  [
    `setsid sh -c 'echo $$ > "$0.tmp" && mv "$0.tmp" "$0"; exec sleep 1007' ${pidFile} >/dev/null 2>&1 &`,
    `while [ ! -s ${pidFile} ]; do sleep 0.01; done`,
    "exit 0",
  ].join("\n");

describe("a process a tests_cmd started in a session of its own", () => {
  it("ends with the gate, for a task's gate and for the run's", async () => {
    const { dir } = workspace();
    const taskPid = join(dir, "task-gate.pid");
    const runPid = join(dir, "run-gate.pid");
    const file = writeAssignments(dir, [{ id: "A", success_criteria: { tests_cmd: leaving(taskPid) } }], {
      success_criteria: { tests_cmd: leaving(runPid) },
    });
    const result = await termorch(["run", file], { socket });
    const pids = [taskPid, runPid].map((f) => Number(readFileSync(f, "utf8").trim()));
    started.push(...pids);
    expect(result.exitCode, result.stderr).toBe(0);
    expect(readReport(dir).tasks[0]!.status).toBe("success");
    // The watchdog reports the gate's status only once they are ended; KILLed ones may take a moment.
    await waitFor(() => pids.every((p) => !running(p)), 10_000, `the gates' leftovers (${pids}) to end`);
  });
});
