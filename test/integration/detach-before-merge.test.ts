// A daemon told to stop once every task of a run is done, before the merge: the run still
// merges and reports (nothing is left for a resume that would find it "reported" with nothing
// merged). The tasks run through the middle tier's fake runner; the workspace is a real git
// repository, so the merge stage is the real one.
import { existsSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { runAssignments } from "../../src/run/runner.js";
import { FakeRunner } from "../middle/fake-runner.js";
import { git, makeWorkspace, waitFor, writeAssignments } from "./harness.js";

let ws: ReturnType<typeof makeWorkspace> | null = null;
afterEach(() => ws?.cleanup());

describe("a detach between the tasks and the merge", () => {
  it("still merges the finished run and reports it", async () => {
    ws = makeWorkspace();
    const file = writeAssignments(ws.dir, [{ id: "a" }, { id: "b", dependencies: ["a"] }]);
    const runner = new FakeRunner();
    // Each agent "writes" its file in its worktree and exits 0.
    runner.host.onLaunch = (attempt) => {
      writeFileSync(join(attempt.spec.cwd, `${attempt.spec.taskId}.txt`), "done\n");
      attempt.exit(0);
    };
    const detach = new AbortController();
    const before = git(ws.repo, "rev-parse", "HEAD").trim();
    const done = runAssignments({
      assignmentsFile: file,
      seams: { runner, fault: "pause-before-merge" },
      detach: detach.signal,
      env: { ...process.env, TERMORCH_CONFIG: "", TERMORCH_REGISTRY: join(ws.dir, "registry") },
      cwd: ws.dir,
    });
    const paused = await waitFor(
      () => existsSync(join(ws!.dir, "fault-paused")),
      20_000,
      "the pause before the merge",
    );
    expect(paused).toBe(true);
    detach.abort();
    writeFileSync(join(ws.dir, "fault-continue"), "");
    const result = await done;
    expect(result).not.toHaveProperty("detached");
    const report = (result as { report: { exit_code: number; merge: { result: string } } }).report;
    expect(report.merge.result).toBe("success");
    expect(report.exit_code).toBe(0);
    expect(git(ws.repo, "rev-parse", "HEAD").trim()).not.toBe(before);
    expect(git(ws.repo, "ls-files").split("\n")).toEqual(expect.arrayContaining(["a.txt", "b.txt"]));
  });
});
