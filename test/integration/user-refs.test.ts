import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { git, readReport, termorch, testFile, waitFor, writeAssignments } from "./harness.js";

const { socket, workspace } = testFile("user-refs");

const hasRef = (repo: string, ref: string) =>
  git(repo, "for-each-ref", "--format=%(refname)", ref).trim() === ref;

describe("refs the user points at a task's work during the run", () => {
  it("are reported with the task as likely, and never deleted by the merge or by termorch clean", async () => {
    const { dir, repo } = workspace();
    const go = join(dir, "go");
    const file = writeAssignments(dir, [
      { id: "A", env: { WRITE: "a.txt=from A" } },
      { id: "B", env: { WRITE: "b.txt=from B", WAIT_FILE: go } },
    ]);
    const runId = JSON.parse(readFileSync(file, "utf8")).run_id as string;
    const run = termorch(["run", file, "--keep-branches"], { socket });
    // While B runs, the user keeps A's work on a branch of their own and "pushes" it.
    await waitFor(() => existsSync(join(dir, "status", "A.success")), 20_000, "A done");
    git(repo, "branch", "keep-review", `termorch/${runId}/A`);
    git(repo, "update-ref", "refs/remotes/origin/review", `termorch/${runId}/A`);
    git(repo, "tag", "a-done", `termorch/${runId}/A`);
    writeFileSync(go, "");
    const result = await run;
    expect(result.exitCode).toBe(0);
    const report = readReport(dir);
    expect(report.merge.result).toBe("success");
    const a = report.tasks.find((t) => t.id === "A")!;
    expect(a.refs_created).toEqual([]);
    expect(report.merge.refs_changed).toEqual([
      { ref: "refs/heads/keep-review", old: null, new: a.commit, task: "A", during: [] },
      { ref: "refs/remotes/origin/review", old: null, new: a.commit, task: "A", during: [] },
      { ref: "refs/tags/a-done", old: null, new: a.commit, task: "A", during: [] },
    ]);
    for (const ref of ["refs/heads/keep-review", "refs/remotes/origin/review", "refs/tags/a-done"])
      expect(hasRef(repo, ref)).toBe(true);

    // Nor does termorch clean, which removes the run's own branches.
    const cleaned = await termorch(["clean", report.run_id!], { socket });
    expect(cleaned.exitCode).toBe(0);
    expect(git(repo, "branch", "--list", "termorch/*")).toBe("");
    for (const ref of ["refs/heads/keep-review", "refs/remotes/origin/review", "refs/tags/a-done"])
      expect(hasRef(repo, ref)).toBe(true);
  });

  it("without --keep-branches the merge's clean-up keeps them too", async () => {
    const { dir, repo } = workspace();
    const go = join(dir, "go");
    const file = writeAssignments(dir, [
      { id: "A", env: { WRITE: "a.txt=from A" } },
      { id: "B", env: { WRITE: "b.txt=from B", WAIT_FILE: go } },
    ]);
    const runId = JSON.parse(readFileSync(file, "utf8")).run_id as string;
    const run = termorch(["run", file], { socket });
    await waitFor(() => existsSync(join(dir, "status", "A.success")), 20_000, "A done");
    git(repo, "branch", "keep-review", `termorch/${runId}/A`);
    git(repo, "update-ref", "refs/remotes/origin/review", `termorch/${runId}/A`);
    writeFileSync(go, "");
    expect((await run).exitCode).toBe(0);
    const report = readReport(dir);
    expect(report.merge.result).toBe("success");
    expect(report.tasks.find((t) => t.id === "A")!.refs_created).toEqual([]);
    expect(hasRef(repo, "refs/heads/keep-review")).toBe(true);
    expect(hasRef(repo, "refs/remotes/origin/review")).toBe(true);
    expect(git(repo, "branch", "--list", "termorch/*")).toBe("");
  });
});
