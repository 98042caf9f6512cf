import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { daemonTestFile } from "./daemon-harness.js";
import { git, termorch, waitFor, worktreesInUse } from "./harness.js";

const { socket, home, startDaemon, startDaemonWith, ready, job, answer, readAnswer } =
  daemonTestFile("daemon-crash-after-report");

// Found by the crash campaign (test/reliability/crash.mjs, point daemon:kill-after-report): a
// daemon killed between writing a run's report and marking state.json reported left the run
// "running" for good. The next daemon only forwarded the report: the run was never finished
// (state.json behind the report, merge record, sessions and branches left) and `termorch clean`
// refused it as resumable.
describe("a daemon killed between a run's report and its state", () => {
  it("finishes the run on its next start: state reported, the same outcome, nothing left", async () => {
    const h = home();
    const d = startDaemonWith({ TERMORCH_FAULT: "kill-after-report" }, h);
    await ready(h);
    const j = job(h, "torn", [
      { id: "A", env: { WRITE: "a.txt=a" } },
      { id: "B", env: { WRITE: "b.txt=b" } },
    ]);
    j.drop();
    expect((await d).signal).toBe("SIGKILL");
    const runDir = join(h, "runs", "torn");
    const state = () => JSON.parse(readFileSync(join(runDir, "state.json"), "utf8"));
    expect(existsSync(join(runDir, "execution_report.json"))).toBe(true);
    expect(state().phase).toBe("running");

    const again = startDaemon(h);
    await ready(h);
    await waitFor(
      () => existsSync(answer(h, "torn")) && state().phase === "reported",
      30_000,
      "the run reported",
    );
    again.kill("SIGTERM");
    await again;
    const report = JSON.parse(readFileSync(join(runDir, "execution_report.json"), "utf8"));
    expect(report).toMatchObject({ exit_code: 0, merge: { result: "success" } });
    expect(readAnswer(h, "torn")).toEqual(report);
    const s = state();
    expect(s.exit_code).toBe(0);
    expect(s.tasks.map((t: { state: string }) => t.state)).toEqual(["success", "success"]);
    expect(git(j.ws.repo, "rev-parse", "main").trim()).toBe(report.merge.result_commit);
    expect(git(j.ws.repo, "status", "--porcelain")).toBe("");
    // Merged once: the target is the integration commit itself.
    expect(git(j.ws.repo, "log", "-1", "--format=%s", "main").trim()).toBe("termorch: integrate run torn");
    expect(git(j.ws.repo, "for-each-ref", "refs/heads/termorch/torn/")).toBe("");
    expect(worktreesInUse(j.ws.repo)).toEqual([]);
    const cleaned = await termorch(["clean", "torn"], { socket });
    expect(cleaned.exitCode, cleaned.stdout + cleaned.stderr).toBe(0);
  }, 120_000);
});
