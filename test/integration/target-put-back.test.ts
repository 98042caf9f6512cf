import { existsSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { git, readReport, termorch, testFile, writeAssignments } from "./harness.js";

const { socket, workspace } = testFile("put-back");

const commitAll = (msg: string) =>
  `git add -A && git -c user.name=agent -c user.email=a@a commit -q -m '${msg}'`;
const sh = (script: string) => ["bash", "-c", script];
const tipOf = (repo: string, ref: string) =>
  git(repo, "for-each-ref", "--format=%(objectname)", ref).trim() || null;

describe("the user's branch moved by an agent", () => {
  it("is put back to its start when the user's index still matches it; the agent's commit is kept under termorch's refs", async () => {
    const { dir, repo } = workspace();
    const base = git(repo, "rev-parse", "HEAD").trim();
    const file = writeAssignments(dir, [
      {
        id: "A",
        command: sh(`echo evil > evil.js && ${commitAll("agent A")} && git update-ref refs/heads/main HEAD`),
      },
      { id: "B", env: { WRITE: "b.txt=B" } },
    ]);
    const result = await termorch(["run", file], { socket });
    expect(result.exitCode).toBe(1);
    const report = readReport(dir);
    const agentCommit = report.tasks.find((t) => t.id === "A")!.commit!;
    const kept = `termorch/${report.run_id}/moved/main`;
    expect(report.merge.result).toBe("failed");
    expect(report.merge.refs_changed).toEqual([
      { ref: "refs/heads/main", old: base, new: agentCommit, task: "A", during: [] },
    ]);
    expect(report.merge.reason).toContain(
      `refs/heads/main was moved from ${base.slice(0, 12)} to ${agentCommit.slice(0, 12)} during the run`,
    );
    expect(report.merge.reason).toContain(`put refs/heads/main back to ${base.slice(0, 12)}`);
    expect(report.merge.reason).toContain(`kept the agent's commit ${agentCommit.slice(0, 12)} on ${kept}`);
    // Ref, index and work tree agree: the branch is where the user left it, nothing staged.
    expect(git(repo, "rev-parse", "refs/heads/main").trim()).toBe(base);
    expect(git(repo, "status", "--porcelain")).toBe("");
    expect(existsSync(join(repo, "evil.js"))).toBe(false);
    expect(existsSync(join(repo, "b.txt"))).toBe(false);
    expect(tipOf(repo, `refs/heads/${kept}`)).toBe(agentCommit);
    expect(git(repo, "reflog", "-1", "--format=%gs", "refs/heads/main").trim()).toMatch(/^termorch: /);
    // clean treats the kept ref as the run's other branches: gone with --force only when nothing
    // else holds its commit; here the task branch and the integration do, so a plain clean
    // removes it and keeps the integration (unmerged).
    const cleaned = await termorch(["clean", report.run_id!], { socket });
    expect(cleaned.stdout).toContain(`removed branch ${kept}`);
    expect(tipOf(repo, `refs/heads/${kept}`)).toBeNull();
    expect(git(repo, "for-each-ref", "--contains", agentCommit, "--format=%(refname)").trim()).not.toBe("");
    await termorch(["clean", report.run_id!, "--force"], { socket });
    expect(git(repo, "branch", "--list", "termorch/*").trim()).toBe("");
    expect(git(repo, "rev-parse", "refs/heads/main").trim()).toBe(base);
  });

  it("is put back when the moving task failed too, and a plain clean keeps the commit no other ref holds", async () => {
    const { dir, repo } = workspace();
    const base = git(repo, "rev-parse", "HEAD").trim();
    const file = writeAssignments(dir, [
      {
        id: "A",
        // A commit made outside the task branch (detached), put on the user's branch, then a failure.
        command: sh(
          `git checkout -q --detach && echo evil > evil.js && ${commitAll("agent A")} && git update-ref refs/heads/main HEAD && exit 3`,
        ),
      },
    ]);
    expect((await termorch(["run", file], { socket })).exitCode).toBe(1);
    const report = readReport(dir);
    const moved = report.merge.refs_changed[0]!.new!;
    const kept = `termorch/${report.run_id}/moved/main`;
    expect(report.merge.result).toBe("skipped");
    expect(report.merge.reason).toContain("not every task succeeded");
    expect(report.merge.reason).toContain(`put refs/heads/main back to ${base.slice(0, 12)}`);
    expect(git(repo, "rev-parse", "refs/heads/main").trim()).toBe(base);
    expect(git(repo, "status", "--porcelain")).toBe("");
    expect(tipOf(repo, `refs/heads/${kept}`)).toBe(moved);
    const cleaned = await termorch(["clean", report.run_id!], { socket });
    expect(cleaned.stdout).toMatch(new RegExp(`branch ${kept}: .*no other ref contains`));
    expect(tipOf(repo, `refs/heads/${kept}`)).toBe(moved);
    await termorch(["clean", report.run_id!, "--force"], { socket });
    expect(tipOf(repo, `refs/heads/${kept}`)).toBeNull();
  });

  it("is left as it is when the user changed the index meanwhile, and the reason says what to run", async () => {
    const { dir, repo } = workspace();
    const base = git(repo, "rev-parse", "HEAD").trim();
    // The user stages a file of theirs while the agent runs (done by the agent's script, in the
    // user's checkout, before it moves the branch).
    writeFileSync(join(repo, "mine.txt"), "mine\n");
    const file = writeAssignments(dir, [
      {
        id: "A",
        command: sh(
          `echo evil > evil.js && ${commitAll("agent A")} && git -C '${repo}' add mine.txt && git update-ref refs/heads/main HEAD`,
        ),
      },
    ]);
    expect((await termorch(["run", file], { socket })).exitCode).toBe(1);
    const report = readReport(dir);
    const agentCommit = report.tasks[0]!.commit!;
    expect(report.merge.result).toBe("failed");
    expect(git(repo, "rev-parse", "refs/heads/main").trim()).toBe(agentCommit);
    expect(tipOf(repo, `refs/heads/termorch/${report.run_id}/moved/main`)).toBeNull();
    const todo = `git -C ${repo} reset --soft ${base}`;
    expect(report.merge.reason).toContain("left refs/heads/main as it is");
    expect(report.merge.reason).toContain(todo);
    // Doing what it says puts ref, index and work tree in agreement, the user's change kept.
    git(repo, "reset", "-q", "--soft", base);
    expect(git(repo, "status", "--porcelain")).toBe("A  mine.txt\n");
  });

  it("deleted by an agent: recreated at its start", async () => {
    const { dir, repo } = workspace();
    const base = git(repo, "rev-parse", "HEAD").trim();
    const file = writeAssignments(dir, [{ id: "A", command: sh("git update-ref -d refs/heads/main") }]);
    expect((await termorch(["run", file], { socket })).exitCode).toBe(1);
    const report = readReport(dir);
    expect(report.merge.result).toBe("failed");
    expect(report.merge.reason).toContain(`was deleted during the run`);
    expect(report.merge.reason).toContain(`put refs/heads/main back to ${base.slice(0, 12)}`);
    expect(git(repo, "rev-parse", "refs/heads/main").trim()).toBe(base);
    expect(git(repo, "status", "--porcelain")).toBe("");
  });
});

describe("a driver killed right after it put the user's branch back", () => {
  it("resume still refuses the merge and says why, though the branch looks untouched by then", async () => {
    const { dir, repo } = workspace();
    const base = git(repo, "rev-parse", "HEAD").trim();
    const file = writeAssignments(dir, [
      {
        id: "A",
        command: sh(`echo evil > evil.js && ${commitAll("agent A")} && git update-ref refs/heads/main HEAD`),
      },
    ]);
    const crashed = await termorch(["run", file], { socket, env: { TERMORCH_FAULT: "kill-after-put-back" } });
    expect(crashed.exitCode).not.toBe(0);
    expect(existsSync(join(dir, "execution_report.json"))).toBe(false);
    expect(git(repo, "rev-parse", "refs/heads/main").trim()).toBe(base);

    const resumed = await termorch(["resume", dir], { socket });
    expect(resumed.exitCode, resumed.stderr).toBe(1);
    const report = readReport(dir);
    const agentCommit = report.tasks[0]!.commit!;
    expect(report.merge.result).toBe("failed");
    expect(report.merge.reason).toContain(
      `an agent moved refs/heads/main to ${agentCommit.slice(0, 12)} during the run: termorch does not merge over that; it put refs/heads/main back`,
    );
    expect(git(repo, "rev-parse", "refs/heads/main").trim()).toBe(base);
    expect(git(repo, "status", "--porcelain")).toBe("");
    expect(existsSync(join(repo, "evil.js"))).toBe(false);
  });
});
