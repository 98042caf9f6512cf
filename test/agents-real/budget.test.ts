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

/**
 * A model that never stops: every call writes another file, each billed 10,000 input tokens and
 * 10 output, answered after a model's think time.
 */
function loopingModel(): void {
  modelServer().setScript(
    Array.from({ length: 40 }, (_, i) => ({
      write: `loop-${i + 1}.txt`,
      content: `call ${i + 1}\n`,
      usage: { input: 10_000, output: 10 },
    })),
  );
  modelServer().setDelay(400);
}

/** Runs one looping task of `preset` under the run's budget `limits`, with the config's `prices`. */
async function runLooping(
  preset: "opencode" | "codex" | "gemini",
  limits: { max_tokens?: number; max_cost_usd?: number },
  prices: object = {},
) {
  const recipe = RECIPES[preset];
  loopingModel();
  const { dir, repo } = world.workspace();
  const config = join(dir, "termorch.json");
  writeFileSync(config, JSON.stringify({ agents: { [preset]: recipe.agent(modelServer().url) }, prices }));
  const file = join(dir, "assignments.json");
  writeFileSync(
    file,
    JSON.stringify({
      run_id: `loop-${preset}-${Math.random().toString(36).slice(2, 8)}`,
      tasks: [{ id: "L", agent: preset, context_path: "ctx/task.md", retries: 2, timeout_s: 240 }],
      environment: { workspace_dir: "repo", env_vars: [recipe.keyVar], resource_limits: limits },
    }),
  );
  const before = modelServer().mainRequests().length;
  const r = await world.termorch(["run", file, "--config", config], { env: { [recipe.keyVar]: SECRET } });
  modelServer().setDelay(0);
  const report = readReport(dir);
  return {
    r,
    report,
    task: report.tasks[0]!,
    calls: modelServer().mainRequests().length - before,
    repo,
    dir,
    env: { [recipe.keyVar]: SECRET },
  };
}

describe("the run's budget while an agent loops, from the usage its CLI reports as it goes", () => {
  it("opencode (its JSONL stream): ended within one call of crossing the budget in tokens", async () => {
    const { r, report, task, calls } = await runLooping("opencode", { max_tokens: 35_000 });
    expect(r.exitCode, `${r.stderr}\n${JSON.stringify(task, null, 2)}`).toBe(1);
    expect(task).toMatchObject({ status: "failed", reason: "budget", attempts: 1 });
    // The 4th call took it to 40,040: ended then, the 5th call at most under way.
    expect(task.detail).toMatch(
      /^the run's budget of 35,000 tokens is spent: 40,040; termorch ended its attempt at the budget$/,
    );
    expect(calls).toBeGreaterThanOrEqual(4);
    expect(calls).toBeLessThanOrEqual(5);
    expect(report.summary.budget).toMatchObject({ max_tokens: 35_000, exhausted: true });
    expect(report.summary.budget!.spent_tokens).toBeLessThan(35_000 + 2 * 10_010);
  });

  it("opencode: resumed with a raised budget, the task goes on in its worktree to a merge", async () => {
    const { dir, repo, env } = await runLooping("opencode", { max_tokens: 35_000 });
    modelServer().setScript([{ write: "done.txt", content: "done\n" }, { reply: "Done: wrote done.txt" }]);
    const r = await world.termorch(["resume", dir, "--max-tokens", "200000"], { env });
    const report = readReport(dir);
    const task = report.tasks[0]!;
    expect(r.exitCode, `${r.stderr}\n${JSON.stringify(task, null, 2)}`).toBe(0);
    expect(task).toMatchObject({ status: "success", attempts: 2 });
    expect(task.attempt_history!.map((h) => [h.reason, h.started_from])).toEqual([
      ["budget", null],
      [null, "last_work"],
    ]);
    expect(report.merge.result).toBe("success");
    // The first attempt's files, left where the budget stopped it, merged with the second's.
    expect(existsSync(join(repo, "loop-1.txt"))).toBe(true);
    expect(existsSync(join(repo, "done.txt"))).toBe(true);
  });

  it.each([
    ["codex", "its rollout"],
    ["gemini", "its chat file"],
  ] as const)(
    "%s (%s) under a budget in USD from the config's prices: ended within one call",
    async (preset, _source) => {
      const { r, report, task, calls } = await runLooping(
        preset,
        { max_cost_usd: 0.35 },
        { [preset]: { input: 10, output: 10 } },
      );
      expect(r.exitCode, `${r.stderr}\n${JSON.stringify(task, null, 2)}`).toBe(1);
      expect(task).toMatchObject({ status: "failed", reason: "budget", attempts: 1 });
      expect(task.detail).toMatch(
        /^the run's budget of \$0\.3500 is spent: \$0\.4\d+; termorch ended its attempt at the budget$/,
      );
      expect(calls).toBeLessThanOrEqual(5);
      expect(task.usage?.cost_source).toBe("prices");
      expect(report.summary.budget).toMatchObject({ exhausted: true });
    },
  );
});
