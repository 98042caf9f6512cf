import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { readReport, termorch, testFile, writeAssignments } from "./harness.js";

const { socket, workspace } = testFile("output-log-choice");

describe("a failed task without a terminal", () => {
  it("is pointed at the log that holds its output: stderr when it has any, else stdout", async () => {
    const { dir } = workspace();
    const file = writeAssignments(dir, [
      { id: "stdout-only", command: ["bash", "-c", "echo it broke here; exit 3"] },
      { id: "both", command: ["bash", "-c", "echo progress; echo it broke >&2; exit 3"] },
      { id: "silent", command: ["bash", "-c", "exit 3"] },
    ]);
    const result = await termorch(["run", file], { socket });
    expect(result.exitCode).toBe(1);
    const summary = `${result.stdout}${result.stderr}`;
    const tasks = new Map(readReport(dir).tasks.map((t) => [t.id, t]));
    const expected = { "stdout-only": "stdout", both: "stderr", silent: "stderr" } as const;
    for (const [id, which] of Object.entries(expected)) {
      const task = tasks.get(id)!;
      expect(task.output_log, id).toBe(task.logs[which]);
      const line = summary.split("\n").find((l) => l.startsWith(`  ${id}: failed`));
      expect(line, id).toMatch(new RegExp(`; output: ${task.output_log!.replace(/[.]/g, "\\.")}$`));
    }
    const stdoutOnly = tasks.get("stdout-only")!;
    expect(readFileSync(join(dir, stdoutOnly.output_log!), "utf8")).toContain("it broke here");
    expect(readFileSync(join(dir, stdoutOnly.logs.stderr!), "utf8")).toBe("");
  });
});
