import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import {
  git,
  listFiles,
  readReport,
  termorch,
  testFile,
  waitFor,
  worktreesInUse,
  writeAssignments,
} from "./harness.js";

const { socket, workspace } = testFile("merge");

/** What the user sees of their repository: branch, HEAD, index/work tree state and file contents. */
function userState(repo: string): string {
  const files = listFiles(repo)
    .filter((f) => !f.startsWith(".git/") && !f.endsWith("/"))
    .map((f) => `${f}:${readFileSync(join(repo, f), "utf8")}`);
  return [
    git(repo, "symbolic-ref", "HEAD"),
    git(repo, "rev-parse", "HEAD"),
    git(repo, "status", "--porcelain"),
    ...files,
  ].join("\n");
}

const sh = (script: string) => ["bash", "-c", script];

describe("merge", () => {
  it("merges independent tasks into the checked-out branch, with every task commit reachable", async () => {
    const { dir, repo } = workspace();
    const before = git(repo, "rev-parse", "HEAD").trim();
    const file = writeAssignments(dir, [
      { id: "A", env: { WRITE: "a.txt=from A" } },
      { id: "B", env: { WRITE: "b/b.txt=from B" } },
      { id: "C", dependencies: ["A"], env: { WRITE: "c.txt=from C" } },
    ]);
    const result = await termorch(["run", file], { socket });
    expect(result.exitCode).toBe(0);
    const report = readReport(dir);
    expect(report.merge).toMatchObject({
      result: "success",
      order: ["A", "B", "C"],
      base_commit: before,
      target: "refs/heads/main",
    });
    expect(report.summary).toMatchObject({ completed: true, validation: "skipped" });
    expect(git(repo, "rev-parse", "HEAD").trim()).toBe(report.merge.result_commit);
    for (const t of report.tasks)
      expect(git(repo, "merge-base", "--is-ancestor", t.commit!, "HEAD")).toBe("");
    expect(readFileSync(join(repo, "a.txt"), "utf8")).toBe("from A\n");
    expect(readFileSync(join(repo, "b", "b.txt"), "utf8")).toBe("from B\n");
    expect(readFileSync(join(repo, "c.txt"), "utf8")).toBe("from C\n");
    expect(git(repo, "status", "--porcelain")).toBe("");
    // Cleaned up: no task branches or worktrees left.
    expect(git(repo, "branch", "--list", "termorch/*")).toBe("");
    expect(worktreesInUse(repo)).toEqual([]);
    // Each task with the attempt merged and its commit.
    const commitOf = (id: string) => report.tasks.find((t) => t.id === id)!.commit!.slice(0, 12);
    expect(git(repo, "log", "-1", "--format=%B", report.merge.result_commit!)).toContain(
      `- A (attempt 1, ${commitOf("A")})\n- B (attempt 1, ${commitOf("B")})\n- C (attempt 1, ${commitOf("C")})`,
    );
  });

  // Each kind of conflict (content, add/add, modify/delete, rename/delete, a binary file's) is named
  // by checkMerge in test/integration/git-merge.test.ts, in-process; here one kind through the CLI.
  for (const [kind, a, b, files] of [
    ["content", sh("echo A > README.md"), sh("echo B > README.md"), ["README.md"]],
  ] as const) {
    it(`reports a ${kind} conflict with its files and tasks, exits 3 and changes nothing`, async () => {
      const { dir, repo } = workspace();
      const file = writeAssignments(dir, [
        { id: "left", command: [...a] },
        { id: "right", command: [...b] },
        { id: "other", env: { WRITE: "other.txt=fine" } },
      ]);
      const before = userState(repo);
      const result = await termorch(["run", file], { socket });
      expect(result.exitCode).toBe(3);
      const report = readReport(dir);
      expect(report.merge.result).toBe("conflict");
      expect(report.merge.conflicts).toEqual([
        {
          tasks: ["left", "right"],
          files: [...files],
          detail: `right conflicts with left: ${kind} in ${files[0]}`,
        },
      ]);
      expect(report.summary.conflicts).toEqual(report.merge.conflicts);
      expect(report.summary.completed).toBe(false);
      expect(userState(repo)).toBe(before);
      // Task branches are kept for inspection.
      expect(git(repo, "branch", "--list", "termorch/*").split("\n").filter(Boolean)).toHaveLength(3);
    });
  }

  it("fails a task whose dependencies conflict before launching it, and skips its dependents", async () => {
    const { dir, repo } = workspace();
    const marker = join(dir, "joined-ran");
    const file = writeAssignments(dir, [
      { id: "x", command: sh("echo X > README.md") },
      { id: "y", command: sh("echo Y > README.md") },
      { id: "joined", dependencies: ["x", "y"], command: sh(`touch ${marker}`) },
      { id: "after", dependencies: ["joined"] },
    ]);
    const before = userState(repo);
    const result = await termorch(["run", file], { socket });
    expect(result.exitCode).toBe(3);
    const report = readReport(dir);
    const byId = Object.fromEntries(report.tasks.map((t) => [t.id, t]));
    expect(byId.joined).toMatchObject({ status: "failed", reason: "conflict", attempts: 0 });
    expect(byId.after).toMatchObject({ status: "skipped", reason: "dependency_failed" });
    expect(existsSync(marker)).toBe(false);
    expect(report.summary.conflicts[0]).toMatchObject({ tasks: ["x", "y"], files: ["README.md"] });
    expect(userState(repo)).toBe(before);
  });

  it("leaves the workspace untouched when the run-level tests_cmd fails", async () => {
    const { dir, repo } = workspace();
    const file = writeAssignments(dir, [{ id: "A", env: { WRITE: "a.txt=A" } }], {
      success_criteria: { required_artifacts: ["a.txt"], tests_cmd: "echo checking; test -f does-not-exist" },
    });
    const before = userState(repo);
    const result = await termorch(["run", file], { socket });
    expect(result.exitCode).toBe(1);
    const report = readReport(dir);
    expect(report.summary.validation).toBe("failed");
    expect(report.merge.result).toBe("skipped");
    expect(report.merge.gates.map((g) => [g.name, g.passed])).toEqual([
      ["run.required_artifacts", true],
      ["run.tests_cmd", false],
    ]);
    const log = report.merge.gates[1]!.detail.match(/logs\/tests-\S+\.out/)![0];
    expect(readFileSync(join(dir, log), "utf8")).toBe("checking\n");
    expect(userState(repo)).toBe(before);
  });

  it("leaves the workspace untouched when a required artifact is missing, unless verify is off", async () => {
    const { dir, repo } = workspace();
    const file = writeAssignments(dir, [{ id: "A", env: { WRITE: "a.txt=A" } }], {
      success_criteria: { required_artifacts: ["dist/*.js"] },
    });
    const before = userState(repo);
    expect((await termorch(["run", file], { socket })).exitCode).toBe(1);
    const report = readReport(dir);
    expect(report.merge.gates[0]).toMatchObject({
      name: "run.required_artifacts",
      passed: false,
      detail: "missing: dist/*.js",
    });
    expect(userState(repo)).toBe(before);
    const again = await termorch(["run", file, "--no-verify", "--out", join(dir, "no-verify")], { socket });
    expect(again.exitCode).toBe(0);
    expect(readFileSync(join(repo, "a.txt"), "utf8")).toBe("A\n");
  });

  it("merges onto a target that moved during the run", async () => {
    const { dir, repo } = workspace();
    const gate = join(dir, "go");
    const file = writeAssignments(dir, [{ id: "A", env: { WRITE: "a.txt=A", WAIT_FILE: gate } }]);
    const run = termorch(["run", file], { socket });
    await waitFor(() => existsSync(join(dir, "status", "A.running")), 20_000, "A running");
    writeFileSync(join(repo, "user.txt"), "user work\n");
    git(repo, "add", "user.txt");
    git(
      repo,
      "-c",
      "user.name=u",
      "-c",
      "user.email=u@u",
      "commit",
      "-q",
      "-m",
      "user commit during the run",
    );
    const userCommit = git(repo, "rev-parse", "HEAD").trim();
    writeFileSync(gate, "");
    expect((await run).exitCode).toBe(0);
    const report = readReport(dir);
    expect(report.merge.result).toBe("success");
    expect(git(repo, "merge-base", "--is-ancestor", userCommit, "HEAD")).toBe("");
    expect(readFileSync(join(repo, "a.txt"), "utf8")).toBe("A\n");
    expect(readFileSync(join(repo, "user.txt"), "utf8")).toBe("user work\n");
    expect(git(repo, "status", "--porcelain")).toBe("");
  });

  it("refuses to merge when the moved target conflicts with the run", async () => {
    const { dir, repo } = workspace();
    const gate = join(dir, "go");
    const file = writeAssignments(dir, [{ id: "A", env: { WRITE: "README.md=from A", WAIT_FILE: gate } }]);
    const run = termorch(["run", file], { socket });
    await waitFor(() => existsSync(join(dir, "status", "A.running")), 20_000, "A running");
    writeFileSync(join(repo, "README.md"), "from the user\n");
    git(repo, "-c", "user.name=u", "-c", "user.email=u@u", "commit", "-q", "-am", "user edit");
    const before = userState(repo);
    writeFileSync(gate, "");
    expect((await run).exitCode).toBe(3);
    expect(readReport(dir).merge).toMatchObject({
      result: "conflict",
      conflicts: [{ tasks: ["A"], files: ["README.md"] }],
    });
    expect(userState(repo)).toBe(before);
  });

  it("rolls back to the old commit when the update fails after the ref moved", async () => {
    const { dir, repo } = workspace();
    const file = writeAssignments(dir, [{ id: "A", env: { WRITE: "a.txt=A" } }]);
    const before = userState(repo);
    const result = await termorch(["run", file], { socket, env: { TERMORCH_FAULT: "after-ref-update" } });
    expect(result.exitCode).toBe(1);
    const report = readReport(dir);
    expect(report.merge.result).toBe("rolled_back");
    expect(report.merge.reason).toMatch(/rolled back/);
    expect(userState(repo)).toBe(before);
  });

  it("with --allow-dirty never overwrites the user's uncommitted changes", async () => {
    const { dir, repo } = workspace();
    writeFileSync(join(repo, "README.md"), "uncommitted user edit\n");
    const file = writeAssignments(dir, [{ id: "A", env: { WRITE: "a.txt=A" } }]);
    expect((await termorch(["run", file, "--allow-dirty"], { socket })).exitCode).toBe(0);
    expect(readFileSync(join(repo, "README.md"), "utf8")).toBe("uncommitted user edit\n");
    expect(readFileSync(join(repo, "a.txt"), "utf8")).toBe("A\n");
  });
});
