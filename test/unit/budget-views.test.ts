import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import type { Usage } from "../../src/contract/agent-result.js";
import { StatusView } from "../../src/contract/status-view.js";
import { taskSummary } from "../../src/mcp/follow.js";
import { statusView } from "../../src/ops/status.js";
import { newTaskRun, type TaskRun } from "../../src/task/task-run.js";
import { runStateFixture } from "../fixtures/run-state.js";

// The run's budget against its spend, as status (its JSON) and MCP wait show it while the run goes.
const dir = mkdtempSync(join(tmpdir(), "termorch-budget-views-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const spent = (id: string, usage: Usage): TaskRun => {
  const t = newTaskRun(id, "claude", [], ["claude"]);
  return { ...t, result: { ...t.result, usage } };
};
const usage = (cost: number | null, input: number, output: number): Usage => ({
  input_tokens: input,
  output_tokens: output,
  cache_read_tokens: null,
  cache_write_tokens: null,
  cost_usd: cost,
});

async function viewOf(budget: { max_cost_usd?: number; max_tokens?: number } | null, tasks: TaskRun[]) {
  const runDir = join(dir, `run-${Math.random().toString(36).slice(2, 8)}`);
  mkdirSync(join(runDir, "status"), { recursive: true });
  const fixture = runStateFixture(runDir);
  const state = runStateFixture(runDir, {
    phase: "reported",
    pid: 2 ** 22 + 12345,
    socket: `termorch-unit-budget-views-${process.pid}`,
    socket_path: join(runDir, "no-socket"),
    tasks,
    options: { ...fixture.options, budget },
  });
  writeFileSync(join(runDir, "state.json"), JSON.stringify(state));
  const view = StatusView.parse(
    await statusView(
      [{ runId: "r1", runDir, state, entry: null, problem: null, siblingRepo: null }],
      () => new Map(),
      10_000,
    ),
  );
  return view.runs[0]!;
}

describe("the run's budget in the views", () => {
  it("adds up every task's spend against the limits, and says when it is exhausted", async () => {
    const run = await viewOf({ max_cost_usd: 0.05, max_tokens: 10_000 }, [
      spent("a", usage(0.03, 1000, 100)),
      spent("b", usage(0.025, 2000, 200)),
    ]);
    const standing = {
      max_cost_usd: 0.05,
      max_tokens: 10_000,
      spent_usd: 0.055,
      spent_tokens: 3300,
      warning: true,
      exhausted: true,
    };
    expect(run.budget).toEqual(standing);
    expect(taskSummary(run).budget).toEqual(standing);
    const under = await viewOf({ max_tokens: 10_000 }, [spent("a", usage(null, 1000, 100))]);
    expect(under.budget).toEqual({
      max_cost_usd: null,
      max_tokens: 10_000,
      spent_usd: 0,
      spent_tokens: 1100,
      warning: false,
      exhausted: false,
    });
  });

  it("counts what a running attempt has streamed so far, and warns at 80 %", async () => {
    const running = spent("b", usage(0.01, 100, 10));
    const run = await viewOf({ max_cost_usd: 0.05 }, [
      spent("a", usage(0.02, 1000, 100)),
      { ...running, state: "running", current: { ...running.current, usage: usage(0.02, 500, 50) } },
    ]);
    expect(run.budget).toMatchObject({ spent_usd: 0.05 * 1, warning: true, exhausted: true });
    const warned = await viewOf({ max_cost_usd: 0.05 }, [
      { ...running, state: "running", current: { ...running.current, usage: usage(0.03, 500, 50) } },
    ]);
    expect(warned.budget).toMatchObject({ spent_usd: 0.04, warning: true, exhausted: false });
    // The task's own line adds its running attempt's spend to its ended ones'.
    expect(warned.tasks[0]!.usage).toMatchObject({ cost_usd: 0.04, input_tokens: 600, output_tokens: 60 });
    const calm = await viewOf({ max_cost_usd: 0.05 }, [spent("a", usage(0.039, 100, 10))]);
    expect(calm.budget).toMatchObject({ warning: false, exhausted: false });
  });

  it("is null for a run without a budget", async () => {
    const run = await viewOf(null, [spent("a", usage(0.03, 1000, 100))]);
    expect(run.budget).toBeNull();
    expect(taskSummary(run).budget).toBeNull();
  });
});
