// Escalation (issue 36): a task's attempts run its agent, then each agent of its escalation list
// in order, the last one for every further attempt; driven through the real pipeline with the
// fake runner and fake timers.
import { chmodSync, mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it, vi } from "vitest";
import { resumeRun, runAssignments } from "../../src/run/runner.js";
import { MiddleRun, middleTier } from "./harness.js";

let run: MiddleRun;

middleTier(() => run);

/** Agents of their own command lines: nothing to install, their argv tells them apart. */
const AGENTS = {
  agents: {
    mid: { command: ["mid-agent", "{task_id}"], timeout_s: 50 },
    top: { command: ["top-agent", "--hard", "{task_id}"] },
  },
};

describe("escalation", () => {
  it("runs attempt 2 with the first agent of the list, attempt 3 with the second, and keeps the last one", async () => {
    run = new MiddleRun([{ id: "a", retries: 3, escalation: ["mid", "top"] }], { config: AGENTS });
    const done = runAssignments({ assignmentsFile: run.file, ...run.options() });
    (await run.host.launched("a", 1)).exit(1);
    (await run.host.launched("a", 2)).exit(1);
    (await run.host.launched("a", 3)).exit(1);
    (await run.host.launched("a", 4)).exit(0);
    const report = run.report(await done);
    expect(report.tasks[0]).toMatchObject({ status: "success", attempts: 4, agent: "fake" });
    expect(run.host.of("a").map((a) => a.spec.argv)).toEqual([
      ["fake-agent", "a"],
      ["mid-agent", "a"],
      ["top-agent", "--hard", "a"],
      ["top-agent", "--hard", "a"],
    ]);
    // The report keeps attempt 1's argv and lists the others; the ledger names each attempt's agent.
    expect(report.tasks[0]!.argv).toEqual(["fake-agent", "a"]);
    expect(report.tasks[0]!.escalation).toEqual([
      { agent: "mid", argv: ["mid-agent", "a"] },
      { agent: "top", argv: ["top-agent", "--hard", "a"] },
    ]);
    const launched = run.events().filter((e) => e.type === "task.launched");
    expect(launched.map((e) => [e.data.attempt, e.data.agent])).toEqual([
      [1, "fake"],
      [2, "mid"],
      [3, "top"],
      [4, "top"],
    ]);
    // Each attempt's logs are named after the agent that ran it.
    expect(report.tasks[0]!.logs.stdout).toMatch(/^logs\/top-/);
  });

  it("an agent entry's list escalates every task of that agent; a task's own list (even empty) wins", async () => {
    run = new MiddleRun(
      [
        { id: "a", agent: "base", command: undefined, retries: 1 },
        { id: "b", agent: "base", command: undefined, retries: 1, escalation: ["top"] },
        { id: "c", agent: "base", command: undefined, retries: 1, escalation: [] },
      ],
      {
        config: {
          agents: { ...AGENTS.agents, base: { command: ["base-agent", "{task_id}"], escalation: ["mid"] } },
        },
      },
    );
    run.host.onLaunch = (attempt) => attempt.exit(1);
    const report = run.report(await runAssignments({ assignmentsFile: run.file, ...run.options() }));
    expect(report.tasks.map((t) => [t.id, t.status, t.attempts])).toEqual([
      ["a", "failed", 2],
      ["b", "failed", 2],
      ["c", "failed", 2],
    ]);
    expect(
      Object.fromEntries(["a", "b", "c"].map((id) => [id, run.host.of(id).map((x) => x.spec.argv[0])])),
    ).toEqual({
      a: ["base-agent", "mid-agent"],
      b: ["base-agent", "top-agent"],
      c: ["base-agent", "base-agent"],
    });
    expect(report.tasks.find((t) => t.id === "c")).not.toHaveProperty("escalation");
  });

  it("a resume adopts the live attempt with the agent it was launched with, and escalates on from there", async () => {
    run = new MiddleRun([{ id: "a", retries: 3, escalation: ["mid", "top"] }], { config: AGENTS });
    const detach = new AbortController();
    const first = runAssignments({ assignmentsFile: run.file, ...run.options({ detach: detach.signal }) });
    (await run.host.launched("a", 1)).exit(1);
    await run.running("a", 2);
    detach.abort();
    const detached = await first;
    if (!("detached" in detached)) throw new Error("the run did not detach");
    const second = run.host.of("a")[1]!;
    expect(second.spec.argv[0]).toBe("mid-agent");
    expect(run.state(detached.runDir).tasks[0]).toMatchObject({ attempts: 2, current: { agentIndex: 1 } });

    const resumed = resumeRun({ runDir: detached.runDir, ...run.options() });
    // Adopted, not launched again, and watched as its agent's: mid's timeout ends it (the task's
    // own agent has none); the next attempt is the list's next.
    await run.running("a", 2);
    await vi.advanceTimersByTimeAsync(49_999);
    expect(second.stops).toEqual([]);
    await vi.advanceTimersByTimeAsync(1);
    expect(second.stops).toHaveLength(1);
    const third = await run.host.launched("a", 3);
    expect(third.spec.argv[0]).toBe("top-agent");
    third.exit(0);
    const report = run.report(await resumed);
    expect(report.tasks[0]).toMatchObject({ status: "success", attempts: 3 });
    expect(run.host.of("a").map((x) => x.spec.argv[0])).toEqual(["fake-agent", "mid-agent", "top-agent"]);
  });

  it("adds up the usage and cost that each attempt's agent reported", async () => {
    // Presets whose output termorch parses; their CLIs need only be on PATH (nothing runs them).
    run = new MiddleRun([
      { id: "a", agent: "claude", command: undefined, retries: 1, escalation: ["codex"] },
    ]);
    const fakeBin = join(run.dir, "bin");
    mkdirSync(fakeBin);
    for (const cli of ["claude", "codex"]) {
      writeFileSync(join(fakeBin, cli), "#!/bin/sh\nexit 0\n");
      chmodSync(join(fakeBin, cli), 0o755);
    }
    const options = run.options();
    const done = runAssignments({
      assignmentsFile: run.file,
      ...options,
      env: { ...options.env, PATH: `${fakeBin}:${process.env.PATH}` },
    });
    const first = await run.host.launched("a", 1);
    expect(first.spec.argv[0]).toBe("claude");
    writeFileSync(
      first.spec.stdoutLog,
      `${JSON.stringify({
        type: "result",
        subtype: "success",
        is_error: false,
        result: "tried",
        session_id: "s-1",
        total_cost_usd: 0.5,
        usage: {
          input_tokens: 10,
          output_tokens: 20,
          cache_read_input_tokens: 0,
          cache_creation_input_tokens: 0,
        },
      })}\n`,
    );
    first.exit(1);
    const second = await run.host.launched("a", 2);
    expect(second.spec.argv[0]).toBe("codex");
    writeFileSync(
      second.spec.stdoutLog,
      [
        { type: "thread.started", thread_id: "th-1" },
        { type: "item.completed", item: { type: "agent_message", text: "fixed" } },
        { type: "turn.completed", usage: { input_tokens: 100, cached_input_tokens: 0, output_tokens: 7 } },
      ]
        .map((l) => JSON.stringify(l))
        .join("\n"),
    );
    second.exit(0);
    const report = run.report(await done);
    expect(report.tasks[0]).toMatchObject({ status: "success", attempts: 2 });
    expect(report.tasks[0]!.usage).toMatchObject({ input_tokens: 110, output_tokens: 27, cost_usd: 0.5 });
    expect(report.summary.usage).toMatchObject({ input_tokens: 110, output_tokens: 27, cost_usd: 0.5 });
  });
});
