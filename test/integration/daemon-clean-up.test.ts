import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { daemonTestFile } from "./daemon-harness.js";
import { git, termorch, worktreesInUse } from "./harness.js";

const { socket, home, startDaemonWith, ready, job, readAnswer } = daemonTestFile("daemon-clean-up");

describe("the daemon's answer", () => {
  it("is written before the clean-up after the merge, which termorch clean finishes after a crash", async () => {
    const h = home();
    const d = startDaemonWith({ TERMORCH_FAULT: "kill-in-clean-up" }, h);
    await ready(h);
    const j = job(h, "early", [
      { id: "A", env: { WRITE: "a.txt=a" } },
      { id: "B", env: { WRITE: "b.txt=b" } },
    ]);
    j.drop();
    // The fault kills the daemon once the first task worktree went into the pool.
    const died = await d;
    expect(died.signal).toBe("SIGKILL");
    const report = JSON.parse(readFileSync(join(h, "runs", "early", "execution_report.json"), "utf8"));
    expect(report).toMatchObject({ exit_code: 0, merge: { result: "success" } });
    expect(readAnswer(h, "early")).toEqual(report);
    const branches = () =>
      git(j.ws.repo, "for-each-ref", "--format=%(refname)", "refs/heads/termorch/early/");
    expect(branches()).not.toBe("");
    const cleaned = await termorch(["clean", "early"], { socket });
    expect(cleaned.exitCode, cleaned.stdout + cleaned.stderr).toBe(0);
    expect(branches()).toBe("");
    expect(worktreesInUse(j.ws.repo)).toEqual([]);
  }, 120_000);
});
