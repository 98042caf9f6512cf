// Budgets (issue 37): the run's (`resource_limits.max_cost_usd`, `max_tokens`) and a task's
// (`budget`, or its agent entry's). Once spent, no new attempt starts: a task that would need one
// fails with reason `budget`, naming the budget and the spend. Driven through the real pipeline
// with the fake runner, each attempt printing Claude Code's result with its usage and cost.
import { writeFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import type { FakeAttempt } from "./fake-runner.js";
import { MiddleRun, middleTier } from "./harness.js";

let run: MiddleRun;

middleTier(() => run);

/** Claude Code's result for an attempt that used 100 + 10 tokens and cost `usd`. */
function spends(usd: number, exit = 0) {
  return (attempt: FakeAttempt) => {
    const result = {
      type: "result",
      subtype: "success",
      is_error: false,
      result: "Done.",
      session_id: `s-${attempt.spec.taskId}`,
      total_cost_usd: usd,
      usage: {
        input_tokens: 100,
        cache_creation_input_tokens: 0,
        cache_read_input_tokens: 0,
        output_tokens: 10,
      },
    };
    writeFileSync(attempt.spec.stdoutLog, `${JSON.stringify(result)}\n`);
    attempt.exit(exit);
  };
}

const claude = (id: string, extra: object = {}) => ({ id, agent: "claude", command: undefined, ...extra });

describe("budgets", () => {
  it("at the run's budget in USD, no task starts: the ones left fail with reason budget, and the rest is merged", async () => {
    run = new MiddleRun([claude("a"), claude("b"), claude("c")], {
      assignment: {
        environment: { workspace_dir: "ws", resource_limits: { max_parallel: 1, max_cost_usd: 0.02 } },
      },
    });
    const report = await run.reportWithPresets(spends(0.0125));
    expect(report.tasks.map((t) => [t.id, t.status, t.reason])).toEqual([
      ["a", "success", null],
      ["b", "success", null],
      ["c", "failed", "budget"],
    ]);
    expect(report.tasks[2]!.detail).toBe("the run's budget of $0.0200 is spent: $0.0250; it did not start");
    expect(report.tasks[2]!.attempts).toBe(0);
    expect(run.host.of("c")).toHaveLength(0);
    expect(report.summary.usage).toMatchObject({ cost_usd: 0.025 });
  });

  it("at a task's token budget, a failing task is not tried again: reason budget, after the attempts it could pay for", async () => {
    run = new MiddleRun([
      claude("a", { retries: 5, budget: { max_tokens: 200 } }),
      claude("b", { retries: 1 }),
    ]);
    const report = await run.reportWithPresets(spends(0.001, 1));
    const [a, b] = report.tasks;
    // 110 tokens an attempt: the second reaches 200, so no third starts.
    expect(a).toMatchObject({ status: "failed", reason: "budget", attempts: 2 });
    expect(a!.detail).toMatch(
      /^the task's budget of 200 tokens is spent: 220; its attempt failed: exit_code/,
    );
    expect(a!.usage).toMatchObject({ input_tokens: 200, output_tokens: 20 });
    // A task without a budget of its own is not held by another's.
    expect(b).toMatchObject({ status: "failed", reason: "exit_code", attempts: 2 });
  });

  it("an agent entry's budget is each of its tasks' own", async () => {
    run = new MiddleRun(
      [claude("a", { agent: "capped", retries: 3 }), claude("b", { agent: "capped", retries: 3 })],
      {
        config: { agents: { capped: { preset: "claude", budget: { max_cost_usd: 0.01 } } } },
      },
    );
    const report = await run.reportWithPresets(spends(0.006, 1));
    expect(report.tasks.map((t) => [t.id, t.reason, t.attempts])).toEqual([
      ["a", "budget", 2],
      ["b", "budget", 2],
    ]);
  });
});
