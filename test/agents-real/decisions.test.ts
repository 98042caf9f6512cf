// The agent's decision (issue 36, item 4) written by a real agent CLI through its own edit tool,
// at the path termorch names in its prompt ($TERMORCH_DECISION): one run per CLI with a task
// that decides `blocked` and asks for a person (its dependent is skipped), one that writes an
// invalid envelope (quarantined), and one that decides `escalate_to_max` (the next agent of its
// escalation list, the same CLI under another entry, is told the reason and notes and does the work).
import { execFileSync } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { type CliRecipe, RECIPES, SECRET } from "./clis.js";
import { allText, readReport, realAgentsSuite } from "./harness.js";
import type { Step } from "./model-server.js";

const { world, server: modelServer } = realAgentsSuite("decisions");

const git = (repo: string, ...args: string[]): string =>
  execFileSync("git", ["-C", repo, ...args], { encoding: "utf8" });

const BLOCKED_REASON = "the API shape needs the product owner's call";
const ESCALATE_REASON = "the parser rewrite is beyond a small model";
const ESCALATE_NOTES = "start from src/parse.ts; the grammar is in docs/grammar.md";

/** Where the prompt says the decision goes (the model takes it from the request, as an agent would). */
function decisionPathIn(text: string): string {
  const path = /decision about your work to (\/[^\s"\\]+) \(also in \$TERMORCH_DECISION\)/.exec(text)?.[1];
  if (!path) throw new Error("the prompt names no decision file");
  return path;
}

/** The model of each task, by the marker in its context. */
function decider(text: string): Step[] {
  if (text.includes("DECIDE-ESCALATE") && text.includes("## What went wrong in attempt 1"))
    return [{ write: "E.txt", content: "done by the stronger agent\n" }, { reply: "Done: wrote E.txt" }];
  const envelope = text.includes("DECIDE-BLOCKED")
    ? {
        schema_version: "1.1",
        decision: { status: "blocked", reason: BLOCKED_REASON, confidence: 0.8 },
        trace: {
          claim: "two specs disagree",
          evidence: [{ type: "file", ref: "README.md", note: "says v1" }],
        },
        routing: { recommended_next_actor: "human", urgency: "high" },
      }
    : text.includes("DECIDE-ESCALATE")
      ? {
          status: "escalate_to_max",
          reason: ESCALATE_REASON,
          confidence: 0.3,
          trace: { claim: "not attempted", evidence: [] },
          result: { output: "", notes: ESCALATE_NOTES },
        }
      : // DECIDE-INVALID: a status of its own and an empty claim.
        {
          decision: { status: "done", reason: "finished", confidence: 0.9 },
          trace: { claim: "", evidence: [] },
        };
  return [
    { write: decisionPathIn(text), content: `${JSON.stringify(envelope, null, 2)}\n` },
    { reply: "I wrote my decision." },
  ];
}

function prepare(recipe: CliRecipe): { dir: string; repo: string; file: string } {
  const { dir, repo } = world.workspace();
  const contexts: Record<string, string> = {
    X: "Implement the API. DECIDE-BLOCKED\n",
    I: "Tidy the README. DECIDE-INVALID\n",
    E: "Rewrite the parser. DECIDE-ESCALATE\n",
  };
  for (const [id, context] of Object.entries(contexts)) writeFileSync(join(repo, "ctx", `${id}.md`), context);
  const entry = recipe.agent(modelServer().url);
  writeFileSync(
    join(dir, "termorch.json"),
    JSON.stringify({ agents: { [recipe.preset]: entry, stronger: { ...entry, preset: recipe.preset } } }),
  );
  const file = join(dir, "assignments.json");
  const task = (id: string, extra: object = {}) => ({
    id,
    agent: recipe.preset,
    context_path: `ctx/${id}.md`,
    dependencies: [],
    ...extra,
  });
  writeFileSync(
    file,
    JSON.stringify({
      run_id: `${recipe.preset}-${Math.random().toString(36).slice(2, 8)}`,
      tasks: [
        task("X", { retries: 1 }),
        { ...task("S", { dependencies: ["X"] }), context_path: "ctx/task.md" },
        task("I", { retries: 1 }),
        task("E", { escalation: ["stronger"] }),
      ],
      // One CLI at a time: two first starts of a CLI in a fresh HOME may race (opencode's database).
      environment: { workspace_dir: "repo", env_vars: [recipe.keyVar], resource_limits: { max_parallel: 1 } },
    }),
  );
  return { dir, repo, file };
}

describe.each([RECIPES.claude, RECIPES.codex, RECIPES.gemini, RECIPES.opencode])(
  "$preset writes its decision with its edit tool",
  (recipe) => {
    it("blocked (a person asked for), invalid (quarantined) and escalate_to_max (the stronger agent told why)", async () => {
      modelServer().setScript(decider);
      const { dir, repo, file } = prepare(recipe);
      const before = modelServer().requests.length;
      const r = await world.termorch(["run", file, "--config", join(dir, "termorch.json")], {
        env: { [recipe.keyVar]: SECRET },
      });
      const report = readReport(dir);
      expect(r.exitCode, `${r.stderr}\n${JSON.stringify(report.tasks, null, 2)}`).toBe(1);
      const task = (id: string) => report.tasks.find((t) => t.id === id)!;

      // Blocked, asking for a person: one attempt despite its retry, its dependent skipped.
      expect(task("X")).toMatchObject({
        status: "failed",
        reason: "blocked",
        attempts: 1,
        needs_human: true,
      });
      expect(task("X").detail).toContain(BLOCKED_REASON);
      expect(task("S")).toMatchObject({ status: "skipped", reason: "dependency_failed" });
      expect(task("X").attempt_history?.[0]?.decision).toMatchObject({
        status: "blocked",
        recommended_next_actor: "human",
        file: "artifacts/X/attempt-1/decision.json",
      });
      const status = await world.termorch(["status", dir]);
      expect(status.stdout).toContain(
        `X: blocked, needs a person: its agent says it is blocked: ${BLOCKED_REASON}`,
      );

      // Invalid: blocked with invalid_decision, the problems named, the bytes quarantined.
      expect(task("I")).toMatchObject({ status: "failed", reason: "invalid_decision", attempts: 1 });
      expect(task("I")).not.toHaveProperty("needs_human");
      expect(task("I").detail).toContain("decision.status: Invalid option");
      expect(task("I").detail).toContain("trace.claim: claim is empty");
      const quarantined = readFileSync(join(dir, "artifacts/I/attempt-1/decision.quarantined.json"), "utf8");
      expect(JSON.parse(quarantined)).toMatchObject({ decision: { status: "done" } });

      // Escalated: the stronger agent ran attempt 2, its request carried the reason and notes, its work merged.
      expect(task("E")).toMatchObject({ status: "success", attempts: 2 });
      expect(task("E").attempt_history?.map((h) => [h.agent, h.decision?.status ?? null])).toEqual([
        [recipe.preset, "escalate_to_max"],
        ["stronger", null],
      ]);
      const told = modelServer()
        .requests.slice(before)
        .find(
          (q) =>
            q.main && q.text.includes("DECIDE-ESCALATE") && q.text.includes("What went wrong in attempt 1"),
        );
      expect(told?.text).toContain(ESCALATE_REASON);
      expect(told?.text).toContain(ESCALATE_NOTES);
      // Nothing is merged while X and I failed: its work is on its branch.
      expect(git(repo, "show", `${task("E").commit}:E.txt`)).toBe("done by the stronger agent\n");

      // The decisions are scratch: none reached a commit. The metrics count them.
      for (const id of ["X", "I", "E"]) {
        const commit = task(id).commit;
        if (commit) expect(git(repo, "ls-tree", "-r", "--name-only", commit)).not.toContain(".termorch");
      }
      expect(report.summary.metrics?.attempts).toMatchObject({
        total: 4,
        with_decision: 3,
        escalated: 1,
        blocked: 1,
        invalid: 1,
        succeeded_after_feedback: 1,
      });
      expect(allText(dir)).not.toContain(SECRET);
    });
  },
);
