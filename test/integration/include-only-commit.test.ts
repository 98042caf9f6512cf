import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { git, readReport, termorch, testFile, writeAssignments } from "./harness.js";

const { socket, workspace } = testFile("include-only");

/** `<commit> <tree> <parents...>` of every commit in `range`, oldest first. */
function commits(repo: string, range: string): Array<{ commit: string; tree: string; parents: string[] }> {
  return git(repo, "log", "--reverse", "--format=%H%x09%T%x09%P", range)
    .trim()
    .split("\n")
    .filter(Boolean)
    .map((line) => {
      const [commit, tree, parents] = line.split("\t");
      return { commit: commit!, tree: tree!, parents: (parents ?? "").split(" ").filter(Boolean) };
    });
}

const treeOf = (repo: string, commit: string): string => git(repo, "rev-parse", `${commit}^{tree}`).trim();

describe("an agent's commit that held only the include link", () => {
  it("is dropped when the link is taken out: no empty commit of the task reaches the user's branch", async () => {
    const { dir, repo } = workspace();
    git(repo, "config", "user.name", "Repo User");
    git(repo, "config", "user.email", "repo@example.com");
    writeFileSync(join(repo, ".git", "info", "exclude"), ".venv\n");
    mkdirSync(join(repo, ".venv", "bin"), { recursive: true });
    writeFileSync(join(repo, ".venv", "bin", "python"), "#!/bin/sh\n");
    const base = git(repo, "rev-parse", "HEAD").trim();
    const agent = join(dir, "agent.sh");
    writeFileSync(
      agent,
      [
        "set -eu",
        // The link alone, then a real change, then a merge-free second change on top.
        "git add -f .venv && git commit -q -m 'add the venv'",
        "echo work > work.txt && git add work.txt && git commit -q -m 'real work'",
        "echo more > more.txt && git add more.txt && git commit -q -m 'more work'",
        "",
      ].join("\n"),
    );
    const file = writeAssignments(dir, [{ id: "A", command: ["bash", agent] }], {
      environment: { worktree_include: [".venv"] },
    });
    const result = await termorch(["run", file], { socket });
    expect(result.exitCode, result.stderr).toBe(0);
    const report = readReport(dir);
    expect(report.merge.result).toBe("success");
    const run = commits(repo, `${base}..main`);
    // Every commit of the run changes something against its single parent.
    for (const c of run.filter((c) => c.parents.length === 1))
      expect(c.tree, `commit ${c.commit} is empty`).not.toBe(treeOf(repo, c.parents[0]!));
    const subjects = git(repo, "log", "--format=%s", `${base}..main`).trim().split("\n");
    expect(subjects).not.toContain("add the venv");
    expect(subjects).toEqual(expect.arrayContaining(["real work", "more work"]));
    expect(git(repo, "ls-tree", "-r", "--name-only", "main")).not.toContain(".venv");
    expect(git(repo, "status", "--porcelain", "--untracked-files=no")).toBe("");
  });
});
