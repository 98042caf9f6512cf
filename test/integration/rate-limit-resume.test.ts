// A driver killed while a task waits for a rate limit to lift (issue 37): the wait's end is in
// the task journal, so a resume waits until that same moment, then runs the next attempt once.
// The agent is the opencode stand-in, which answers its first attempt as the real CLI does when
// the provider kept refusing with 429 and retry-after 4.
import { readFileSync } from "node:fs";
import { delimiter, join } from "node:path";
import { describe, expect, it } from "vitest";
import { ROOT, readReport, termorch, testFile, writeAssignments } from "./harness.js";

const { socket, workspace } = testFile("rate-limit-resume");
const STUBS = join(ROOT, "test", "fixtures", "agents");

describe("a driver killed during a rate limit's wait", () => {
  it("resumes the wait where it was: the next attempt starts when the limit lifts, once", async () => {
    const { dir } = workspace();
    const argvLog = join(dir, "argv.jsonl");
    const file = writeAssignments(dir, [
      {
        id: "T",
        agent: "opencode",
        command: undefined,
        expect_changes: true,
        env: { STUB_LIMITED_UNTIL_ATTEMPT: "2", STUB_RETRY_AFTER: "4", STUB_ARGV_LOG: argvLog },
      },
    ]);
    const env = { PATH: `${STUBS}${delimiter}${process.env.PATH}` };
    const first = await termorch(["run", file], {
      socket,
      env: { ...env, TERMORCH_FAULT: "kill-while-waiting-quota:T" },
    });
    expect(first.exitCode).toBe(-1); // SIGKILLed by the fault
    const waited = readFileSync(join(dir, "events.jsonl"), "utf8")
      .split("\n")
      .filter((l) => l.includes('"task.waiting_quota"'))
      .map((l) => (JSON.parse(l) as { data: { until: string } }).data.until);
    expect(waited).toHaveLength(1);

    const resumed = await termorch(["resume", dir], { socket, env });
    expect(resumed.exitCode, resumed.stderr).toBe(0);
    const t = readReport(dir).tasks[0]!;
    expect(t).toMatchObject({ status: "success", attempts: 2 });
    const [limited, again] = t.attempt_history!;
    expect(limited).toMatchObject({ reason: "rate_limited" });
    expect(again!.waited_until).toBe(waited[0]);
    expect(Date.parse(again!.started_at!)).toBeGreaterThanOrEqual(Date.parse(waited[0]!));
    // Its agent ran once per attempt.
    expect(readFileSync(argvLog, "utf8").split("\n").filter(Boolean)).toHaveLength(2);
  }, 90_000);
});
