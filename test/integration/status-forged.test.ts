import { readdirSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { readReport, termorch, testFile, writeAssignments } from "./harness.js";

const { socket, workspace } = testFile("status-forged");

describe("status files an agent forged in the run directory", () => {
  it("do not outlive the task's real final state: each task ends with one status file", async () => {
    const { dir } = workspace();
    // The run directory is two folders up from the agent's artifacts folder.
    const forge =
      'run="$TERMORCH_ARTIFACTS_DIR/../.."; echo "{}" > "$run/status/B.failed"; echo "{}" > "$run/status/B.skipped"';
    const file = writeAssignments(dir, [
      { id: "A", command: ["bash", "-c", forge] },
      { id: "B", dependencies: ["A"] },
    ]);
    expect((await termorch(["run", file], { socket })).exitCode).toBe(0);
    expect(readReport(dir).tasks.map((t) => t.status)).toEqual(["success", "success"]);
    expect(readdirSync(join(dir, "status")).sort()).toEqual(["A.success", "B.success"]);
  });
});
