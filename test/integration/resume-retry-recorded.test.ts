import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { readReport, termorch, testFile, writeAssignments } from "./harness.js";

// Found by the crash campaign (test/reliability/crash.mjs, daemon:kill-in-gate:C under load: B,
// whose first attempt fails, was between its attempts when the driver died). A retry is recorded
// while its task is still recorded as running (the failed attempt): a driver killed before the
// retry's session existed made the resume take the retry as lost, and the task failed having run
// once. The resume must launch the retry, under the same attempt number.

const { socket, workspace } = testFile("resume-retry");

describe("a driver killed once a retry is recorded, before its session exists", () => {
  it("resumes by launching the retry: the task succeeds, its agent ran once per attempt", async () => {
    const { dir } = workspace();
    const counter = join(dir, "starts");
    const file = writeAssignments(dir, [
      {
        id: "B",
        retries: 1,
        // Fails its first attempt, succeeds its second.
        command: [
          "bash",
          "-c",
          'echo "$TERMORCH_ATTEMPT" >> "$COUNTER"; [ "$TERMORCH_ATTEMPT" -ge 2 ] || exit 3; echo B > b.txt',
        ],
        env: { COUNTER: counter },
      },
    ]);
    const first = await termorch(["run", file], {
      socket,
      env: { TERMORCH_FAULT: "kill-after-retry-recorded:B" },
    });
    expect(first.exitCode).toBe(-1); // SIGKILLed by the fault
    expect(readFileSync(counter, "utf8").split("\n").filter(Boolean)).toEqual(["1"]);

    const resumed = await termorch(["resume", dir], { socket });
    expect(resumed.exitCode).toBe(0);
    const b = readReport(dir).tasks.find((t) => t.id === "B")!;
    expect(b.status).toBe("success");
    expect(b.attempts).toBe(2);
    expect(readFileSync(counter, "utf8").split("\n").filter(Boolean)).toEqual(["1", "2"]);
  }, 90_000);
});
