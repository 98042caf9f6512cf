import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import {
  git,
  lines,
  ROOT,
  readReport,
  termorch,
  testFile,
  worktreesInUse,
  writeAssignments,
} from "./harness.js";

const { socket, workspace } = testFile("merge-bisect-resume");
const AGENT = join(ROOT, "test", "fixtures", "agents", "gate-fix.sh");
const CHECK = `for f in *.txt; do
  if grep -qx BROKEN "$f"; then echo "check failed: $f says BROKEN" >&2; exit 1; fi
done
`;

/** Four tasks; c breaks the run-level gate and fixes itself once its prompt quotes the failure. */
function breaking() {
  const { dir, repo } = workspace();
  writeFileSync(join(repo, "check.sh"), CHECK);
  git(repo, "add", "-A");
  git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "the gate");
  const counter = join(dir, "counter");
  const task = (id: string, env: Record<string, string> = {}) => ({
    id,
    agent: "gate-fix",
    command: ["sh", AGENT],
    env: { TEXT: `${id} was here`, COUNTER: counter, ...env },
  });
  const file = writeAssignments(
    dir,
    [
      task("a"),
      task("b"),
      task("c", { TEXT: "BROKEN", FIXED_BY: "check failed: c.txt says BROKEN", FIX: "c was fixed" }),
      { ...task("d"), dependencies: ["c"] },
    ] as never,
    {
      success_criteria: { tests_cmd: "sh check.sh" },
      mode: { merge: { on_gate_failure: "bisect_and_fix" } },
    },
  );
  return { dir, repo, file, counter };
}

const ledger = (dir: string) =>
  readFileSync(join(dir, "events.jsonl"), "utf8")
    .trim()
    .split("\n")
    .map((l) => JSON.parse(l) as { type: string; data: Record<string, unknown> });

describe("a driver killed inside a bisect or a culprit's fix", () => {
  for (const point of [
    "kill-in-probe:0",
    "kill-in-probe:2",
    "kill-after-fix-recorded:c",
    "kill-after-redo-prepared:c",
    "kill-while-running:c@2",
    "kill-after-exit:c@2",
    "kill-in-probe:fix",
    "kill-after-status:c@2",
  ]) {
    it(`${point}: resume leaves no probe behind, judges no probe twice, runs no attempt twice, and merges`, async () => {
      const { dir, repo, file, counter } = breaking();
      const crashed = await termorch(["run", file], { socket, env: { TERMORCH_FAULT: point } });
      expect(crashed.exitCode).not.toBe(0);
      expect(existsSync(join(dir, "execution_report.json"))).toBe(false);
      const resumed = await termorch(["resume", dir], { socket });
      expect(resumed.stderr).not.toMatch(/internal/i);
      expect(resumed.exitCode).toBe(0);
      const report = readReport(dir);
      expect(report.merge).toMatchObject({ result: "success", culprit: { task: "c", fixed: true } });
      expect(report.merge.redone.map((r) => [r.task, r.cause, r.attempt, r.outcome])).toEqual([
        ["c", "gate", 2, "resolved"],
      ]);
      expect(readFileSync(join(repo, "c.txt"), "utf8")).toBe("c was fixed\n");
      expect(readFileSync(join(repo, "d.txt"), "utf8")).toBe("d was here\n");
      // Every attempt once: c's first and its fix.
      expect(lines(counter).sort()).toEqual(["a 1", "b 1", "c 1", "c 2", "d 1"]);
      // Each probe judged once across both drivers (the one the kill cut short never was).
      const probes = ledger(dir)
        .filter((e) => e.type === "merge.probe")
        .map((e) => e.data.k);
      expect(probes).toEqual([0, 2, 3]);
      expect(report.merge.bisects).toHaveLength(1);
      expect(report.merge.bisects[0]!.probes.map((p) => p.k)).toEqual([2, 3]);
      // No probe (nor fix check) left as a worktree or on a ref; nothing of the run is left.
      expect(worktreesInUse(repo)).toEqual([]);
      expect(git(repo, "for-each-ref", "refs/termorch/")).toBe("");
      expect(git(repo, "branch", "--list", "termorch/*")).toBe("");
      expect(git(repo, "status", "--porcelain")).toBe("");
    });
  }
});
