import { existsSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { git, readReport, termorch, testFile, worktreesInUse, writeAssignments } from "./harness.js";

const { socket, workspace } = testFile("clean-broken-wt");

describe("clean after an agent broke its worktree's .git file", () => {
  it.each([
    ["points it at a folder that does not exist", 'echo "gitdir: /nonexistent/x" > .git'],
    ["points it at the repository's own git dir", 'echo "gitdir: $(git rev-parse --git-common-dir)" > .git'],
  ])("removes the worktree and its branch with --force when the agent %s", async (_, breakIt) => {
    const { dir, repo } = workspace();
    const file = writeAssignments(dir, [
      { id: "A", command: ["bash", "-c", `echo changed > README.md; ${breakIt}`] },
    ]);
    expect((await termorch(["run", file], { socket })).exitCode).toBe(1);
    const report = readReport(dir);
    expect(report.tasks[0]).toMatchObject({ status: "failed", reason: "validation" });
    const [wt] = worktreesInUse(repo);
    expect(wt).toBeDefined();

    // Without --force it is kept, saying why and what removes it.
    const kept = await termorch(["clean", report.run_id!], { socket, cwd: dir });
    expect(kept.stdout + kept.stderr).toMatch(
      /kept worktree .*(: cannot remove worktree .*; --force removes it|--force discards them)/,
    );
    expect(existsSync(wt!)).toBe(true);

    const forced = await termorch(["clean", report.run_id!, "--force"], { socket, cwd: dir });
    expect(forced.exitCode).toBe(0);
    expect(forced.stdout).toMatch(/worktree .* \(git could not remove it: /);
    expect(existsSync(wt!)).toBe(false);
    expect(worktreesInUse(repo)).toEqual([]);
    expect(git(repo, "for-each-ref", "refs/heads/termorch/")).toBe("");
    // The user's repository is as it was.
    expect(git(repo, "status", "--porcelain")).toBe("");
  });
});
