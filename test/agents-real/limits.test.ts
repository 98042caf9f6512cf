// Rate limits through the real CLIs (issue 37): a 429 that Claude Code gives up on hands the
// attempt to the task's fallback agent (codex) at once, and a later task of claude starts on
// codex too while claude's limit has not lifted; both merge.
import { existsSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { RECIPES, SECRET } from "./clis.js";
import { perTask, readReport, realAgentsSuite } from "./harness.js";

const { world, server: modelServer } = realAgentsSuite("limits");

describe("a rate limit's fallback, through the real CLIs", () => {
  it("claude's 429 moves the attempt to codex; a later claude task starts on codex while claude is limited", async () => {
    const claude = RECIPES.claude;
    const codex = RECIPES.codex;
    modelServer().setScript(perTask);
    // The first model request (claude's) is refused; claude gives up at once (CLAUDE_CODE_MAX_RETRIES=0).
    modelServer().failFirst(1, {
      fail: 429,
      message: "This request would exceed the rate limit.",
      retryAfter: "60",
    });
    const { dir, repo } = world.workspace();
    writeFileSync(join(repo, "ctx", "A.md"), "WRITE-FILE A\n");
    writeFileSync(join(repo, "ctx", "B.md"), "WRITE-FILE B\n");
    writeFileSync(
      join(dir, "termorch.json"),
      JSON.stringify({
        agents: { claude: claude.agent(modelServer().url), codex: codex.agent(modelServer().url) },
      }),
    );
    const rateLimit = { on: "fallback", fallback: ["codex"] };
    const file = join(dir, "assignments.json");
    writeFileSync(
      file,
      JSON.stringify({
        run_id: `limits-${Math.random().toString(36).slice(2, 8)}`,
        tasks: [
          { id: "A", agent: "claude", context_path: "ctx/A.md", rate_limit: rateLimit },
          { id: "B", agent: "claude", context_path: "ctx/B.md", dependencies: ["A"], rate_limit: rateLimit },
        ],
        environment: { workspace_dir: "repo", env_vars: [claude.keyVar, codex.keyVar] },
      }),
    );
    const before = modelServer().requests.length;
    const r = await world.termorch(["run", file, "--config", join(dir, "termorch.json")], {
      env: { [claude.keyVar]: SECRET, [codex.keyVar]: SECRET },
    });
    const report = readReport(dir);
    expect(r.exitCode, `${r.stderr}\n${JSON.stringify(report.tasks, null, 2)}`).toBe(0);
    const [a, b] = report.tasks;
    expect(a!.attempt_history!.map((h) => [h.agent, h.reason, h.fallback_for])).toEqual([
      ["claude", "rate_limited", null],
      ["codex", null, "claude"],
    ]);
    expect(b!.attempt_history!.map((h) => [h.agent, h.fallback_for])).toEqual([["codex", "claude"]]);
    expect(report.merge.result).toBe("success");
    expect(existsSync(join(repo, "A.txt")) && existsSync(join(repo, "B.txt"))).toBe(true);
    // claude was asked once: the refused request; everything after went to codex.
    const main = modelServer()
      .requests.slice(before)
      .filter((q) => q.main);
    expect(main.filter((q) => q.protocol === "anthropic" && !q.path.endsWith("count_tokens"))).toHaveLength(
      1,
    );
  });
});

describe("a usage cap in its provider's words, through the real CLIs", () => {
  const capped = async (preset: "codex" | "gemini" | "qwen", body: unknown) => {
    const recipe = RECIPES[preset];
    modelServer().setScript(perTask);
    modelServer().failFirst(1000, { fail: 429, message: "", body });
    const { dir } = world.workspace();
    writeFileSync(
      join(dir, "termorch.json"),
      JSON.stringify({ agents: { [preset]: recipe.agent(modelServer().url) } }),
    );
    const file = join(dir, "assignments.json");
    writeFileSync(
      file,
      JSON.stringify({
        run_id: `cap-${preset}-${Math.random().toString(36).slice(2, 8)}`,
        tasks: [{ id: "U", agent: preset, context_path: "ctx/task.md", rate_limit: { on: "fail" } }],
        environment: { workspace_dir: "repo", env_vars: [recipe.keyVar] },
      }),
    );
    const r = await world.termorch(["run", file, "--config", join(dir, "termorch.json")], {
      env: { [recipe.keyVar]: SECRET },
    });
    modelServer().failFirst(0, { fail: 429, message: "" });
    const task = readReport(dir).tasks[0]!;
    expect(r.exitCode, `${r.stderr}\n${JSON.stringify(task, null, 2)}`).toBe(1);
    return task;
  };

  it("codex: 'You’ve hit your usage limit', told apart from a rate limit, with the time it lifts", async () => {
    const task = await capped("codex", {
      error: {
        type: "usage_limit_reached",
        message: "The usage limit has been reached",
        plan_type: "plus",
        resets_at: Math.floor(Date.now() / 1000) + 7200,
        resets_in_seconds: 7200,
      },
    });
    expect(task).toMatchObject({ status: "failed", reason: "rate_limited" });
    expect(task.detail).toMatch(
      /^its CLI gave up on a usage cap, which lifts at \S+: You’ve hit your usage limit/,
    );
    // Its reset, to the minute codex says it in (its local time).
    const lifts = Date.parse(task.attempt_history![0]!.resets_at!);
    expect(Math.abs(lifts - (Date.now() + 7_200_000))).toBeLessThan(5 * 60_000);
  });

  it("gemini: 'You have exhausted your daily quota', told apart from a rate limit", async () => {
    const task = await capped("gemini", {
      error: {
        code: 429,
        message:
          "Quota exceeded for quota metric 'Generate Content API requests per day' and limit 'GenerateRequestsPerDayPerProjectPerModel-FreeTier'.",
        status: "RESOURCE_EXHAUSTED",
        details: [
          {
            "@type": "type.googleapis.com/google.rpc.QuotaFailure",
            violations: [
              {
                quotaMetric: "generativelanguage.googleapis.com/generate_content_free_tier_requests",
                quotaId: "GenerateRequestsPerDayPerProjectPerModel-FreeTier",
              },
            ],
          },
        ],
      },
    });
    expect(task).toMatchObject({ status: "failed", reason: "rate_limited" });
    expect(task.detail).toMatch(/^its CLI gave up on a usage cap \(429\)/);
  });

  it("qwen: a quota its provider says is exceeded until a reset ('Quota exhausted:'), at once, not retried for minutes", async () => {
    const started = Date.now();
    const task = await capped("qwen", {
      error: {
        message: "You exceeded your current quota. Your quota will reset at 00:00 UTC.",
        type: "insufficient_quota",
        code: "insufficient_quota",
        param: null,
      },
    });
    expect(task).toMatchObject({ status: "failed", reason: "rate_limited" });
    expect(task.detail).toMatch(/^its CLI gave up on a usage cap.*Quota exhausted:/);
    expect(Date.now() - started).toBeLessThan(60_000);
  });
});
