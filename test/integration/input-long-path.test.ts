import { describe, expect, it } from "vitest";
import { termorch, testFile, tmuxSessions, workspaceSnapshot, writeAssignments } from "./harness.js";

const { socket, workspace } = testFile("input-long-path");

// Found by the input campaign (test/reliability/input.mjs --long --seed 13, category "strings",
// fast-check seed 1817221301 path 810): a 1 MB context_path of "a/a/a/..." made validate and run
// look for the path's existing prefix one folder at a time, for hours.
describe("a path longer than the system allows: exit 2 at once, naming the field", () => {
  it("refuses a 1 MB context_path and worktree_include", async () => {
    const { dir, repo } = workspace();
    const long = "a/".repeat(262_144);
    const file = writeAssignments(dir, [{ id: "A", context_path: long }], {
      environment: { workspace_dir: "repo", worktree_include: [long] },
    });
    const before = workspaceSnapshot(repo);
    for (const command of ["validate", "run"]) {
      const r = await termorch([command, file], { socket, timeoutMs: 20_000 });
      expect(r.exitCode, r.stderr.slice(0, 500)).toBe(2);
      expect(r.stderr).toMatch(
        /field tasks\[0\]\.context_path, task A: is \d+ bytes long once resolved; paths are limited to 4095/,
      );
      expect(r.stderr).toMatch(/field environment\.worktree_include\[0\]: is \d+ bytes long/);
      expect(r.stderr).not.toMatch(/internal error|\n\s+at /);
    }
    expect(workspaceSnapshot(repo)).toBe(before);
    expect(tmuxSessions(socket)).toEqual([]);
  });
});
