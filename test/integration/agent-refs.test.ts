import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { git, readReport, termorch, testFile, writeAssignments } from "./harness.js";

const { socket, workspace } = testFile("agent-refs");

const commitAll = (msg: string) =>
  `git add -A && git -c user.name=agent -c user.email=a@a commit -q -m '${msg}'`;
const sh = (script: string) => ["bash", "-c", script];
const hasRef = (repo: string, ref: string) =>
  git(repo, "for-each-ref", "--format=%(refname)", ref).trim() === ref;

describe("refs an agent makes in the user's repository", () => {
  it("an agent moving the user's branch from its worktree is reported and never merged over", async () => {
    const { dir, repo } = workspace();
    const base = git(repo, "rev-parse", "HEAD").trim();
    const file = writeAssignments(dir, [
      // Its own work, then the user's branch pointed at it (git branch -f refuses: main is checked out).
      {
        id: "A",
        command: sh(`echo A > a.txt && ${commitAll("agent A")} && git update-ref refs/heads/main HEAD`),
      },
      { id: "B", env: { WRITE: "b.txt=B" } },
    ]);
    const result = await termorch(["run", file], { socket });
    expect(result.exitCode).toBe(1);
    const report = readReport(dir);
    const agentCommit = report.tasks.find((t) => t.id === "A")!.commit!;
    expect(report.merge.result).toBe("failed");
    expect(report.merge.reason).toMatch(
      /refs\/heads\/main was moved from \w+ to \w+ during the run, not by a commit in .* \(by the agent of task A\): termorch does not merge over that/,
    );
    expect(report.merge.refs_changed).toEqual([
      { ref: "refs/heads/main", old: base, new: agentCommit, task: "A", during: [] },
    ]);
    expect(report.merge.target_moved).toBe(false);
    expect(report.summary.completed).toBe(false);
    // Nothing of the run is merged; the branch is put back where the user left it (see
    // target-put-back.test.ts), the agent's commit kept on a branch of the run's.
    expect(git(repo, "rev-parse", "refs/heads/main").trim()).toBe(base);
    expect(git(repo, "rev-parse", `termorch/${report.run_id}/moved/main`).trim()).toBe(agentCommit);
    expect(existsSync(join(repo, "b.txt"))).toBe(false);
    // The task branches and the integration are kept for the user.
    expect(hasRef(repo, `refs/heads/termorch/${report.run_id}/integration`)).toBe(true);
  });

  it("an agent that switches to a branch of its own: its work is merged from the task branch, its branch reported and removed", async () => {
    const { dir, repo } = workspace();
    const file = writeAssignments(dir, [
      {
        id: "A",
        // Committed work on the new branch, plus an uncommitted file termorch commits.
        command: sh(
          `git checkout -q -b other && echo A > a.txt && ${commitAll("agent A")} && echo more > more.txt`,
        ),
      },
    ]);
    const result = await termorch(["run", file], { socket });
    expect(result.exitCode).toBe(0);
    const report = readReport(dir);
    const task = report.tasks[0]!;
    expect(task.refs_created).toEqual(["refs/heads/other"]);
    expect(task.branch).toBe(`termorch/${report.run_id}/A`);
    expect(report.merge.refs_changed).toEqual([
      { ref: "refs/heads/other", old: null, new: expect.any(String), task: "A", during: [] },
    ]);
    expect(git(repo, "merge-base", "--is-ancestor", report.merge.refs_changed[0]!.new!, task.commit!)).toBe(
      "",
    );
    expect(report.merge.result).toBe("success");
    expect(readFileSync(join(repo, "a.txt"), "utf8")).toBe("A\n");
    expect(readFileSync(join(repo, "more.txt"), "utf8")).toBe("more\n");
    expect(git(repo, "status", "--porcelain")).toBe("");
    // Removed with the task branch after the merge.
    expect(hasRef(repo, "refs/heads/other")).toBe(false);
    expect(git(repo, "branch", "--list", "termorch/*")).toBe("");
  });

  it("with --keep-branches the task branch names the merged commit; termorch clean removes the agent's branch", async () => {
    const { dir, repo } = workspace();
    const file = writeAssignments(dir, [
      { id: "A", command: sh(`git checkout -q -b other && echo A > a.txt && ${commitAll("agent A")}`) },
    ]);
    expect((await termorch(["run", file, "--keep-branches"], { socket })).exitCode).toBe(0);
    const report = readReport(dir);
    const task = report.tasks[0]!;
    expect(git(repo, "rev-parse", task.branch!).trim()).toBe(task.commit);
    expect(git(repo, "merge-base", "--is-ancestor", task.commit!, "HEAD")).toBe("");
    expect(task.refs_created).toEqual(["refs/heads/other"]);
    expect(hasRef(repo, "refs/heads/other")).toBe(true);
    const cleaned = await termorch(["clean", report.run_id!], { socket });
    expect(cleaned.exitCode).toBe(0);
    expect(cleaned.stdout).toContain("removed branch other");
    expect(hasRef(repo, "refs/heads/other")).toBe(false);
    expect(git(repo, "branch", "--list", "termorch/*")).toBe("");
  });

  it("an agent that leaves its work on a branch not containing the task branch fails validation, and nothing is merged", async () => {
    const { dir, repo } = workspace();
    const base = git(repo, "rev-parse", "HEAD").trim();
    const file = writeAssignments(dir, [
      {
        id: "A",
        command: sh(
          `echo A > a.txt && ${commitAll("on the task branch")} && git checkout -q -b other HEAD~1 && echo B > b.txt && ${commitAll("elsewhere")}`,
        ),
      },
    ]);
    expect((await termorch(["run", file], { socket })).exitCode).toBe(1);
    const report = readReport(dir);
    const task = report.tasks[0]!;
    expect(task.status).toBe("failed");
    expect(task.reason).toBe("validation");
    expect(task.detail).toMatch(/on refs\/heads\/other .* which does not contain the task's branch/);
    expect(report.merge.result).toBe("skipped");
    expect(report.merge.refs_changed).toEqual([
      { ref: "refs/heads/other", old: null, new: expect.any(String), task: "A", during: [] },
    ]);
    expect(git(repo, "rev-parse", "HEAD").trim()).toBe(base);
  });

  it("an agent that switches to a branch the user had is refused, and that branch is never removed", async () => {
    const { dir, repo } = workspace();
    git(repo, "branch", "feature");
    const file = writeAssignments(dir, [
      {
        id: "A",
        command: sh(`git checkout -q feature && echo A > a.txt && ${commitAll("on the users branch")}`),
      },
    ]);
    expect((await termorch(["run", file], { socket })).exitCode).toBe(1);
    const report = readReport(dir);
    const task = report.tasks[0]!;
    expect(task.status).toBe("failed");
    expect(task.detail).toMatch(/switched .* to refs\/heads\/feature, a branch that existed before the run/);
    expect(task.refs_created).toEqual([]);
    const moved = git(repo, "rev-parse", "feature").trim();
    expect(report.merge.refs_changed).toEqual([
      { ref: "refs/heads/feature", old: expect.any(String), new: moved, task: "A", during: [] },
    ]);
    await termorch(["clean", report.run_id!, "--force"], { socket });
    expect(hasRef(repo, "refs/heads/feature")).toBe(true);
  });
});
