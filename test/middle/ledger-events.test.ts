// The ledger's events as the contract types them (src/contract/ledger-events.ts): every event a
// run writes is one of them with its data as declared, and the timeline reads them back.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { LedgerEntry } from "../../src/contract/ledger-events.js";
import { timelineOf } from "../../src/report/timeline.js";
import { runAssignments } from "../../src/run/runner.js";
import { MiddleRun, middleTier } from "./harness.js";

let run: MiddleRun;

middleTier(() => run);

describe("the ledger's events", () => {
  it("are each one of the contract's, with its data as declared, and the timeline reads them back", async () => {
    run = new MiddleRun([
      { id: "a" },
      { id: "b", dependencies: ["a"], retries: 1 },
      { id: "c", dependencies: ["b"] },
      { id: "x" },
      { id: "y", dependencies: ["x"] },
    ]);
    let tries = 0;
    run.host.onLaunch = (attempt) => {
      const id = attempt.spec.taskId;
      if (id === "b") attempt.exit(tries++ === 0 ? 1 : 0);
      else attempt.exit(id === "x" ? 3 : 0);
    };
    const result = await runAssignments({ assignmentsFile: run.file, ...run.options() });
    const report = run.report(result);
    const events = readFileSync(join(result.runDir, "events.jsonl"), "utf8")
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l) as { type: string; task_id?: string; data: unknown });
    const bad = events.filter((e) => !LedgerEntry.safeParse({ type: e.type, data: e.data }).success);
    expect(bad).toEqual([]);
    expect(new Set(events.map((e) => e.type))).toEqual(
      new Set([
        "run.accepted",
        "run.planned",
        "task.launched",
        "task.running",
        "task.exited",
        "task.retrying",
        "task.success",
        "task.failed",
        "task.skipped",
        "merge.skipped",
        "report.written",
        "run.handoff",
      ]),
    );
    const timeline = timelineOf(
      events.map(
        (e, seq) =>
          ({ schema_version: 1, seq, ts: new Date(0).toISOString(), prev: "", hash: "", ...e }) as never,
      ),
      report,
      0,
    );
    expect(timeline.bars.map((b) => [b.task, b.attempt, b.outcome])).toEqual(
      expect.arrayContaining([
        ["a", 1, "success"],
        ["b", 1, "retried"],
        ["b", 2, "success"],
        ["c", 1, "success"],
        ["x", 1, "failed"],
      ]),
    );
    expect(timeline.markers.map((m) => [m.task, m.kind])).toEqual([["y", "skipped"]]);
    expect(timeline.merge?.result).toBe("skipped");
  });
});
