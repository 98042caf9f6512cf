// Which log a failed task's report points at (output_log), driven through runAssignments with the
// fake runner, each attempt writing its logs as the runner would: stderr when it has any, else
// stdout. This used to take a real run (test/integration/output-log-choice); the summary line that
// names it is test/integration/summary-output-log.test.ts's.
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { runAssignments } from "../../src/run/runner.js";
import type { FakeAttempt } from "./fake-runner.js";
import { MiddleRun, middleTier } from "./harness.js";

let run: MiddleRun;

middleTier(() => run);

/** What each task's agent printed before it failed: [stdout, stderr]. */
const PRINTED: Record<string, [string, string]> = {
  "stdout-only": ["it broke here\n", ""],
  both: ["progress\n", "it broke\n"],
  silent: ["", ""],
};

/** The runner creates both logs; the agent writes what it printed into them. */
function printThenFail(attempt: FakeAttempt): void {
  const [out, err] = PRINTED[attempt.spec.taskId]!;
  writeFileSync(attempt.spec.stdoutLog, out);
  writeFileSync(attempt.spec.stderrLog, err);
  attempt.exit(3);
}

describe("a failed task without a terminal", () => {
  it("is pointed at the log that holds its output: stderr when it has any, else stdout", async () => {
    run = new MiddleRun(Object.keys(PRINTED).map((id) => ({ id })));
    run.host.onLaunch = printThenFail;
    const report = run.report(await runAssignments({ assignmentsFile: run.file, ...run.options() }));
    expect(report.exit_code).toBe(1);
    const tasks = new Map(report.tasks.map((t) => [t.id, t]));
    for (const [id, which] of [
      ["stdout-only", "stdout"],
      ["both", "stderr"],
      ["silent", "stderr"],
    ] as const) {
      const task = tasks.get(id)!;
      expect(task.status, id).toBe("failed");
      expect(task.output_log, id).toBe(task.logs[which]);
    }
    const stdoutOnly = tasks.get("stdout-only")!;
    expect(readFileSync(join(run.dir, stdoutOnly.output_log!), "utf8")).toBe("it broke here\n");
  });
});
