import { existsSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { git, readReport, termorch, testFile, writeAssignments } from "./harness.js";

const { socket, workspace } = testFile("merge-index-lock");

describe("a resume that cannot bring the index to the moved target", () => {
  it("leaves the branch at the run's commit and says what to do; a later resume finishes the merge", async () => {
    const { dir, repo } = workspace();
    const base = git(repo, "rev-parse", "HEAD").trim();
    const file = writeAssignments(dir, [
      { id: "A", env: { WRITE: "a.txt=from A" } },
      { id: "B", env: { WRITE: "b.txt=from B" } },
    ]);
    // Killed right after the branch moved, before the index and work tree followed.
    const crashed = await termorch(["run", file], {
      socket,
      env: { TERMORCH_FAULT: "kill-after-ref-update" },
    });
    expect(crashed.exitCode).not.toBe(0);
    const moved = git(repo, "rev-parse", "HEAD").trim();
    expect(moved).not.toBe(base);
    // Another git process (the killed driver's own read-tree, say) still holds the index.
    const lock = join(repo, ".git", "index.lock");
    writeFileSync(lock, "");

    const blocked = await termorch(["resume", dir], { socket });
    expect(blocked.stderr).not.toMatch(/internal/i);
    expect(blocked.exitCode).toBe(1);
    const first = readReport(dir);
    expect(first.merge.result).toBe("failed");
    expect(first.merge.reason).toContain(`wait for the git process holding ${lock} to end`);
    expect(first.merge.reason).toContain(`termorch resume ${dir}`);
    expect(first.merge.reason).toContain(`git -C ${repo} reset --keep ${base}`);
    // Not moved back: under a branch at its old commit the index would hold the run's changes
    // once that git process ends.
    expect(git(repo, "rev-parse", "HEAD").trim()).toBe(moved);
    const runId = first.run_id!;
    expect(existsSync(join(dir, ".termorch", runId, "merge-intent.json"))).toBe(true);
    expect(JSON.parse(readFileSync(join(dir, "state.json"), "utf8")).phase).toBe("running");

    rmSync(lock);
    const resumed = await termorch(["resume", dir], { socket });
    expect(resumed.exitCode).toBe(0);
    const report = readReport(dir);
    expect(report.merge).toMatchObject({ result: "success", reason: null, result_commit: moved });
    expect(git(repo, "rev-parse", "HEAD").trim()).toBe(moved);
    expect(git(repo, "status", "--porcelain")).toBe("");
    expect(readFileSync(join(repo, "a.txt"), "utf8")).toBe("from A\n");
    expect(existsSync(join(dir, ".termorch", runId, "merge-intent.json"))).toBe(false);
    expect(JSON.parse(readFileSync(join(dir, "state.json"), "utf8")).phase).toBe("reported");
  });
});
