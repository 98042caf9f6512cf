import { describe, expect, it } from "vitest";
import { git, readReport, termorch, testFile, writeAssignments } from "./harness.js";

const { socket, workspace } = testFile("moved-from-checkout");

describe("the user's branch moved by an agent that ran git in the user's checkout", () => {
  it("to unrelated history: not taken for the user's commit; the merge is refused and the branch put back", async () => {
    const { dir, repo } = workspace();
    const base = git(repo, "rev-parse", "HEAD").trim();
    // From its worktree, the agent moves main in the user's checkout (so the checkout's HEAD
    // reflog records the move, as it would for a commit of the user's) to a root commit.
    const move = [
      `orphan=$(git -C '${repo}' commit-tree -m orphan $(git -C '${repo}' mktree </dev/null))`,
      `git -C '${repo}' update-ref refs/heads/main "$orphan"`,
      "echo changed > README.md",
    ].join(" && ");
    const file = writeAssignments(dir, [
      { id: "A", command: ["bash", "-c", move] },
      { id: "B", env: { WRITE: "b.txt=B" } },
    ]);
    const result = await termorch(["run", file], { socket });
    expect(result.exitCode).toBe(1);
    const report = readReport(dir);
    expect(report.tasks.map((t) => t.status)).toEqual(["success", "success"]);
    expect(report.merge.result).toBe("failed");
    expect(report.merge.reason).toMatch(
      /^refs\/heads\/main was moved from [0-9a-f]{12} to [0-9a-f]{12} during the run, not by a commit in .*: termorch does not merge over that; it put refs\/heads\/main back/,
    );
    expect(git(repo, "rev-parse", "refs/heads/main").trim()).toBe(base);
    expect(git(repo, "status", "--porcelain")).toBe("");
  });

  it("by a commit of the same tree (as an empty commit of the user's would): merged onto, and said so", async () => {
    const { dir, repo } = workspace();
    const move = [
      `c=$(git -C '${repo}' commit-tree -p main -m 'looks like the user' 'main^{tree}')`,
      `git -C '${repo}' update-ref refs/heads/main "$c"`,
      "echo changed > README.md",
    ].join(" && ");
    const file = writeAssignments(dir, [{ id: "A", command: ["bash", "-c", move] }]);
    expect((await termorch(["run", file], { socket })).exitCode).toBe(0);
    const report = readReport(dir);
    expect(report.merge).toMatchObject({ result: "success", target_moved: true });
    expect(git(repo, "status", "--porcelain")).toBe("");
  });
});
