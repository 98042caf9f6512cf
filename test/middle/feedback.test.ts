// The attempt loop carries out the next-attempt policy and feeds each retry its feedback
// section: the real pipeline, a fake runner, fake timers (a workspace that is no repository).
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it, vi } from "vitest";
import { runAssignments } from "../../src/run/runner.js";
import type { FakeAttempt } from "./fake-runner.js";
import { MiddleRun, middleTier } from "./harness.js";

let run: MiddleRun;

middleTier(() => run);

/** The prompt an attempt was given, as it read it at launch. */
const promptOf = (a: FakeAttempt): string => readFileSync(a.spec.env.TERMORCH_PROMPT_FILE!, "utf8");

describe("feedback", () => {
  it("attempt 2 is told why attempt 1 failed; the first attempt is told nothing", async () => {
    run = new MiddleRun([{ id: "a", retries: 2 }]);
    const prompts: string[] = [];
    run.host.onLaunch = (a) => prompts.push(promptOf(a));
    const done = runAssignments({ assignmentsFile: run.file, ...run.options() });
    (await run.host.launched("a", 1)).exit(3);
    (await run.host.launched("a", 2)).exit(0);
    const report = run.report(await done);
    expect(prompts[0]).not.toContain("What went wrong");
    expect(prompts[1]).toContain("## What went wrong in attempt 1");
    expect(prompts[1]).toContain("`exit_code`: exited with code 3");
    const t = report.tasks[0]!;
    expect(t.attempt_history!.map((h) => [h.n, h.reason, h.feedback])).toEqual([
      [1, "exit_code", null],
      [2, null, "artifacts/a/attempt-2/feedback.md"],
    ]);
    expect(readFileSync(join(run.dir, "artifacts/a/attempt-2/feedback.md"), "utf8")).toBe(
      prompts[1]!.slice(prompts[1]!.indexOf("\n\n---\n\n## What went wrong")),
    );
    const retrying = run.events().find((e) => e.type === "task.retrying");
    expect(retrying?.data).toMatchObject({
      attempt: 1,
      reason: "exit_code",
      agent: "fake",
      from: "last_work",
      feedback: "artifacts/a/attempt-2/feedback.md",
    });
  });

  it("each retry is told about the attempt just before it, never an older one", async () => {
    run = new MiddleRun([{ id: "a", retries: 2 }]);
    const prompts: string[] = [];
    run.host.onLaunch = (a) => prompts.push(promptOf(a));
    const done = runAssignments({ assignmentsFile: run.file, ...run.options() });
    (await run.host.launched("a", 1)).exit(3);
    (await run.host.launched("a", 2)).exit(4);
    (await run.host.launched("a", 3)).exit(5);
    const t = run.report(await done).tasks[0]!;
    expect(t).toMatchObject({ status: "failed", reason: "exit_code", attempts: 3 });
    expect(prompts[2]).toContain("## What went wrong in attempt 2");
    expect(prompts[2]).toContain("exited with code 4");
    expect(prompts[2]).not.toContain("attempt 1");
    expect(t.attempt_history!.map((h) => h.reason)).toEqual(["exit_code", "exit_code", "exit_code"]);
  });

  it("a timeout: the retry is told after how long, and starts from the last committed state", async () => {
    run = new MiddleRun([{ id: "slow", retries: 1, timeout_s: 60 }]);
    const done = runAssignments({ assignmentsFile: run.file, ...run.options() });
    await run.running("slow");
    await vi.advanceTimersByTimeAsync(60_000);
    const second = await run.host.launched("slow", 2);
    expect(promptOf(second)).toContain("It was ended after 60 s, its timeout.");
    expect(promptOf(second)).toContain('"next_starts_from": "last_work"');
    second.exit(0);
    const t = run.report(await done).tasks[0]!;
    expect(t.attempt_history!.map((h) => [h.reason, h.started_from])).toEqual([
      ["timeout", null],
      [null, "last_commit"],
    ]);
  });

  it("a cancelled attempt is not retried, whatever retries remain", async () => {
    run = new MiddleRun([{ id: "a", retries: 3 }]);
    const cancel = new AbortController();
    const done = runAssignments({ assignmentsFile: run.file, ...run.options({ signal: cancel.signal }) });
    await run.running("a");
    cancel.abort();
    const t = run.report(await done).tasks[0]!;
    expect(t).toMatchObject({ reason: "cancelled", attempts: 1 });
    expect(run.host.of("a")).toHaveLength(1);
  });

  it("an interactive task's pasted prompt carries the same section", async () => {
    run = new MiddleRun([{ id: "i", retries: 1, interactive: true, waiting_after_s: 5 }]);
    const done = runAssignments({ assignmentsFile: run.file, ...run.options() });
    (await run.host.launched("i", 1)).exit(2);
    const second = await run.host.launched("i", 2);
    second.screen = "stub> ";
    await vi.advanceTimersByTimeAsync(1000);
    expect(second.pasted).toHaveLength(1);
    expect(second.pasted[0]).toContain("## What went wrong in attempt 1");
    second.exit(0);
    await done;
  });
});
