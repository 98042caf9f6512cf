import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { git, readReport, termorch, testFile, writeAssignments } from "./harness.js";

const { socket, workspace } = testFile("merge-redo-resume");
const RESOLVE = join(import.meta.dirname, "..", "fixtures", "agents", "resolve.mjs");

/** A and B change line 2 of f.txt: B is redone on top of A. `wrong`: B's redo drops A's line, and its gate says so. */
function conflicting(wrong: boolean) {
  const { dir, repo } = workspace();
  writeFileSync(join(repo, "f.txt"), "line1\nline2\nline3\n");
  git(repo, "add", "-A");
  git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "f");
  const counter = join(dir, "counter");
  const edit = (text: string) => JSON.stringify([{ set: "f.txt", line: 2, text }]);
  const file = writeAssignments(
    dir,
    [
      { id: "A", agent: "resolve", command: ["node", RESOLVE], env: { EDITS: edit("A"), COUNTER: counter } },
      {
        id: "B",
        agent: "resolve",
        command: ["node", RESOLVE],
        env: { EDITS: edit("B"), COUNTER: counter, ...(wrong ? { RESOLVE: "wrong" } : {}) },
        success_criteria: {
          tests_cmd: 'grep -qx B f.txt && { [ "$TERMORCH_ATTEMPT" = 1 ] || grep -qx A f.txt; }',
        },
      },
    ] as never,
    { mode: { merge: { on_conflict: "redo" } } },
  );
  return { dir, repo, file, counter };
}

describe("a driver killed inside a redo", () => {
  for (const point of [
    "kill-after-redo-recorded:B",
    "kill-after-redo-prepared:B",
    "kill-after-attempt-recorded:B@2",
    "kill-while-running:B@2",
    "kill-after-exit:B@2",
    "kill-in-gate:B@2",
    "kill-after-status:B@2",
  ]) {
    it(`${point}: resume goes on with the redo at its step, runs no attempt twice, and merges`, async () => {
      const { dir, repo, file, counter } = conflicting(false);
      const crashed = await termorch(["run", file], { socket, env: { TERMORCH_FAULT: point } });
      expect(crashed.exitCode).not.toBe(0);
      expect(existsSync(join(dir, "execution_report.json"))).toBe(false);
      const resumed = await termorch(["resume", dir], { socket });
      expect(resumed.stderr).not.toMatch(/internal/i);
      expect(resumed.exitCode).toBe(0);
      const report = readReport(dir);
      expect(report.merge).toMatchObject({ result: "success" });
      expect(report.merge.redone.map((r) => [r.task, r.redo, r.attempt, r.outcome])).toEqual([
        ["B", 1, 2, "resolved"],
      ]);
      expect(readFileSync(join(repo, "f.txt"), "utf8")).toBe("line1\nA\nB\nline3\n");
      // A once; B's first attempt and its redo, once each.
      expect(readFileSync(counter, "utf8").split("\n").filter(Boolean).sort()).toEqual([
        "A 1 first",
        "B 1 first",
        "B 2 redo",
      ]);
      expect(report.tasks.find((t) => t.id === "B")).toMatchObject({ status: "success", attempts: 2 });
      expect(git(repo, "status", "--porcelain")).toBe("");
    });
  }

  for (const point of ["kill-after-redo-restoring:B", "kill-while-running:B@2"]) {
    it(`a wrong resolution, ${point}: resume puts the earlier result back and halts`, async () => {
      const { dir, repo, file, counter } = conflicting(true);
      const head = git(repo, "rev-parse", "HEAD");
      const crashed = await termorch(["run", file], { socket, env: { TERMORCH_FAULT: point } });
      expect(crashed.exitCode).not.toBe(0);
      const resumed = await termorch(["resume", dir], { socket });
      expect(resumed.exitCode).toBe(3);
      const report = readReport(dir);
      const b = report.tasks.find((t) => t.id === "B")!;
      expect(report.merge.result).toBe("conflict");
      expect(report.merge.redone.map((r) => [r.task, r.outcome])).toEqual([["B", "failed"]]);
      expect(b).toMatchObject({ status: "success", commit: report.merge.redone[0]!.before_commit });
      expect(git(repo, "rev-parse", `termorch/${report.run_id}/B`).trim()).toBe(b.commit);
      expect(report.merge.redo_assignments).toEqual(["artifacts/redo/B.json"]);
      expect(git(repo, "rev-parse", "HEAD")).toBe(head);
      expect(readFileSync(counter, "utf8").split("\n").filter(Boolean)).toHaveLength(3);
    });
  }
});
