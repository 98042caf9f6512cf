// Budgets (issue 37): the run's (`resource_limits.max_cost_usd`, `max_tokens`) and a task's
// (`budget`, or its agent entry's). Once spent, no new attempt starts: a task that would need one
// fails with reason `budget`, naming the budget and the spend. Driven through the real pipeline
// with the fake runner, each attempt printing Claude Code's result with its usage and cost.
import { appendFileSync, writeFileSync } from "node:fs";
import { delimiter, join } from "node:path";
import { describe, expect, it } from "vitest";
import { resumeRun } from "../../src/run/runner.js";
import type { FakeAttempt } from "./fake-runner.js";
import { MiddleRun, middleTier, notifyRecorder } from "./harness.js";

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

/** One opencode `step_finish` event: a model call of `tokens` input tokens and 10 output, costing `usd`. */
const step = (usd: number, tokens = 100): string =>
  `${JSON.stringify({
    type: "step_finish",
    sessionID: "ses_1",
    part: {
      type: "step-finish",
      tokens: { input: tokens, output: 10, cache: { read: 0, write: 0 } },
      cost: usd,
    },
  })}\n`;

const opencode = (id: string, extra: object = {}) => ({
  id,
  agent: "opencode",
  command: undefined,
  ...extra,
});

/** Resolves once the task's running attempt has streamed `usd` (state's current.usage). */
const streamed = (taskId: string, usd: number) =>
  run.until((tasks) => tasks.get(taskId)?.current.usage?.cost_usd === usd);

describe("budgets while attempts run (their CLIs' streamed usage)", () => {
  it("at the run's budget, every running attempt is ended: reason budget, naming the budget and the spend", async () => {
    run = new MiddleRun([opencode("a"), opencode("b")], {
      assignment: {
        environment: { workspace_dir: "ws", resource_limits: { max_parallel: 2, max_cost_usd: 0.05 } },
      },
      config: { notify: { command: ["never-run"] } },
    });
    const { sent, seams } = notifyRecorder();
    const done = run.reportWithPresets(() => {}, { seams });
    const [a, b] = await Promise.all([run.host.launched("a"), run.host.launched("b")]);
    appendFileSync(a.spec.stdoutLog, step(0.03));
    await streamed("a", 0.03);
    expect(a.stops).toHaveLength(0);
    // b's step takes the run to $0.06: both are ended, a by what b spent.
    appendFileSync(b.spec.stdoutLog, step(0.03));
    await Promise.all([a.stopped, b.stopped]);
    const report = await done;
    for (const t of report.tasks) {
      expect(t).toMatchObject({ status: "failed", reason: "budget", attempts: 1 });
      expect(t.detail).toBe(
        "the run's budget of $0.0500 is spent: $0.0600; termorch ended its attempt at the budget",
      );
      expect(t.usage).toMatchObject({ cost_usd: 0.03, input_tokens: 100, output_tokens: 10 });
    }
    expect(report.summary.budget).toMatchObject({ spent_usd: 0.06, exhausted: true });
    // Each mark told once: the ledger and the notify command.
    const marks = run.events().filter((e) => e.type.startsWith("run.budget_"));
    expect(marks.map((e) => [e.type, e.data.spent_usd])).toEqual([
      ["run.budget_warning", 0.06],
      ["run.budget_exhausted", 0.06],
    ]);
    expect(sent.filter((e) => e.event.startsWith("run.budget_")).map((e) => e.event)).toEqual([
      "run.budget_warning",
      "run.budget_exhausted",
    ]);
  });

  it("warns once at 80 % of the run's budget, in the ledger and to the notify command", async () => {
    run = new MiddleRun([opencode("a")], {
      assignment: { environment: { workspace_dir: "ws", resource_limits: { max_tokens: 1000 } } },
      config: { notify: { command: ["never-run"] } },
    });
    const { sent, seams } = notifyRecorder();
    const done = run.reportWithPresets(() => {}, { seams });
    const a = await run.host.launched("a");
    appendFileSync(a.spec.stdoutLog, step(0, 690));
    await run.until((tasks) => tasks.get("a")?.current.usage?.input_tokens === 690);
    expect(run.events().some((e) => e.type === "run.budget_warning")).toBe(false);
    appendFileSync(a.spec.stdoutLog, step(0, 100));
    appendFileSync(a.spec.stdoutLog, step(0, 10));
    await run.until((tasks) => tasks.get("a")?.current.usage?.input_tokens === 800);
    a.exit(0);
    const report = await done;
    expect(report.tasks[0]).toMatchObject({ status: "success" });
    expect(report.summary.budget).toMatchObject({ spent_tokens: 830, warning: true, exhausted: false });
    expect(
      run
        .events()
        .filter((e) => e.type.startsWith("run.budget_"))
        .map((e) => e.type),
    ).toEqual(["run.budget_warning"]);
    const warning = sent.find((e) => e.event === "run.budget_warning");
    expect(warning).toMatchObject({ budget: { max_tokens: 1000, warning: true, exhausted: false } });
    // Told at the step that crossed 80 %, or the one after it when both were read together.
    expect([810, 830]).toContain(warning?.event === "run.budget_warning" && warning.budget.spent_tokens);
  });

  it("resumed with a raised budget, the attempts it ended go on with a new attempt each; their spend still counts", async () => {
    run = new MiddleRun([opencode("a", { retries: 0 }), opencode("b", { dependencies: ["a"] })], {
      assignment: {
        environment: { workspace_dir: "ws", resource_limits: { max_cost_usd: 0.05 } },
      },
    });
    const done = run.reportWithPresets(() => {});
    const a = await run.host.launched("a");
    appendFileSync(a.spec.stdoutLog, step(0.06));
    await a.stopped;
    const first = await done;
    expect(first.tasks.map((t) => [t.id, t.status, t.reason])).toEqual([
      ["a", "failed", "budget"],
      ["b", "skipped", "dependency_failed"],
    ]);
    run.host.onLaunch = (attempt) => {
      appendFileSync(attempt.spec.stdoutLog, step(0.01));
      attempt.exit(0);
    };
    const options = run.options();
    const path = `${join(import.meta.dirname, "..", "fixtures", "agents")}${delimiter}${process.env.PATH}`;
    const report = run.report(
      await resumeRun({
        runDir: run.dir,
        ...options,
        env: { ...options.env, PATH: path },
        budget: { max_cost_usd: 0.1 },
      }),
    );
    expect(report.tasks.map((t) => [t.id, t.status, t.attempts])).toEqual([
      ["a", "success", 2],
      ["b", "success", 1],
    ]);
    // a's second attempt was told nothing new and started where the budget left it.
    expect(report.tasks[0]!.attempt_history!.map((h) => [h.n, h.reason, h.started_from])).toEqual([
      [1, "budget", null],
      [2, null, "last_work"],
    ]);
    expect(report.summary.budget).toMatchObject({ max_cost_usd: 0.1, spent_usd: 0.08, exhausted: false });
    expect(run.host.of("a")).toHaveLength(2);
  });

  it("a task's own budget ends only its attempt; a line not yet ended is not counted", async () => {
    run = new MiddleRun([opencode("a", { budget: { max_tokens: 1000 } }), opencode("b")], {
      assignment: { environment: { workspace_dir: "ws", resource_limits: { max_parallel: 2 } } },
    });
    const done = run.reportWithPresets(() => {});
    const [a, b] = await Promise.all([run.host.launched("a"), run.host.launched("b")]);
    appendFileSync(b.spec.stdoutLog, step(0.01, 5000));
    appendFileSync(a.spec.stdoutLog, step(0.01, 590));
    const second = step(0.01, 590);
    appendFileSync(a.spec.stdoutLog, second.slice(0, 40));
    await streamed("a", 0.01);
    appendFileSync(a.spec.stdoutLog, second.slice(40));
    await a.stopped;
    b.exit(0);
    const report = await done;
    expect(report.tasks[0]).toMatchObject({ status: "failed", reason: "budget" });
    expect(report.tasks[0]!.detail).toBe(
      "the task's budget of 1,000 tokens is spent: 1,200; termorch ended its attempt at the budget",
    );
    expect(report.tasks[1]).toMatchObject({ status: "success", reason: null });
    expect(b.stops).toHaveLength(0);
  });

  it("on_budget finish_running: the running attempts end by themselves, and only the tasks not started fail", async () => {
    run = new MiddleRun([opencode("a"), opencode("b"), opencode("c")], {
      assignment: {
        environment: {
          workspace_dir: "ws",
          resource_limits: { max_parallel: 2, max_cost_usd: 0.05, on_budget: "finish_running" },
        },
      },
    });
    const done = run.reportWithPresets(() => {});
    const [a, b] = await Promise.all([run.host.launched("a"), run.host.launched("b")]);
    appendFileSync(a.spec.stdoutLog, step(0.03));
    appendFileSync(b.spec.stdoutLog, step(0.03));
    await run.until(
      (tasks) => tasks.get("a")?.current.usage !== null && tasks.get("b")?.current.usage !== null,
    );
    a.exit(0);
    b.exit(0);
    const report = await done;
    expect(report.tasks.map((t) => [t.id, t.status, t.reason])).toEqual([
      ["a", "success", null],
      ["b", "success", null],
      ["c", "failed", "budget"],
    ]);
    expect(a.stops.length + b.stops.length).toBe(0);
    expect(run.host.of("c")).toHaveLength(0);
  });
});
