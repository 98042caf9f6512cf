// Rate limits and usage caps (issue 37): an attempt whose CLI gave up on one fails with reason
// rate_limited; the task then waits for the limit to lift (the reset its CLI gave, else a
// doubling backoff), shown as waiting_quota, and runs the attempt again without counting it
// against `retries`; within rate_limit.max_wait_s, or it fails; `on: "fail"` fails at once.
// Driven through the real pipeline with the fake runner and fake timers.
import { writeFileSync } from "node:fs";
import { describe, expect, it, vi } from "vitest";
import type { FakeAttempt } from "./fake-runner.js";
import { MiddleRun, middleTier, notifyRecorder } from "./harness.js";

let run: MiddleRun;

middleTier(() => run);

/** opencode's last event when the provider kept answering 429 with `retry-after`. */
function limited(retryAfter: string | null) {
  return (attempt: FakeAttempt) => {
    const error = {
      type: "error",
      sessionID: "ses_1",
      error: {
        name: "APIError",
        data: {
          message: "Rate limit reached for test-model. Please slow down.",
          statusCode: 429,
          isRetryable: true,
          responseHeaders: retryAfter === null ? {} : { "retry-after": retryAfter },
        },
      },
    };
    writeFileSync(attempt.spec.stdoutLog, `${JSON.stringify(error)}\n`);
    attempt.exit(1);
  };
}

function succeeds(attempt: FakeAttempt): void {
  writeFileSync(
    attempt.spec.stdoutLog,
    `${JSON.stringify({ type: "text", sessionID: "ses_1", part: { text: "Done." } })}\n`,
  );
  attempt.exit(0);
}

const opencode = (id: string, extra: object = {}) => ({
  id,
  agent: "opencode",
  command: undefined,
  ...extra,
});

/** The first `n` attempts are rate limited as `first` does, then every one succeeds. */
const limitedThen = (n: number, first: (a: FakeAttempt) => void) => {
  let seen = 0;
  return (attempt: FakeAttempt) => (seen++ < n ? first(attempt) : succeeds(attempt));
};

const waiting = (id: string) => run.until((tasks) => tasks.get(id)?.waiting.quotaUntil != null);

describe("rate limits", () => {
  it("waits until the reset its CLI gave, then runs the attempt again, not counted against retries", async () => {
    run = new MiddleRun([opencode("a", { retries: 0 })], { config: { notify: { command: ["never-run"] } } });
    const { sent, seams } = notifyRecorder();
    const done = run.reportWithPresets(limitedThen(1, limited("3")), { seams });
    await waiting("a");
    expect(run.host.of("a")).toHaveLength(1);
    await vi.advanceTimersByTimeAsync(2_999);
    expect(run.host.of("a")).toHaveLength(1);
    await vi.advanceTimersByTimeAsync(1);
    const report = await done;
    const [t] = report.tasks;
    expect(t).toMatchObject({ status: "success", attempts: 2 });
    const [first, second] = t!.attempt_history!;
    expect(first).toMatchObject({ reason: "rate_limited" });
    expect(first!.detail).toMatch(
      /^its CLI gave up on a rate limit \(429\), which lifts at .*: Rate limit reached/,
    );
    expect(Date.parse(second!.waited_until!) - Date.parse(first!.finished_at!)).toBe(3000);
    expect(first!.resets_at).toBe(second!.waited_until);
    // It is told why it runs again.
    expect(second!.feedback).toBeTruthy();
    const types = run.events().map((e) => e.type);
    expect(types).toContain("task.waiting_quota");
    expect(types.indexOf("task.quota_resumed")).toBeGreaterThan(types.indexOf("task.waiting_quota"));
    expect(sent.find((e) => e.event === "task.waiting_quota")).toMatchObject({
      task_id: "a",
      until: second!.waited_until,
    });
  });

  it("without a reset time, waits a backoff that doubles, within max_wait_s; then fails rate_limited", async () => {
    run = new MiddleRun([
      opencode("a", { retries: 0, rate_limit: { on: "wait", backoff_s: 5, max_wait_s: 20 } }),
    ]);
    const done = run.reportWithPresets(limited(null));
    await waiting("a");
    const again = run.until(
      (tasks) => tasks.get("a")!.attempts === 2 && tasks.get("a")!.waiting.quotaUntil !== null,
    );
    await vi.advanceTimersByTimeAsync(5_000);
    await again;
    await vi.advanceTimersByTimeAsync(10_000);
    const report = await done;
    const [t] = report.tasks;
    // 5 s, then 10 s: a third wait of 20 s would pass 20 s in all.
    expect(t).toMatchObject({ status: "failed", reason: "rate_limited", attempts: 3 });
    expect(t!.detail).toMatch(/would take it past its rate_limit.max_wait_s \(20 s, 15 s waited\)$/);
    expect(t!.attempt_history!.map((h) => h.waited_until !== null)).toEqual([false, true, true]);
  });

  it("on: fail ends the task at once with reason rate_limited", async () => {
    run = new MiddleRun([opencode("a", { retries: 2 })], {
      config: { defaults: { rate_limit: { on: "fail" } } },
    });
    const report = await run.reportWithPresets(limited("3"));
    expect(report.tasks[0]).toMatchObject({ status: "failed", reason: "rate_limited", attempts: 1 });
  });

  it("a task about to start waits for the limit another task of its agent met, rather than meet it again", async () => {
    run = new MiddleRun([opencode("a"), opencode("b"), opencode("c")], {
      assignment: { environment: { workspace_dir: "ws", resource_limits: { max_parallel: 2 } } },
    });
    let first = true;
    const done = run.reportWithPresets((attempt) => {
      if (attempt.spec.taskId === "a" && first) {
        first = false;
        limited("30")(attempt);
      } else if (attempt.spec.taskId !== "b") succeeds(attempt);
    });
    const b = await run.host.launched("b");
    await waiting("a");
    // b's end frees a slot for c, which waits for a's limit to lift.
    const cWaits = waiting("c");
    succeeds(b);
    await cWaits;
    expect(run.host.of("c")).toHaveLength(0);
    await vi.advanceTimersByTimeAsync(29_999);
    expect(run.host.of("c")).toHaveLength(0);
    await vi.advanceTimersByTimeAsync(1);
    const report = await done;
    expect(report.tasks.map((t) => [t.id, t.status, t.attempts])).toEqual([
      ["a", "success", 2],
      ["b", "success", 1],
      ["c", "success", 1],
    ]);
    const cWait = run.events().find((e) => e.type === "task.waiting_quota" && e.task_id === "c");
    expect(cWait?.data.until).toBe(report.tasks[0]!.attempt_history![1]!.waited_until);
  });

  it("a wait is kept across a detach and a resume: the next attempt starts when it was to", async () => {
    run = new MiddleRun([opencode("a")]);
    const { runAssignments, resumeRun } = await import("../../src/run/runner.js");
    const { delimiter, join } = await import("node:path");
    run.host.onLaunch = limitedThen(1, limited("60"));
    const detach = new AbortController();
    const options = run.options({ detach: detach.signal });
    const path = `${join(import.meta.dirname, "..", "fixtures", "agents")}${delimiter}${process.env.PATH}`;
    const first = runAssignments({
      assignmentsFile: run.file,
      ...options,
      env: { ...options.env, PATH: path },
    });
    await waiting("a");
    const until = Date.parse(String(run.events().find((e) => e.type === "task.waiting_quota")?.data.until));
    detach.abort();
    expect("detached" in (await first)).toBe(true);
    await vi.advanceTimersByTimeAsync(20_000);
    const again = run.options();
    const resumed = resumeRun({ runDir: run.dir, ...again, env: { ...again.env, PATH: path } });
    await waiting("a");
    expect(run.host.of("a")).toHaveLength(1);
    await vi.advanceTimersByTimeAsync(39_999);
    expect(run.host.of("a")).toHaveLength(1);
    await vi.advanceTimersByTimeAsync(1);
    const report = run.report(await resumed);
    expect(report.tasks[0]).toMatchObject({ status: "success", attempts: 2 });
    expect(Date.parse(report.tasks[0]!.attempt_history![1]!.waited_until!)).toBe(until);
  });
});

/** Claude Code's result of a success. */
function claudeSucceeds(attempt: FakeAttempt): void {
  writeFileSync(
    attempt.spec.stdoutLog,
    `${JSON.stringify({ type: "result", subtype: "success", is_error: false, result: "Done.", session_id: "s" })}\n`,
  );
  attempt.exit(0);
}

/** Claude Code's result when the API kept answering 429. */
function claudeLimited(attempt: FakeAttempt): void {
  writeFileSync(
    attempt.spec.stdoutLog,
    `${JSON.stringify({ type: "result", subtype: "success", is_error: true, api_error_status: 429, result: "API Error: Request rejected (429) · rate limited", session_id: "s" })}\n`,
  );
  attempt.exit(1);
}

const ranOn = (attempt: FakeAttempt): string =>
  attempt.spec.argv.some((a) => a.endsWith("claude")) ? "claude" : "opencode";

describe("rate limits: fallback", () => {
  it("hands the attempt to the next fallback agent at once; later tasks of the limited agent start on it until the limit lifts", async () => {
    const fallback = { on: "fallback", fallback: ["claude"] };
    run = new MiddleRun([
      opencode("a", { rate_limit: fallback }),
      opencode("b", { rate_limit: fallback, dependencies: ["a"] }),
      opencode("c", { rate_limit: fallback, dependencies: ["b"] }),
    ]);
    let opencodeLimited = true;
    const done = run.reportWithPresets((attempt) => {
      if (attempt.spec.taskId === "b") return;
      if (ranOn(attempt) === "claude") claudeSucceeds(attempt);
      else if (opencodeLimited) {
        opencodeLimited = false;
        limited("60")(attempt);
      } else succeeds(attempt);
    });
    // b starts on claude though its agent is opencode: opencode's limit lifts in 60 s.
    const b = await run.host.launched("b");
    expect(ranOn(b)).toBe("claude");
    // Once it lifted, c starts on its own agent.
    await vi.advanceTimersByTimeAsync(61_000);
    claudeSucceeds(b);
    const report = await done;
    const [a, bt, c] = report.tasks;
    expect(a).toMatchObject({ status: "success", attempts: 2 });
    expect(a!.attempt_history!.map((h) => [h.agent, h.reason, h.fallback_for])).toEqual([
      ["opencode", "rate_limited", null],
      ["claude", null, "opencode"],
    ]);
    // No wait: the fallback ran at once.
    expect(a!.attempt_history![1]!.waited_until).toBeNull();
    expect(bt!.attempt_history!.map((h) => [h.agent, h.fallback_for])).toEqual([["claude", "opencode"]]);
    expect(c!.attempt_history!.map((h) => [h.agent, h.fallback_for])).toEqual([["opencode", null]]);
    const retrying = run.events().find((e) => e.type === "task.retrying");
    expect(retrying?.data).toMatchObject({ reason: "rate_limited", fallback_to: "claude" });
  });

  it("with its fallback list used up, waits as on: wait does", async () => {
    run = new MiddleRun([opencode("a", { rate_limit: { on: "fallback", fallback: ["claude"] } })]);
    let n = 0;
    const done = run.reportWithPresets((attempt) => {
      n++;
      if (n === 1) limited("5")(attempt);
      else if (n === 2) claudeLimited(attempt);
      else claudeSucceeds(attempt);
    });
    await waiting("a");
    // claude said no reset time: the default backoff, 60 s.
    await vi.advanceTimersByTimeAsync(60_000);
    const report = await done;
    expect(
      report.tasks[0]!.attempt_history!.map((h) => [h.agent, h.reason, h.waited_until !== null]),
    ).toEqual([
      ["opencode", "rate_limited", false],
      ["claude", "rate_limited", false],
      ["claude", null, true],
    ]);
  });

  it("one policy for the task: its own agent entry's fallback list goes on past the first fallback, whose entry sets none", async () => {
    run = new MiddleRun([opencode("a")], {
      config: {
        agents: {
          opencode: { preset: "opencode", rate_limit: { on: "fallback", fallback: ["claude", "gemini"] } },
        },
      },
    });
    const report = await run.reportWithPresets((attempt) => {
      const argv = attempt.spec.argv.join(" ");
      if (argv.includes("gemini")) {
        writeFileSync(attempt.spec.stdoutLog, `${JSON.stringify({ response: "Done.", stats: {} })}\n`);
        attempt.exit(0);
      } else if (ranOn(attempt) === "claude") claudeLimited(attempt);
      else limited("600")(attempt);
    });
    expect(report.tasks[0]!.attempt_history!.map((h) => [h.agent, h.reason, h.fallback_for])).toEqual([
      ["opencode", "rate_limited", null],
      ["claude", "rate_limited", "opencode"],
      // In place of the agent limited just before it.
      ["gemini", null, "claude"],
    ]);
  });
});
