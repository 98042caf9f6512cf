import { existsSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { execa } from "execa";
import { describe, expect, it } from "vitest";
import { cliEnv, FAULTY_BIN, git, readReport, testFile, waitFor, writeAssignments } from "./harness.js";

const { socket, workspace } = testFile("merge-index-held");

// Another git process holding the user's index at merge time (a concurrent run's merge into the
// same repository, an editor's git) made the refresh before the merge exit 128, which ended the
// run as an internal error (exit 70) instead of an unmerged result naming the lock.
describe("a merge that finds the user's index held by another git process", () => {
  it("is refused with a reason naming the lock; the branch is left as it was", async () => {
    const { dir, repo } = workspace();
    const base = git(repo, "rev-parse", "HEAD").trim();
    const file = writeAssignments(dir, [{ id: "A", env: { WRITE: "a.txt=from A" } }]);
    const run = execa(process.execPath, [FAULTY_BIN, "run", file], {
      reject: false,
      env: cliEnv(socket, { TERMORCH_FAULT: "pause-before-merge" }),
      timeout: 120_000,
    });
    await waitFor(() => existsSync(join(dir, "fault-paused")), 60_000, "the pause before the merge");
    const lock = join(repo, ".git", "index.lock");
    writeFileSync(lock, "");
    writeFileSync(join(dir, "fault-continue"), "");
    const r = await run;
    rmSync(lock);
    expect(r.stderr).not.toMatch(/internal/i);
    expect(r.exitCode).toBe(1);
    const report = readReport(dir);
    expect(report.merge.result).toBe("failed");
    expect(report.merge.reason).toContain("index.lock");
    expect(git(repo, "rev-parse", "HEAD").trim()).toBe(base);
    expect(git(repo, "status", "--porcelain")).toBe("");
  });
});
