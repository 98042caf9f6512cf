// A merge conflict redone by a real agent CLI (mode.merge.on_conflict "redo"): two tasks, on the
// CLI pinned in test/agents-real/package.json, each change line 2 of one file to their own text
// through the CLI's own tools. B's result conflicts with A's, merged before it: termorch starts B
// again from A's result, its prompt carrying the conflict section, and the scripted model reads
// the section (A's hunk) and keeps both lines. The run-level tests, which want both, pass; the
// model server saw the section; the key reached no file of the run.
import { execFileSync } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { type CliRecipe, RECIPES, SECRET } from "./clis.js";
import { allText, readReport, realAgentsSuite, stringsOf } from "./harness.js";
import type { Script, Step } from "./model-server.js";

const { world, server: modelServer } = realAgentsSuite("redo");

const BASE = ["line 1", "line 2", "line 3", "line 4"];
const HEADING = "## Your earlier work conflicts with what was merged before it";
const file = (lines: string[]): string => lines.map((l) => `${l}\n`).join("");
const git = (repo: string, ...args: string[]): string =>
  execFileSync("git", ["-C", repo, ...args], { encoding: "utf8" });

/** The lines the other tasks added, from the section's "Their changes to the conflicting files" diff. */
function theirLines(prompt: string): string[] {
  const diff = /### Their changes to the conflicting files\n\n(`{3,})diff\n([\s\S]*?)\n\1\n/.exec(
    prompt,
  )?.[2];
  return (diff ?? "")
    .split("\n")
    .filter((l) => l.startsWith("+") && !l.startsWith("+++"))
    .map((l) => l.slice(1));
}

/**
 * The model of each task (EDIT-LINE <id> in its context): it reads shared.txt and writes it whole
 * with line 2 made "from <id>". Given a conflict section, it writes it with the lines the section
 * says were merged before it kept as line 2, and its own line under them.
 */
function editor(): Script {
  return (text) => {
    const task = /EDIT-LINE (\w+)/.exec(text)?.[1] ?? "unknown";
    const mine = `from ${task}`;
    // Read first: Claude Code writes over a file only once it was read.
    const read: Step = { read: "shared.txt" };
    if (text.includes("termorch-conflict")) {
      const theirs = theirLines(stringsOf(text));
      return [
        read,
        { write: "shared.txt", content: file([BASE[0]!, ...theirs, mine, ...BASE.slice(2)]) },
        { reply: `Resolved: kept ${theirs.join(", ")} and added ${mine} under it` },
      ];
    }
    return [
      read,
      { write: "shared.txt", content: file([BASE[0]!, mine, ...BASE.slice(2)]) },
      { reply: `Done: line 2 of shared.txt is now ${mine}` },
    ];
  };
}

/** A repository whose first commit holds shared.txt and the tasks' contexts, and the run's files beside it. */
function prepare(recipe: CliRecipe): { dir: string; repo: string; file: string } {
  const { dir, repo } = world.workspace();
  writeFileSync(join(repo, "shared.txt"), file(BASE));
  for (const id of ["A", "B"])
    writeFileSync(
      join(repo, "ctx", `${id}.md`),
      `Change line 2 of shared.txt to "from ${id}". EDIT-LINE ${id}\n`,
    );
  git(repo, "add", "-A");
  git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "shared");
  writeFileSync(
    join(dir, "termorch.json"),
    JSON.stringify({ agents: { [recipe.preset]: recipe.agent(modelServer().url) } }),
  );
  const assignments = join(dir, "assignments.json");
  writeFileSync(
    assignments,
    JSON.stringify({
      run_id: `redo-${recipe.preset}-${Math.random().toString(36).slice(2, 8)}`,
      tasks: ["A", "B"].map((id) => ({
        id,
        agent: recipe.preset,
        context_path: `ctx/${id}.md`,
        dependencies: [],
      })),
      // One at a time: two first starts of a CLI in a fresh HOME race on creating its database
      // (opencode's and kilo's: "CREATE TABLE `workspace`" fails). Both still start from the base,
      // so B's result conflicts with A's all the same.
      environment: { workspace_dir: "repo", env_vars: [recipe.keyVar], resource_limits: { max_parallel: 1 } },
      success_criteria: { tests_cmd: "grep -qx 'from A' shared.txt && grep -qx 'from B' shared.txt" },
      mode: { merge: { on_conflict: "redo" } },
    }),
  );
  return { dir, repo, file: assignments };
}

// One CLI of each wire protocol.
describe.each([RECIPES.claude, RECIPES.codex, RECIPES.gemini, RECIPES.opencode])(
  "$preset, headless, merge.on_conflict redo",
  (recipe) => {
    it("B's edit conflicts with A's: its redo starts from A's result with the conflict section, keeps both lines, and the run passes", async () => {
      modelServer().setScript(editor());
      const { dir, repo, file: assignments } = prepare(recipe);
      const before = modelServer().requests.length;
      const r = await world.termorch(["run", assignments, "--config", join(dir, "termorch.json")], {
        env: { [recipe.keyVar]: SECRET },
      });
      expect(r.exitCode, `${r.stderr}\n${readFileSync(join(dir, "execution_report.json"), "utf8")}`).toBe(0);
      const both = file([BASE[0]!, "from A", "from B", ...BASE.slice(2)]);
      expect(git(repo, "show", "main:shared.txt")).toBe(both);
      expect(readFileSync(join(repo, "shared.txt"), "utf8")).toBe(both);

      const report = readReport(dir);
      expect(report.merge).toMatchObject({ result: "success", on_conflict: "redo", conflicts: [] });
      expect(report.summary.validation).toBe("passed");
      expect(report.merge.redone).toHaveLength(1);
      const redo = report.merge.redone[0]!;
      expect(redo).toMatchObject({
        task: "B",
        redo: 1,
        attempt: 2,
        conflicted_with: ["A"],
        files: ["shared.txt"],
        outcome: "resolved",
      });
      const a = report.tasks.find((t) => t.id === "A")!;
      const b = report.tasks.find((t) => t.id === "B")!;
      // The redo started from A's result, and its result is B's.
      expect(redo.start_commit).toBe(a.commit);
      expect(redo.commit).toBe(b.commit);
      expect(b).toMatchObject({ status: "success", attempts: 2 });
      expect(b.agent_result?.summary).toBe("Resolved: kept from A and added from B under it");

      // B's second conversation carried the section: the heading, A's hunk, the block for tools.
      const requests = modelServer()
        .requests.slice(before)
        .filter((q) => q.main);
      const redone = requests.filter(
        (q) => q.text.includes("EDIT-LINE B") && q.text.includes("termorch-conflict"),
      );
      expect(redone.length).toBeGreaterThan(0);
      const prompt = stringsOf(redone[0]!.text);
      expect(prompt).toContain(HEADING);
      expect(prompt).toContain("### Their changes to the conflicting files");
      expect(prompt).toContain("+from A\n");
      expect(prompt).toContain("### Your earlier changes to them");
      expect(prompt).toContain("+from B\n");
      expect(prompt).toContain("```json termorch-conflict");
      // B's first conversation and A's had none.
      for (const id of ["A", "B"])
        expect(
          requests.some((q) => q.text.includes(`EDIT-LINE ${id}`) && !q.text.includes("termorch-conflict")),
        ).toBe(true);
      expect(
        requests.some((q) => q.text.includes("EDIT-LINE A") && q.text.includes("termorch-conflict")),
      ).toBe(false);

      const events = readFileSync(join(dir, "events.jsonl"), "utf8")
        .split("\n")
        .filter(Boolean)
        .map((l) => JSON.parse(l) as { type: string });
      const types = events.map((e) => e.type);
      expect(types.indexOf("merge.redo_started")).toBeGreaterThan(-1);
      expect(types.indexOf("merge.redo_finished")).toBeGreaterThan(types.indexOf("merge.redo_started"));

      // The key went to the CLI (the server saw it) and into no file of the run.
      expect(redone.at(-1)!.auth).toContain(SECRET);
      expect(allText(dir)).not.toContain(SECRET);
    });
  },
);
