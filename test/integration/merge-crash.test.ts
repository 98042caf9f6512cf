import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { execa } from "execa";
import { describe, expect, it } from "vitest";
import {
  BIN,
  cliEnv,
  git,
  readReport,
  termorch,
  testFile,
  worktreesInUse,
  writeAssignments,
} from "./harness.js";

const { socket, workspace } = testFile("merge-crash");

// The driver SIGKILLs itself right after it moved the user's branch and before the index and
// work tree followed (TERMORCH_FAULT=kill-after-ref-update): the worst moment to die.
const CRASH = { TERMORCH_FAULT: "kill-after-ref-update" };

const tasks = [
  { id: "A", env: { WRITE: "a.txt=from A" } },
  { id: "B", env: { WRITE: "b/b.txt=from B" } },
  { id: "C", dependencies: ["A"], env: { WRITE: "c.txt=from C" } },
];

describe("a driver killed while it moves the target", () => {
  it("happens only where a test injects it: the real CLI ignores $TERMORCH_FAULT", async () => {
    const { dir, repo } = workspace();
    const file = writeAssignments(dir, tasks);
    const result = await execa(process.execPath, [BIN, "run", file], {
      reject: false,
      env: cliEnv(socket, CRASH),
    });
    expect(result.exitCode, String(result.stderr)).toBe(0);
    expect(readReport(dir).merge.result).toBe("success");
    expect(git(repo, "status", "--porcelain")).toBe("");
  });

  it("resume finishes the update: ref, index and work tree agree", async () => {
    const { dir, repo } = workspace();
    const file = writeAssignments(dir, tasks);
    const crashed = await termorch(["run", file], { socket, env: CRASH });
    expect(crashed.exitCode).not.toBe(0);
    expect(existsSync(join(dir, "execution_report.json"))).toBe(false);
    // What the crash left: the branch moved, the index did not (every task file staged as a deletion).
    expect(git(repo, "diff", "--cached", "--name-only")).not.toBe("");

    const resumed = await termorch(["resume", dir], { socket });
    expect(resumed.stderr).not.toMatch(/internal/i);
    expect(resumed.exitCode).toBe(0);
    const report = readReport(dir);
    expect(report.merge.result).toBe("success");
    expect(report.merge.reason).toBeNull();
    expect(git(repo, "rev-parse", "HEAD").trim()).toBe(report.merge.result_commit);
    expect(git(repo, "status", "--porcelain")).toBe("");
    expect(git(repo, "diff", "--cached", "--name-only")).toBe("");
    expect(readFileSync(join(repo, "a.txt"), "utf8")).toBe("from A\n");
    expect(readFileSync(join(repo, "b", "b.txt"), "utf8")).toBe("from B\n");
    expect(readFileSync(join(repo, "c.txt"), "utf8")).toBe("from C\n");
    // Merged once: the result is the integration commit itself, not a merge of it onto itself.
    expect(git(repo, "log", "-1", "--format=%s", "HEAD").trim()).toBe(
      `termorch: integrate run ${report.run_id}`,
    );
    expect(git(repo, "branch", "--list", "termorch/*")).toBe("");
    expect(worktreesInUse(repo)).toEqual([]);
  });

  it("resume rolls back when finishing would overwrite what the user did meanwhile", async () => {
    const { dir, repo } = workspace();
    const base = git(repo, "rev-parse", "HEAD").trim();
    const file = writeAssignments(dir, tasks);
    expect((await termorch(["run", file], { socket, env: CRASH })).exitCode).not.toBe(0);
    // The user creates a file the update would write.
    writeFileSync(join(repo, "a.txt"), "the user's own a.txt\n");

    const resumed = await termorch(["resume", dir], { socket });
    expect(resumed.exitCode).toBe(1);
    const report = readReport(dir);
    expect(report.merge.result).toBe("rolled_back");
    expect(report.merge.reason).toMatch(/back at/);
    expect(git(repo, "rev-parse", "HEAD").trim()).toBe(base);
    expect(git(repo, "status", "--porcelain")).toBe("?? a.txt\n");
    expect(readFileSync(join(repo, "a.txt"), "utf8")).toBe("the user's own a.txt\n");
    expect(existsSync(join(repo, "c.txt"))).toBe(false);
    // The run's result is kept for the user to merge by hand.
    expect(git(repo, "branch", "--list", `termorch/${report.run_id}/integration`)).not.toBe("");
  });
});
