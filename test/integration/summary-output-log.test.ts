import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { readReport, termorch, testFile, writeAssignments } from "./harness.js";

const { socket, workspace } = testFile("output-log");

describe("a failed task without a terminal", () => {
  it("has its stderr log as output_log, which the summary names once, whatever its detail", async () => {
    const { dir } = workspace();
    const file = writeAssignments(dir, [
      { id: "fails", command: ["bash", "-c", "echo went wrong >&2; exit 3"] },
      // A launch error: its detail says why, the summary where to read more.
      { id: "missing", command: ["/nonexistent/agent"] },
    ]);
    const result = await termorch(["run", file], { socket });
    expect(result.exitCode).toBe(1);
    const summary = `${result.stdout}${result.stderr}`;
    for (const task of readReport(dir).tasks) {
      expect(task.output_log, task.id).toBe(task.logs.stderr);
      expect(task.detail, task.id).not.toContain("logs/");
      const line = summary.split("\n").find((l) => l.startsWith(`  ${task.id}: failed`));
      expect(line, task.id).toMatch(new RegExp(`; output: ${task.output_log!.replace(/[.]/g, "\\.")}$`));
      expect(line!.split(task.output_log!).length, task.id).toBe(2);
    }
    const fails = readReport(dir).tasks.find((t) => t.id === "fails")!;
    expect(readFileSync(join(dir, fails.output_log!), "utf8")).toContain("went wrong");
    expect(readReport(dir).tasks.find((t) => t.id === "missing")!.reason).toBe("launch_error");
  });
});
