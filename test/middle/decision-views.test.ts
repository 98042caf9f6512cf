// The agent's decision through the pipeline (issue 36, item 4), with the fake runner: the fake
// agent writes its envelope at $TERMORCH_DECISION as a real CLI's edit tool would, and the run's
// files and views say what it decided: a blocked task that asks for a person (status file,
// report, ledger, notify, status view, MCP wait), an invalid envelope (quarantined), and an
// escalation whose reason and notes the next agent is told.
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import type { NotifyEvent } from "../../src/contract/notify.js";
import type { RunState } from "../../src/contract/state.js";
import { taskSummary } from "../../src/mcp/follow.js";
import { statusView } from "../../src/ops/status.js";
import { runAssignments } from "../../src/run/runner.js";
import type { FakeAttempt } from "./fake-runner.js";
import { MiddleRun, middleTier } from "./harness.js";

let run: MiddleRun;

middleTier(() => run);

const REASON = "the task needs the staging password, which is not in my environment";

const BLOCKED = {
  schema_version: "1.1",
  decision: { status: "blocked", reason: REASON, confidence: 0.9 },
  trace: { claim: "cannot reach staging", evidence: [{ type: "file", ref: "deploy.sh", note: "reads $PW" }] },
  routing: { recommended_next_actor: "human", urgency: "high" },
};

/** The fake agent leaves its decision where its environment says, then exits. */
function decide(a: FakeAttempt, envelope: unknown, code = 0): void {
  writeFileSync(
    a.spec.env.TERMORCH_DECISION!,
    typeof envelope === "string" ? envelope : JSON.stringify(envelope),
  );
  a.exit(code);
}

/** Notify events as the pipeline hands them over. */
function recordNotify(): { events: NotifyEvent[]; deliver: (e: NotifyEvent) => Promise<null> } {
  const events: NotifyEvent[] = [];
  return {
    events,
    deliver: async (e) => {
      events.push(e);
      return null;
    },
  };
}

describe("the agent's decision in the pipeline", () => {
  it("blocked, asking for a person: not retried, dependents skipped, and every view says it needs a person", async () => {
    run = new MiddleRun(
      [
        { id: "a", retries: 2 },
        { id: "b", dependencies: ["a"] },
      ],
      {
        config: { notify: { command: ["never-run"] } },
      },
    );
    const notify = recordNotify();
    const done = runAssignments({
      assignmentsFile: run.file,
      ...run.options({ seams: { notify: notify.deliver } }),
    });
    const a = await run.host.launched("a");
    // The workspace is no repository: the decision is in the task's artifacts folder.
    expect(a.spec.env.TERMORCH_DECISION).toBe(join(run.dir, "artifacts", "a", "decision.json"));
    decide(a, BLOCKED);
    const report = run.report(await done);

    expect(run.host.of("a")).toHaveLength(1);
    const t = report.tasks.find((x) => x.id === "a")!;
    expect(t).toMatchObject({ status: "failed", reason: "blocked", attempts: 1, needs_human: true });
    expect(t.detail).toContain(REASON);
    expect(report.tasks.find((x) => x.id === "b")).toMatchObject({
      status: "skipped",
      reason: "dependency_failed",
    });
    expect(report.summary.failed_tasks).toEqual(["a"]);
    expect(t.attempt_history?.[0]?.decision).toEqual({
      status: "blocked",
      reason: REASON,
      confidence: 0.9,
      recommended_next_actor: "human",
      file: "artifacts/a/attempt-1/decision.json",
    });
    expect(report.summary.metrics?.attempts).toMatchObject({ total: 1, blocked: 1, block_rate: 1 });
    // Kept, and consumed: what the agent wrote is not read again.
    expect(JSON.parse(readFileSync(join(run.dir, "artifacts/a/attempt-1/decision.json"), "utf8"))).toEqual(
      BLOCKED,
    );
    expect(existsSync(join(run.dir, "artifacts", "a", "decision.json"))).toBe(false);

    const status = JSON.parse(readFileSync(join(run.dir, "status", "a.failed"), "utf8"));
    expect(status).toMatchObject({ reason: "blocked", needs_human: true });
    const ledger = run.events();
    expect(ledger.find((e) => e.type === "task.decision")).toMatchObject({
      task_id: "a",
      data: { attempt: 1, kind: "valid", status: "blocked", recommended_next_actor: "human" },
    });
    expect(ledger.find((e) => e.type === "task.failed" && e.task_id === "a")?.data.needs_human).toBe(true);
    expect(notify.events.map((e) => e.event)).toEqual(["task.failed", "task.needs_human", "run.finished"]);
    expect(notify.events[1]).toMatchObject({ task_id: "a", attempts: 1 });
    expect((notify.events[1] as { reason: string }).reason).toContain(REASON);

    // status --json and MCP wait read the same state.json.
    const state = run.state(run.dir) as RunState;
    const view = await statusView(
      [{ runId: state.run_id, runDir: run.dir, state, entry: null, problem: null, siblingRepo: null }],
      () => new Map(),
      Date.now(),
    );
    const views = view.runs[0]!.tasks;
    expect(views.map((x) => [x.id, x.needs_human])).toEqual([
      ["a", true],
      ["b", false],
    ]);
    expect(taskSummary(view.runs[0]!).needs_human).toEqual([{ task: "a", reason: t.detail }]);
  });

  it("an invalid envelope: blocked with invalid_decision, its problems named, its bytes quarantined, no person asked for", async () => {
    run = new MiddleRun([{ id: "a", retries: 2 }]);
    const done = runAssignments({ assignmentsFile: run.file, ...run.options() });
    decide(await run.host.launched("a"), { ...BLOCKED, decision: { ...BLOCKED.decision, confidence: 1.5 } });
    const report = run.report(await done);
    const t = report.tasks[0]!;
    expect(run.host.of("a")).toHaveLength(1);
    expect(t).toMatchObject({ status: "failed", reason: "invalid_decision" });
    expect(t).not.toHaveProperty("needs_human");
    expect(t.detail).toContain("decision.confidence: Too big");
    expect(t.attempt_history?.[0]?.decision).toMatchObject({
      status: "invalid",
      file: "artifacts/a/attempt-1/decision.quarantined.json",
    });
    expect(
      JSON.parse(readFileSync(join(run.dir, "artifacts/a/attempt-1/decision.quarantined.json"), "utf8")),
    ).toMatchObject({ decision: { confidence: 1.5 } });
    expect(report.summary.metrics?.attempts).toMatchObject({ invalid: 1, invalid_rate: 1 });
  });

  it("escalate_to_max: the next agent runs, told the reason and notes; with none left the task fails escalated", async () => {
    run = new MiddleRun([{ id: "a", retries: 0, escalation: ["top"] }], {
      config: { agents: { top: { command: ["top-agent", "{task_id}"] } } },
    });
    const done = runAssignments({ assignmentsFile: run.file, ...run.options() });
    const escalate = (reason: string) => ({
      decision: { status: "escalate_to_max", reason, confidence: 0.4 },
      trace: { claim: "too hard for me", evidence: [] },
      result: { output: "", notes: `tried ${reason}` },
    });
    // Its gates would pass (exit 0, nothing to check): the agent asks for a stronger one all the same.
    decide(await run.host.launched("a", 1), escalate("the parser is beyond me"));
    const second = await run.host.launched("a", 2);
    expect(second.spec.argv[0]).toBe("top-agent");
    const prompt = readFileSync(second.spec.env.TERMORCH_PROMPT_FILE!, "utf8");
    expect(prompt).toContain("the parser is beyond me");
    expect(prompt).toContain("tried the parser is beyond me");
    decide(second, escalate("nobody can"));
    const report = run.report(await done);
    const t = report.tasks[0]!;
    expect(t).toMatchObject({ status: "failed", reason: "escalated", attempts: 2 });
    // Each record says how its attempt ended for the task, though its gates passed.
    expect(t.attempt_history?.map((h) => [h.agent, h.decision?.status, h.reason])).toEqual([
      ["fake", "escalate_to_max", "escalated"],
      ["top", "escalate_to_max", "escalated"],
    ]);
    expect(report.summary.metrics?.attempts).toMatchObject({ total: 2, escalated: 2, escalation_rate: 1 });
  });
});
