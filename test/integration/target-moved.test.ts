import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { git, readReport, termorch, testFile, waitFor, writeAssignments } from "./harness.js";

const { socket, workspace } = testFile("target-moved");

/** Starts a run whose task A waits for a go file, lets the user commit `user.txt` meanwhile, then lets A finish. */
async function runWhileUserCommits(testsCmd: string) {
  const { dir, repo } = workspace();
  const base = git(repo, "rev-parse", "HEAD").trim();
  const go = join(dir, "go");
  const file = writeAssignments(dir, [{ id: "A", env: { WRITE: "a.txt=A", WAIT_FILE: go } }], {
    success_criteria: { tests_cmd: testsCmd },
  });
  const run = termorch(["run", file], { socket });
  await waitFor(() => existsSync(join(dir, "status", "A.running")), 20_000, "A running");
  writeFileSync(join(repo, "user.txt"), "user work\n");
  git(repo, "add", "user.txt");
  git(repo, "-c", "user.name=u", "-c", "user.email=u@u", "commit", "-q", "-m", "user commit during the run");
  const userCommit = git(repo, "rev-parse", "HEAD").trim();
  writeFileSync(go, "");
  const result = await run;
  return { dir, repo, base, userCommit, result, report: readReport(dir) };
}

describe("the user's branch moves during a run", () => {
  it("runs the run-level gates on the exact commit the branch ends at, and says the target moved", async () => {
    // Passes only where both the run's and the user's work are present.
    const { repo, base, userCommit, result, report } = await runWhileUserCommits(
      "test -f a.txt && test -f user.txt",
    );
    expect(result.exitCode).toBe(0);
    expect(report.summary.validation).toBe("passed");
    expect(report.merge).toMatchObject({
      result: "success",
      base_commit: base,
      target_moved: true,
      target_moved_to: userCommit,
      // The user's commit is not taken for an agent's move.
      refs_changed: [],
    });
    const head = git(repo, "rev-parse", "HEAD").trim();
    expect(report.merge.result_commit).toBe(head);
    expect(report.merge.validated_commit).toBe(head);
    expect(report.merge.gates).toEqual([expect.objectContaining({ name: "run.tests_cmd", passed: true })]);
    expect(git(repo, "merge-base", "--is-ancestor", userCommit, "HEAD")).toBe("");
    expect(readFileSync(join(repo, "a.txt"), "utf8")).toBe("A\n");
    expect(git(repo, "status", "--porcelain")).toBe("");
  });

  it("does not merge when the gates fail on the merge onto the new tip, though they passed on the run's own result", async () => {
    // Passes on the run's integration commit, fails once the user's commit is in.
    const { repo, userCommit, result, report } = await runWhileUserCommits("test ! -e user.txt");
    expect(result.exitCode).toBe(1);
    expect(report.summary.validation).toBe("failed");
    expect(report.summary.completed).toBe(false);
    expect(report.merge.result).toBe("skipped");
    expect(report.merge.reason).toMatch(
      /run-level validation failed on the merge onto the moved refs\/heads\/main/,
    );
    expect(report.merge.target_moved).toBe(true);
    expect(report.merge.target_moved_to).toBe(userCommit);
    expect(report.merge.validated_commit).toBe(report.merge.result_commit);
    expect(report.merge.validated_commit).not.toBe(userCommit);
    expect(git(repo, "merge-base", "--is-ancestor", userCommit, report.merge.validated_commit!)).toBe("");
    expect(report.merge.gates).toEqual([expect.objectContaining({ name: "run.tests_cmd", passed: false })]);
    // The user's branch stays where the user put it.
    expect(git(repo, "rev-parse", "HEAD").trim()).toBe(userCommit);
    expect(existsSync(join(repo, "a.txt"))).toBe(false);
    expect(git(repo, "status", "--porcelain")).toBe("");
  });

  it("a run whose target did not move says so", async () => {
    const { dir, repo } = workspace();
    const file = writeAssignments(dir, [{ id: "A", env: { WRITE: "a.txt=A" } }], {
      success_criteria: { tests_cmd: "test -f a.txt" },
    });
    expect((await termorch(["run", file], { socket })).exitCode).toBe(0);
    const report = readReport(dir);
    expect(report.merge).toMatchObject({ result: "success", target_moved: false, target_moved_to: null });
    expect(report.merge.validated_commit).toBe(git(repo, "rev-parse", "HEAD").trim());
  });
});
