import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { git, readReport, termorch, testFile, writeAssignments } from "./harness.js";

const { socket, workspace } = testFile("merge-resume-once");

describe("a driver killed after the merge, before the report", () => {
  it("resume reports the merge that happened: the gates and the merge do not run again", async () => {
    const { dir, repo } = workspace();
    const base = git(repo, "rev-parse", "HEAD").trim();
    const counter = join(dir, "gate-runs");
    const file = writeAssignments(
      dir,
      [
        { id: "A", env: { WRITE: "a.txt=from A" } },
        { id: "B", env: { WRITE: "b.txt=from B" } },
      ],
      // Counts its own runs, outside the repository.
      { success_criteria: { tests_cmd: `echo run >> '${counter}' && test -f a.txt && test -f b.txt` } },
    );
    // SIGKILLed once the target moved and the run's branches were removed, before the report.
    const crashed = await termorch(["run", file], { socket, env: { TERMORCH_FAULT: "kill-after-merge" } });
    expect(crashed.exitCode).not.toBe(0);
    expect(existsSync(join(dir, "execution_report.json"))).toBe(false);
    const merged = git(repo, "rev-parse", "HEAD").trim();
    expect(merged).not.toBe(base);
    expect(readFileSync(counter, "utf8")).toBe("run\n");

    const resumed = await termorch(["resume", dir], { socket });
    expect(resumed.stderr).not.toMatch(/internal/i);
    expect(resumed.exitCode).toBe(0);
    const report = readReport(dir);
    expect(report.merge).toMatchObject({
      result: "success",
      reason: null,
      result_commit: merged,
      target_moved: false,
      target_moved_to: null,
      refs_changed: [],
    });
    expect(report.summary.validation).toBe("passed");
    expect(report.merge.gates).toEqual([expect.objectContaining({ name: "run.tests_cmd", passed: true })]);
    // The gates ran once, and there is one integration commit: the branch is where the crash left it.
    expect(readFileSync(counter, "utf8")).toBe("run\n");
    expect(git(repo, "rev-parse", "HEAD").trim()).toBe(merged);
    const integrations = git(repo, "log", "--format=%s", "HEAD")
      .split("\n")
      .filter((s) => s.startsWith("termorch: integrate run"));
    expect(integrations).toHaveLength(1);
    expect(git(repo, "status", "--porcelain")).toBe("");
    expect(existsSync(join(dir, ".termorch", report.run_id!, "merge-intent.json"))).toBe(false);
    expect(git(repo, "branch", "--list", "termorch/*")).toBe("");
  });
});
