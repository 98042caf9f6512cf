import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { describeWith } from "../needs.js";
import { git, readReport, termorch, testFile, writeAssignments } from "./harness.js";

// The agent's decision at $TERMORCH_DECISION (issue 36, item 4) with real git, tmux and
// bubblewrap: in a git workspace it is .termorch/decision.json in the task's worktree, which the
// agent (sandboxed too) can write and termorch never commits.
const { socket, workspace } = testFile("decision");

const BLOCKED = JSON.stringify({
  decision: { status: "blocked", reason: "needs the product owner's call on the API shape", confidence: 0.7 },
  trace: { claim: "two incompatible specs", evidence: [{ type: "file", ref: "spec.md" }] },
  routing: { recommended_next_actor: "human" },
});
const COMPLETED = JSON.stringify({
  status: "completed",
  reason: "done",
  confidence: 0.9,
  trace: { claim: "wrote out.txt", evidence: [{ type: "file", ref: "out.txt" }] },
});

/** An agent that writes `envelope` where its environment says (a real CLI's edit tool would), and out.txt. */
function agent(envelope: string): string[] {
  return [
    "bash",
    "-c",
    'test "$TERMORCH_DECISION" = "$PWD/.termorch/decision.json" || exit 9; printf %s "$1" > "$TERMORCH_DECISION"; echo work > out.txt',
    "agent",
    envelope,
  ];
}

describe("the agent's decision in a git workspace", () => {
  it("is kept per attempt and never committed; a completed one lets the gates decide", async () => {
    const ws = workspace();
    const file = writeAssignments(ws.dir, [{ id: "a", command: agent(COMPLETED), expect_changes: true }]);
    const r = await termorch(["run", file], { socket });
    expect(r.exitCode, r.stderr).toBe(0);
    const report = readReport(ws.dir);
    expect(report.tasks[0]).toMatchObject({ status: "success" });
    expect(report.tasks[0]!.attempt_history?.[0]?.decision).toMatchObject({
      status: "completed",
      file: "artifacts/a/attempt-1/decision.json",
    });
    expect(
      JSON.parse(readFileSync(join(ws.dir, "artifacts/a/attempt-1/decision.json"), "utf8")),
    ).toMatchObject({
      decision: { status: "completed", reason: "done" },
    });
    // Merged: its work, not its decision.
    expect(git(ws.repo, "ls-files")).toContain("out.txt");
    expect(git(ws.repo, "ls-files")).not.toContain(".termorch");
    expect(readFileSync(join(ws.dir, "artifacts/a/changes.patch"), "utf8")).not.toContain("decision");
  });

  it("blocked, asking for a person: the task fails at once, its dependent is skipped, status says a person is needed", async () => {
    const ws = workspace();
    const file = writeAssignments(ws.dir, [
      { id: "a", command: agent(BLOCKED), retries: 2 },
      { id: "b", dependencies: ["a"] },
    ]);
    const r = await termorch(["run", file], { socket });
    expect(r.exitCode).toBe(1);
    const report = readReport(ws.dir);
    expect(report.tasks.map((t) => [t.id, t.status, t.reason, t.attempts])).toEqual([
      ["a", "failed", "blocked", 1],
      ["b", "skipped", "dependency_failed", 0],
    ]);
    expect(report.tasks[0]!.needs_human).toBe(true);
    // Nothing of the task is merged; the decision was consumed in its worktree.
    expect(existsSync(join(ws.repo, "out.txt"))).toBe(false);
    const status = await termorch(["status", ws.dir], { socket });
    expect(status.stdout).toContain(
      "a: blocked, needs a person: its agent says it is blocked: needs the product owner's call on the API shape",
    );
  });
});

describeWith("bwrap", "test/integration/decision.test.ts (sandboxed)")(
  "the agent's decision in the sandbox",
  () => {
    it("is written by a sandboxed agent and read by termorch", async () => {
      const ws = workspace();
      const file = writeAssignments(ws.dir, [
        { id: "a", command: agent(BLOCKED), sandbox: { network: "none" } },
      ]);
      const r = await termorch(["run", file], { socket });
      expect(r.exitCode).toBe(1);
      const report = readReport(ws.dir);
      expect(report.tasks[0]).toMatchObject({ status: "failed", reason: "blocked", needs_human: true });
      expect(existsSync(join(ws.dir, "artifacts/a/attempt-1/decision.json"))).toBe(true);
    });
  },
);
