// Notifications in the pipeline, with an injected delivery (DriveOptions.seams.notify) that records
// each event and answers when the test says: failed tasks are told without holding up the run,
// the run's end is awaited, and a run that stops on an internal error still says it finished.
import { describe, expect, it, vi } from "vitest";
import type { NotifyEvent } from "../../src/contract/notify.js";
import type { NotifyDelivery } from "../../src/notify/notifier.js";
import { runAssignments } from "../../src/run/runner.js";
import { MiddleRun, middleTier } from "./harness.js";

let run: MiddleRun;

middleTier(() => run);

/** A delivery whose every call waits until the test answers it. */
class Recorder {
  readonly events: NotifyEvent[] = [];
  private readonly answers: Array<() => void> = [];
  private waiting: Array<{ n: number; resolve: () => void }> = [];
  readonly deliver: NotifyDelivery = (event) => {
    this.events.push(event);
    for (const w of this.waiting.filter((w) => this.events.length >= w.n)) w.resolve();
    this.waiting = this.waiting.filter((w) => this.events.length < w.n);
    return new Promise((resolve) => this.answers.push(() => resolve(null)));
  };

  /** Resolves once `n` events were handed over. */
  received(n: number): Promise<void> {
    if (this.events.length >= n) return Promise.resolve();
    return new Promise((resolve) => this.waiting.push({ n, resolve }));
  }

  /** Answers every delivery so far. */
  answerAll(): void {
    for (const answer of this.answers.splice(0)) answer();
  }
}

const NOTIFY = { notify: { command: ["never-run"] } };

describe("notifications in the pipeline", () => {
  it("tell of a failed task without holding up the run, and the run returns only once run.finished went out", async () => {
    run = new MiddleRun([{ id: "a" }, { id: "b", dependencies: ["a"] }, { id: "x" }], { config: NOTIFY });
    const rec = new Recorder();
    let returned = false;
    const done = runAssignments({
      assignmentsFile: run.file,
      ...run.options({ seams: { notify: rec.deliver } }),
    }).then((result) => {
      returned = true;
      return result;
    });
    const [a, x] = await Promise.all([run.host.launched("a"), run.host.launched("x")]);
    a.exit(3);
    // Its delivery is not answered, yet the run goes on: x finishes, b is skipped.
    await rec.received(1);
    expect(rec.events[0]).toMatchObject({
      event: "task.failed",
      task_id: "a",
      reason: "exit_code",
      attempts: 1,
    });
    x.exit(0);
    await run.until((tasks) => tasks.get("x")?.state === "success");
    expect(run.host.attempts.map((t) => t.spec.taskId).sort()).toEqual(["a", "x"]);
    // run.finished waits for the failure's delivery, and the run for run.finished.
    rec.answerAll();
    await rec.received(2);
    await vi.advanceTimersByTimeAsync(0);
    // What comes after it (closing x's session) waits too.
    expect(run.host.closed).toEqual([]);
    expect(returned).toBe(false);
    expect(rec.events[1]).toMatchObject({
      event: "run.finished",
      exit_code: 1,
      summary: { failed_tasks: ["a"], skipped_tasks: ["b"] },
      error: null,
    });
    rec.answerAll();
    expect(run.report(await done).exit_code).toBe(1);
    expect(run.host.closed).toEqual([x.spec.session]);
    // b was skipped, not failed: no event of its own.
    expect(rec.events.map((e) => e.event)).toEqual(["task.failed", "run.finished"]);
  });

  it("a run that stops on an internal error still sends run.finished, with the report's error", async () => {
    run = new MiddleRun([{ id: "a" }], { config: NOTIFY });
    const rec = new Recorder();
    run.host.onLaunch = (attempt) => attempt.exit(0);
    const result = runAssignments({
      assignmentsFile: run.file,
      ...run.options({
        seams: {
          notify: async (event, line) => {
            const answer = rec.deliver(event, line);
            rec.answerAll();
            return answer;
          },
        },
      }),
      hooks: {
        onProgress: (tasks) => {
          if (tasks.some((t) => t.state === "success")) throw new Error("the progress display broke");
        },
      },
    });
    const report = run.report(await result);
    expect(report.error?.kind).toBe("internal");
    expect(rec.events).toMatchObject([
      {
        event: "run.finished",
        exit_code: report.exit_code,
        error: { kind: "internal", message: expect.stringContaining("the progress display broke") },
      },
    ]);
  });

  it("sends nothing without a notify config", async () => {
    run = new MiddleRun([{ id: "a" }]);
    const rec = new Recorder();
    run.host.onLaunch = (attempt) => attempt.exit(3);
    const report = run.report(
      await runAssignments({ assignmentsFile: run.file, ...run.options({ seams: { notify: rec.deliver } }) }),
    );
    expect(report.exit_code).toBe(1);
    expect(rec.events).toEqual([]);
  });
});
