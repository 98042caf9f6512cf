// A daemon's run whose task waits for a person's approval (issue 38): the daemon killed -9 and
// started again, the wait goes on in the resumed run; `termorch approve` (given while no daemon
// ran) is taken, the run answers and merges, the agent having run once.
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { daemonTestFile } from "./daemon-harness.js";
import { lines, termorch, waitFor } from "./harness.js";

const { socket, home, startDaemon, ready, job, answer, readAnswer } = daemonTestFile("daemon-approval");

describe("a daemon's run waiting for approval", () => {
  it("survives kill -9 and a restart: the approval given meanwhile is taken, the agent ran once", async () => {
    const h = home();
    const d = startDaemon(h);
    await ready(h);
    const counter = join(h, "starts");
    const j = job(h, "held", [{ id: "A", approval: "result", env: { COUNTER: counter, WRITE: "a.txt=a" } }]);
    j.drop();
    const runDir = join(h, "runs", "held");
    await waitFor(
      () =>
        existsSync(join(runDir, "events.jsonl")) &&
        readFileSync(join(runDir, "events.jsonl"), "utf8").includes('"task.waiting_approval"'),
      30_000,
      "A waiting for approval",
    );
    d.kill("SIGKILL");
    await d;
    const approved = await termorch(["approve", runDir, "A"], { socket });
    expect(approved.exitCode, approved.stderr).toBe(0);
    void startDaemon(h);
    await waitFor(() => existsSync(answer(h, "held")), 30_000, "the answer after the restart");
    expect(readAnswer(h, "held")).toMatchObject({
      summary: { completed: true },
      merge: { result: "success" },
    });
    expect(readFileSync(join(j.ws.repo, "a.txt"), "utf8")).toBe("a\n");
    expect(lines(counter)).toEqual(["A"]);
  }, 90_000);
});
