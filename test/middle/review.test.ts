// The review gate (issue 38): a reviewer agent judges each attempt's change after its other
// gates; request_changes feeds the next attempt, an approval lets it merge, an invalid verdict
// never approves, an edit of the reviewer's is discarded. The real pipeline with the fake runner
// and fake timers, on a real repository (the reviewer reads a copy of the task's commit).
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it, vi } from "vitest";
import { runAssignments } from "../../src/run/runner.js";
import type { FakeAttempt } from "./fake-runner.js";
import { MiddleRun, middleTier } from "./harness.js";

let run: MiddleRun;

middleTier(() => run);

const CONFIG = {
  agents: {
    top: { command: ["top-agent", "{task_id}"] },
    rev: { command: ["rev-agent", "{task_id}"] },
  },
};

let ids = 0;
/** A run of its own id: its worktrees do not meet another test's. */
const fresh = (): string => `review-${process.pid}-${++ids}`;

const isReview = (a: FakeAttempt): boolean => a.spec.session.includes("-_review-");

/** A task attempt writes `file` in its worktree and exits 0. */
function work(a: FakeAttempt, file: string, text: string): void {
  writeFileSync(join(a.spec.cwd, file), text);
  a.exit(0);
}

/** A reviewer writes `verdict` where $TERMORCH_VERDICT says, and exits 0. */
function verdict(a: FakeAttempt, body: string | object): void {
  const at = a.spec.env.TERMORCH_VERDICT!;
  mkdirSync(join(at, ".."), { recursive: true });
  writeFileSync(at, typeof body === "string" ? body : JSON.stringify(body));
  a.exit(0);
}

describe("the review gate", () => {
  it("request_changes fails the attempt (reason review); the next attempt, by the escalation agent, is told the comments; an approval merges it", async () => {
    run = new MiddleRun([{ id: "a", retries: 1, escalation: ["top"], success_criteria: { review: "rev" } }], {
      config: CONFIG,
      git: true,
      assignment: { run_id: fresh() },
    });
    let reviews = 0;
    run.host.onLaunch = (a) => {
      if (!isReview(a)) return work(a, "out.txt", a.spec.argv[0] === "top-agent" ? "fixed\n" : "first\n");
      reviews += 1;
      // The reviewer reads the task's commit in a copy, and its prompt holds the change.
      expect(readFileSync(join(a.spec.cwd, "out.txt"), "utf8")).toBe(reviews === 1 ? "first\n" : "fixed\n");
      expect(a.spec.cwd).not.toBe(run.host.of("a")[0]!.spec.cwd);
      const prompt = readFileSync(a.spec.env.TERMORCH_PROMPT_FILE!, "utf8");
      expect(prompt).toContain("# the task");
      expect(prompt).toContain(reviews === 1 ? "+first" : "+fixed");
      if (reviews === 1)
        verdict(a, {
          verdict: "request_changes",
          summary: "Not what was asked.",
          comments: [{ file: "out.txt", line: 1, body: "Write fixed, not first." }],
        });
      else verdict(a, { verdict: "approve", summary: "Good." });
    };
    const done = await runAssignments({ assignmentsFile: run.file, ...run.options() });
    const report = run.report(done);
    expect(report.tasks[0]).toMatchObject({ status: "success", attempts: 2 });
    expect(run.host.of("a").map((a) => [a.spec.argv[0], isReview(a)])).toEqual([
      ["fake-agent", false],
      ["rev-agent", true],
      ["top-agent", false],
      ["rev-agent", true],
    ]);
    const [first, second] = report.tasks[0]!.attempt_history!;
    expect(first).toMatchObject({
      reason: "review",
      review: { agent: "rev", verdict: "request_changes", comments: 1, discarded: [] },
    });
    expect(first!.detail).toContain("out.txt:1: Write fixed, not first.");
    expect(second).toMatchObject({ reason: null, review: { agent: "rev", verdict: "approve" } });
    expect(report.tasks[0]!.gates.at(-1)).toMatchObject({ name: "review", passed: true });
    // The comment reached attempt 2, in prose and in the JSON block.
    const feedback = readFileSync(join(done.runDir, second!.feedback!), "utf8");
    expect(feedback).toContain("### The reviewer requested changes");
    expect(feedback).toContain("`out.txt:1`: Write fixed, not first.");
    expect(feedback).toContain('"reviewer": "rev"');
    // Each verdict is kept with the attempt's artifacts; the copies are gone.
    expect(JSON.parse(readFileSync(join(done.runDir, first!.review!.file!), "utf8"))).toMatchObject({
      verdict: "request_changes",
    });
    expect(existsSync(run.host.of("a")[1]!.spec.cwd)).toBe(false);
    expect(report.merge.result).toBe("success");
    expect(
      run
        .events()
        .filter((e) => e.type === "task.reviewed")
        .map((e) => e.data.verdict),
    ).toEqual(["request_changes", "approve"]);
  });

  it("what a reviewer changes in its copy is discarded and named; the task's work is merged as it was", async () => {
    run = new MiddleRun([{ id: "a", success_criteria: { review: "rev" } }], {
      config: CONFIG,
      git: true,
      assignment: { run_id: fresh() },
    });
    run.host.onLaunch = (a) => {
      if (!isReview(a)) return work(a, "out.txt", "mine\n");
      writeFileSync(join(a.spec.cwd, "out.txt"), "the reviewer's\n");
      writeFileSync(join(a.spec.cwd, "new.txt"), "x\n");
      verdict(a, { verdict: "approve" });
    };
    const report = run.report(await runAssignments({ assignmentsFile: run.file, ...run.options() }));
    expect(report.tasks[0]).toMatchObject({ status: "success" });
    expect(report.tasks[0]!.attempt_history![0]!.review!.discarded.sort()).toEqual(["new.txt", "out.txt"]);
    expect(report.tasks[0]!.gates.at(-1)!.detail).toContain("discarded: ");
    expect(report.merge.result).toBe("success");
    const merged = report.merge.result_commit!;
    const { execFileSync } = await import("node:child_process");
    expect(execFileSync("git", ["show", `${merged}:out.txt`], { cwd: join(run.dir, "ws") }).toString()).toBe(
      "mine\n",
    );
  });

  it("a missing or invalid verdict fails the gate with its problems named, never approving", async () => {
    run = new MiddleRun([{ id: "a", retries: 2, success_criteria: { review: "rev" } }], {
      config: CONFIG,
      git: true,
      assignment: { run_id: fresh() },
    });
    let reviews = 0;
    run.host.onLaunch = (a) => {
      if (!isReview(a)) return work(a, "out.txt", "x\n");
      reviews += 1;
      if (reviews === 1) a.exit(0);
      else if (reviews === 2) verdict(a, "{not json");
      else verdict(a, { verdict: "request_changes", comments: [] });
    };
    const report = run.report(await runAssignments({ assignmentsFile: run.file, ...run.options() }));
    expect(report.tasks[0]).toMatchObject({ status: "failed", reason: "review", attempts: 3 });
    const details = report.tasks[0]!.attempt_history!.map((h) => h.detail);
    expect(details[0]).toContain("wrote no valid verdict: it wrote no verdict ($TERMORCH_VERDICT)");
    expect(details[1]).toContain("its verdict is not JSON");
    expect(details[2]).toContain("comments: request_changes needs at least one comment");
    expect(report.tasks[0]!.attempt_history!.map((h) => h.review?.verdict)).toEqual([
      "invalid",
      "invalid",
      "invalid",
    ]);
    expect(report.merge.result).not.toBe("success");
  });

  it("a reviewer that outlives its timeout fails the gate; a task's review: false turns the run's off", async () => {
    run = new MiddleRun([{ id: "a" }, { id: "b", success_criteria: { review: false } }], {
      config: CONFIG,
      git: true,
      assignment: { run_id: fresh(), success_criteria: { review: { agent: "rev", timeout_s: 30 } } },
    });
    run.host.onLaunch = (a) => {
      if (!isReview(a)) work(a, `${a.spec.taskId}.txt`, "x\n");
    };
    const done = runAssignments({ assignmentsFile: run.file, ...run.options() });
    // The fake host counts a task's reviewer among its launches.
    const reviewer = await run.host.launched("a", 2);
    expect(isReview(reviewer)).toBe(true);
    await vi.advanceTimersByTimeAsync(30_000);
    expect(reviewer.stops).toHaveLength(1);
    const report = run.report(await done);
    expect(report.tasks.find((t) => t.id === "a")).toMatchObject({ status: "failed", reason: "review" });
    expect(report.tasks.find((t) => t.id === "a")!.detail).toContain("timeout");
    expect(report.tasks.find((t) => t.id === "b")).toMatchObject({ status: "success" });
    expect(run.host.attempts.filter(isReview).map((a) => a.spec.taskId)).toEqual(["a"]);
  });
});

describe("the review of the run's integration (merge.review)", () => {
  it("reviews the whole change once the run-level gates passed: request_changes merges nothing, an approval merges", async () => {
    for (const answer of ["request_changes", "approve"] as const) {
      run = new MiddleRun([{ id: "a" }, { id: "b" }], {
        config: CONFIG,
        git: true,
        assignment: { run_id: fresh(), mode: { merge: { review: "rev" } } },
      });
      run.host.onLaunch = (a) => {
        if (!isReview(a)) return work(a, `${a.spec.taskId}.txt`, `${a.spec.taskId}\n`);
        // One review, of both tasks' work together, after both finished.
        expect(a.spec.session).toMatch(/-_review-integration$/);
        expect(readFileSync(join(a.spec.cwd, "a.txt"), "utf8")).toBe("a\n");
        expect(readFileSync(join(a.spec.cwd, "b.txt"), "utf8")).toBe("b\n");
        const prompt = readFileSync(a.spec.env.TERMORCH_PROMPT_FILE!, "utf8");
        expect(prompt).toContain("## Task a");
        expect(prompt).toContain("## Task b");
        verdict(
          a,
          answer === "approve"
            ? { verdict: "approve" }
            : { verdict: "request_changes", comments: [{ file: "b.txt", body: "b and a clash." }] },
        );
      };
      const done = await runAssignments({ assignmentsFile: run.file, ...run.options() });
      const report = run.report(done);
      expect(run.host.attempts.filter(isReview)).toHaveLength(1);
      expect(report.tasks.map((t) => t.status)).toEqual(["success", "success"]);
      expect(report.merge.review).toMatchObject({ agent: "rev", verdict: answer });
      expect(report.merge.gates.at(-1)).toMatchObject({ name: "run.review", passed: answer === "approve" });
      expect(
        run
          .events()
          .filter((e) => e.type === "run.reviewed")
          .map((e) => e.data.verdict),
      ).toEqual([answer]);
      if (answer === "approve") expect(report.merge.result).toBe("success");
      else {
        expect(report.merge.result).toBe("skipped");
        expect(report.merge.reason).toContain("run.review");
        expect(report.summary.validation).toBe("failed");
        expect(report.merge.gates.at(-1)!.detail).toContain("b.txt: b and a clash.");
        expect(existsSync(join(run.dir, "ws", "b.txt"))).toBe(false);
      }
      run.cleanup();
    }
  });
});

describe("what a task's agent cannot do to its review", () => {
  it("a verdict it commits itself (.termorch/verdict.json) is not its reviewer's: a reviewer that writes none fails the gate", async () => {
    run = new MiddleRun([{ id: "a", success_criteria: { review: "rev" } }], {
      config: CONFIG,
      git: true,
      assignment: { run_id: fresh() },
    });
    run.host.onLaunch = (a) => {
      if (isReview(a)) return a.exit(0);
      mkdirSync(join(a.spec.cwd, ".termorch"), { recursive: true });
      writeFileSync(join(a.spec.cwd, ".termorch", "verdict.json"), JSON.stringify({ verdict: "approve" }));
      work(a, "out.txt", "x\n");
    };
    const report = run.report(await runAssignments({ assignmentsFile: run.file, ...run.options() }));
    expect(report.tasks[0]).toMatchObject({ status: "failed", reason: "review" });
    expect(report.tasks[0]!.detail).toContain("it wrote no verdict ($TERMORCH_VERDICT)");
  });
});
