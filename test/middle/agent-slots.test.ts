// An agent entry's max_parallel and a provider group's (issue 37): never more of its tasks at
// once than its bound, whatever the run's max_parallel; the run's other slots go to other agents'
// tasks meanwhile, and the critical path keeps its order within the bound. Through the real
// pipeline with the fake runner: what is alive is what the fake host holds unfinished.
import { describe, expect, it } from "vitest";
import type { FakeAttempt } from "./fake-runner.js";
import { MiddleRun, middleTier } from "./harness.js";

let run: MiddleRun;

middleTier(() => run);

const task = (id: string, agent: string, dependencies: string[] = []) => ({
  id,
  agent,
  command: undefined,
  dependencies,
  expect_changes: false,
});
const entry = (extra: object) => ({ command: ["fake-agent", "{task_id}"], ...extra });

/** The attempts alive now, by task. */
const alive = (): string[] =>
  run.host.attempts
    .filter((a) => !a.done)
    .map((a) => a.spec.taskId)
    .sort();

describe("an agent's and a provider's max_parallel", () => {
  it("holds an agent's tasks to its bound while the run's other slots serve other agents", async () => {
    run = new MiddleRun(
      [task("s1", "slow"), task("s2", "slow"), task("s3", "slow"), task("s4", "slow"), task("o1", "other")],
      {
        config: { agents: { slow: entry({ max_parallel: 2 }), other: entry({}) } },
        assignment: { environment: { workspace_dir: "ws", resource_limits: { max_parallel: 4 } } },
      },
    );
    const seen: number[] = [];
    const done = run.reportWithPresets(() => {});
    const o1 = await run.host.launched("o1");
    await Promise.all([run.host.launched("s1"), run.host.launched("s2")]);
    seen.push(alive().filter((id) => id.startsWith("s")).length);
    expect(alive()).toEqual(["o1", "s1", "s2"]);
    // One of its tasks ends: the next starts, never a third alongside.
    const finishOne = async (a: FakeAttempt, next: string): Promise<void> => {
      const started = run.host.launched(next);
      a.exit(0);
      await started;
      seen.push(alive().filter((id) => id.startsWith("s")).length);
    };
    await finishOne(run.host.of("s1")[0]!, "s3");
    await finishOne(run.host.of("s2")[0]!, "s4");
    for (const id of ["s3", "s4"]) run.host.of(id)[0]!.exit(0);
    o1.exit(0);
    const report = await done;
    expect(report.tasks.every((t) => t.status === "success")).toBe(true);
    expect(Math.max(...seen)).toBe(2);
    expect(report.summary.metrics?.peak_parallelism).toBe(3);
  });

  it("a provider group bounds its agents together", async () => {
    run = new MiddleRun([task("a1", "a"), task("a2", "a"), task("b1", "b"), task("b2", "b")], {
      config: {
        agents: { a: entry({ provider: "acme" }), b: entry({ provider: "acme" }) },
        providers: { acme: { max_parallel: 3 } },
      },
      assignment: { environment: { workspace_dir: "ws", resource_limits: { max_parallel: 4 } } },
    });
    const done = run.reportWithPresets(() => {});
    await run.until(() => run.host.attempts.length === 3);
    expect(alive()).toHaveLength(3);
    const fourth = run.host.attempts.length;
    const first = run.host.attempts[0]!;
    const next = run.until(() => run.host.attempts.length === 4);
    first.exit(0);
    await next;
    expect(fourth).toBe(3);
    expect(alive()).toHaveLength(3);
    for (const a of run.host.attempts) a.exit(0);
    const report = await done;
    expect(report.tasks.every((t) => t.status === "success")).toBe(true);
  });
});
