// The config's `notify` settings in the pipeline, with an injected delivery (DriveOptions.seams.notify)
// that records each event: only the events the config names go out, and a delivery that fails
// changes nothing in the run's outcome but is recorded in its ledger, per event. What the
// notification command itself sees (its environment, its exit, its timeout) is
// test/integration/notify.test.ts's.
import { describe, expect, it } from "vitest";
import type { NotifyEvent } from "../../src/contract/notify.js";
import { runAssignments } from "../../src/run/runner.js";
import { MiddleRun, middleTier } from "./harness.js";

let run: MiddleRun;

middleTier(() => run);

describe("the config's notify settings", () => {
  it("send only the events the config names", async () => {
    run = new MiddleRun([{ id: "bad" }, { id: "good" }], {
      config: { notify: { command: ["never-run"], events: ["run.finished"] } },
    });
    const sent: NotifyEvent[] = [];
    run.host.onLaunch = (attempt) => attempt.exit(attempt.spec.taskId === "bad" ? 3 : 0);
    const report = run.report(
      await runAssignments({
        assignmentsFile: run.file,
        ...run.options({
          seams: {
            notify: async (event) => {
              sent.push(event);
              return null;
            },
          },
        }),
      }),
    );
    expect(report.exit_code).toBe(1);
    expect(report.summary.failed_tasks).toEqual(["bad"]);
    // task.failed is not named: only run.finished went out.
    expect(sent.map((e) => e.event)).toEqual(["run.finished"]);
    expect(sent[0]).toMatchObject({ exit_code: 1, summary: report.summary });
  });

  it("a delivery that fails changes nothing in the run, and the ledger names each failed event", async () => {
    run = new MiddleRun([{ id: "bad" }], { config: { notify: { command: ["never-run"] } } });
    run.host.onLaunch = (attempt) => attempt.exit(3);
    const report = run.report(
      await runAssignments({
        assignmentsFile: run.file,
        ...run.options({
          seams: { notify: async () => ({ kind: "failed", detail: "the webhook refused the event" }) },
        }),
      }),
    );
    expect(report.exit_code).toBe(1);
    expect(report.tasks[0]).toMatchObject({ status: "failed", reason: "exit_code" });
    const failures = run.events().filter((e) => e.type === "notify.failed");
    expect(failures.map((e) => [e.data.event, e.data.kind, e.task_id, e.data.detail])).toEqual([
      ["task.failed", "failed", "bad", "the webhook refused the event"],
      ["run.finished", "failed", undefined, "the webhook refused the event"],
    ]);
  });
});
