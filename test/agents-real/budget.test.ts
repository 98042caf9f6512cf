// Budgets (issue 37) through the real Claude Code: termorch gives its own --max-budget-usd what a
// task's budget leaves, the CLI stops within a model call of it (after the first, here, which
// the scripted model bills at a million input tokens), and the task fails with reason budget,
// its usage counted from the result's modelUsage (the CLI zeroes `usage` when it stops so).
import { existsSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { RECIPES, SECRET } from "./clis.js";
import { readReport, realAgentsSuite } from "./harness.js";

const { world, server: modelServer } = realAgentsSuite("budget");

describe("claude's own spending cap, set from the task's budget", () => {
  it("stops the CLI after the call that spent it; the task fails with reason budget, not retried, its usage kept", async () => {
    const recipe = RECIPES.claude;
    modelServer().setScript(() => [
      { write: "B.txt", content: "too dear\n", usage: { input: 1_000_000, output: 10 } },
      { reply: "Done: wrote B.txt" },
    ]);
    const { dir, repo } = world.workspace();
    writeFileSync(
      join(dir, "termorch.json"),
      JSON.stringify({ agents: { claude: recipe.agent(modelServer().url) } }),
    );
    const file = join(dir, "assignments.json");
    writeFileSync(
      file,
      JSON.stringify({
        run_id: `budget-${Math.random().toString(36).slice(2, 8)}`,
        tasks: [
          {
            id: "B",
            agent: "claude",
            context_path: "ctx/task.md",
            retries: 2,
            budget: { max_cost_usd: 0.5 },
          },
        ],
        environment: { workspace_dir: "repo", env_vars: [recipe.keyVar] },
      }),
    );
    const before = modelServer().requests.length;
    const r = await world.termorch(["run", file, "--config", join(dir, "termorch.json")], {
      env: { [recipe.keyVar]: SECRET },
    });
    const report = readReport(dir);
    const task = report.tasks[0]!;
    expect(r.exitCode, `${r.stderr}\n${JSON.stringify(task, null, 2)}`).toBe(1);
    expect(task).toMatchObject({ status: "failed", reason: "budget", attempts: 1 });
    expect(task.detail).toContain(
      "its CLI stopped at the budget it was given: Reached maximum budget ($0.5)",
    );
    // What it spent, from modelUsage: the million tokens of the call it made.
    expect(task.usage!.input_tokens).toBeGreaterThanOrEqual(1_000_000);
    expect(task.usage!.cost_usd).toBeGreaterThan(0.5);
    expect(task.usage!.cost_source).toBe("cli");
    // One model call: the CLI checked its cap before running the tool the call asked for.
    const calls = modelServer()
      .requests.slice(before)
      .filter((q) => q.protocol === "anthropic" && q.method === "POST");
    expect(calls.length).toBeGreaterThanOrEqual(1);
    expect(existsSync(join(repo, "B.txt"))).toBe(false);
  });
});
