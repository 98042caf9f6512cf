import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { execa } from "execa";
import { describe, expect, it } from "vitest";
import { stateOf } from "../fixtures/ops-helpers.js";
import {
  cliEnv,
  FAULTY_BIN,
  git,
  lines,
  ROOT,
  readReport,
  termorch,
  testFile,
  writeAssignments,
} from "./harness.js";

const { socket, workspace } = testFile("resume-prepare");

/**
 * A1 and A2 are independent; M starts from the merge of both (a merge commit termorch makes,
 * re-created with a new date on resume); N depends on M. The first process SIGKILLs itself at
 * `fault` while preparing M's worktree.
 */
async function crashWhilePreparingM(fault: string) {
  const ws = workspace();
  const { dir } = ws;
  const counter = join(dir, "starts");
  const file = writeAssignments(dir, [
    { id: "A1", env: { COUNTER: counter, WRITE: "a1.txt=A1" } },
    { id: "A2", env: { COUNTER: counter, WRITE: "a2.txt=A2" } },
    { id: "M", dependencies: ["A1", "A2"], env: { COUNTER: counter, WRITE: "m.txt=M" } },
    { id: "N", dependencies: ["M"], env: { COUNTER: counter, WRITE: "n.txt=N" } },
  ]);
  const first = await execa(process.execPath, [FAULTY_BIN, "run", file], {
    reject: false,
    cwd: ROOT,
    env: cliEnv(socket, { TERMORCH_FAULT: `${fault}:M` }),
  });
  expect(first.signal).toBe("SIGKILL");
  const state = stateOf(dir)!;
  expect(state.phase).toBe("running");
  const branch = `termorch/${state.run_id}/M`;
  expect(git(ws.repo, "branch", "--list", branch).trim()).not.toBe("");
  return { ...ws, counter, branch, runId: state.run_id };
}

describe("resume after a SIGKILL while a task's branch and worktree were being created", () => {
  for (const fault of ["after-branch-created", "after-worktree-added"]) {
    it(`${fault}: the leftovers are taken over and the run finishes`, async () => {
      const { dir, repo, counter } = await crashWhilePreparingM(fault);
      const resumed = await termorch(["resume", dir], { socket });
      const report = readReport(dir);
      expect(
        report.tasks.map((t) => [t.id, t.status, t.detail ?? null]),
        resumed.stderr,
      ).toEqual([
        ["A1", "success", null],
        ["A2", "success", null],
        ["M", "success", null],
        ["N", "success", null],
      ]);
      expect(resumed.exitCode).toBe(0);
      expect(report.merge.result).toBe("success");
      for (const f of ["a1.txt", "a2.txt", "m.txt", "n.txt"]) expect(existsSync(join(repo, f))).toBe(true);
      // Nothing ran twice.
      expect(lines(counter).sort()).toEqual(["A1", "A2", "M", "N"]);
      expect((await termorch(["verify-ledger", dir], { socket })).exitCode).toBe(0);
    });
  }

  it("a branch of that name holding other commits is not a leftover: left alone, the task fails saying why", async () => {
    const { dir, repo, counter, branch } = await crashWhilePreparingM("after-branch-created");
    // Someone commits on the branch while termorch is down.
    const tree = git(repo, "rev-parse", `${branch}^{tree}`).trim();
    const theirs = git(
      repo,
      "-c",
      "user.name=u",
      "-c",
      "user.email=u@u",
      "commit-tree",
      tree,
      "-p",
      branch,
      "-m",
      "theirs",
    ).trim();
    git(repo, "update-ref", `refs/heads/${branch}`, theirs);
    const resumed = await termorch(["resume", dir], { socket });
    expect(resumed.exitCode).toBe(1);
    const m = readReport(dir).tasks.find((t) => t.id === "M")!;
    expect(m).toMatchObject({ status: "failed", reason: "launch_error" });
    expect(m.detail).toMatch(/holds commits beyond the task's start.*left alone/);
    expect(readReport(dir).tasks.find((t) => t.id === "N")!.status).toBe("skipped");
    expect(git(repo, "rev-parse", branch).trim()).toBe(theirs);
    expect(lines(counter).sort()).toEqual(["A1", "A2"]);
    expect(readFileSync(join(dir, "execution_report.json"), "utf8")).not.toContain(
      "reference already exists",
    );
  });
});
