import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { git, readReport, termorch, testFile, waitFor, writeAssignments } from "./harness.js";

const { socket, workspace } = testFile("refs-snapshot");

describe("the refs are listed together with the run's base commit", () => {
  it("a commit of the user's made right after the base commit was read is merged onto, not refused", async () => {
    const { dir, repo } = workspace();
    const base = git(repo, "rev-parse", "HEAD").trim();
    const file = writeAssignments(dir, [{ id: "A", env: { WRITE: "a.txt=A" } }]);
    // The driver stops after inspecting the workspace (the base commit is read), before the run starts.
    const run = termorch(["run", file], { socket, env: { TERMORCH_FAULT: "pause-before-drive" } });
    await waitFor(() => existsSync(join(dir, "fault-paused")), 20_000, "the driver to pause");
    writeFileSync(join(repo, "user.txt"), "user work\n");
    git(repo, "add", "user.txt");
    git(repo, "-c", "user.name=u", "-c", "user.email=u@u", "commit", "-q", "-m", "user commit");
    const userCommit = git(repo, "rev-parse", "HEAD").trim();
    // Reflog times are whole seconds: the run goes on only once the clock is past the commit's
    // second, so a list of refs taken from here on is certainly later than the commit.
    const reflog = readFileSync(join(repo, ".git", "logs", "HEAD"), "utf8")
      .trim()
      .split("\n")
      .pop()!;
    const committedAt = Number(/> (\d+) [-+]\d{4}\t/.exec(reflog)![1]);
    await waitFor(() => Math.floor(Date.now() / 1000) > committedAt, 5_000, "the next second");
    writeFileSync(join(dir, "fault-continue"), "");

    const result = await run;
    expect(result.exitCode).toBe(0);
    const report = readReport(dir);
    expect(report.merge).toMatchObject({
      result: "success",
      base_commit: base,
      target_moved: true,
      target_moved_to: userCommit,
      refs_changed: [],
    });
    expect(git(repo, "merge-base", "--is-ancestor", userCommit, "HEAD")).toBe("");
    expect(readFileSync(join(repo, "a.txt"), "utf8")).toBe("A\n");
    expect(git(repo, "status", "--porcelain")).toBe("");
  });
});
