import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { readReport, termorch, testFile, writeAssignments } from "./harness.js";

const { socket, workspace } = testFile("wt-deleted");

describe("an agent that deletes its own worktree", () => {
  it("fails as lost, saying its worktree was deleted while it ran (not `spawn git ENOENT`)", async () => {
    const { dir } = workspace();
    const agent = join(dir, "agent.sh");
    writeFileSync(agent, 'cd / && rm -rf "$TERMORCH_WORKSPACE"\n');
    const file = writeAssignments(dir, [
      { id: "A", command: ["bash", agent], retries: 1 },
      { id: "B", dependencies: ["A"] },
    ]);
    const result = await termorch(["run", file], { socket });
    expect(result.exitCode).toBe(1);
    const report = readReport(dir);
    const a = report.tasks.find((t) => t.id === "A")!;
    expect(a).toMatchObject({ status: "failed", reason: "lost", attempts: 1 });
    expect(a.detail).toMatch(/^its worktree \/.*\/A was deleted while the agent ran \(by the agent\?\)/);
    expect(JSON.stringify(report)).not.toContain("ENOENT");
    expect(a.gates.find((g) => g.name === "commit")).toMatchObject({ passed: false });
    expect(report.tasks.find((t) => t.id === "B")!.status).toBe("skipped");
  });
});
