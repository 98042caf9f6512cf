import { existsSync, readdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { execa } from "execa";
import { describe, expect, it } from "vitest";
import { stateOf } from "../fixtures/ops-helpers.js";
import {
  BIN,
  cliEnv,
  git,
  lines,
  ROOT,
  readReport,
  termorch,
  testFile,
  tmuxSessions,
  waitFor,
  writeAssignments,
} from "./harness.js";

const { socket, workspace } = testFile("resume");

describe("resume after SIGKILL", () => {
  for (const when of ["finishes while termorch is down", "is still running at resume"] as const) {
    it(`finishes the run; a task that ${when} is never started twice`, async () => {
      const ws = workspace();
      const { dir, repo } = ws;
      const counter = join(dir, "starts");
      const gate = join(dir, "go");
      const file = writeAssignments(dir, [
        { id: "A", env: { COUNTER: counter, WRITE: "a.txt=A" } },
        { id: "B", dependencies: ["A"], env: { COUNTER: counter, WAIT_FILE: gate, WRITE: "b.txt=B" } },
        { id: "C", dependencies: ["B"], env: { COUNTER: counter, WRITE: "c.txt=C" } },
        { id: "D", env: { COUNTER: counter, WRITE: "d.txt=D" } },
      ]);
      const first = execa(process.execPath, [BIN, "run", file], {
        reject: false,
        cwd: ROOT,
        env: cliEnv(socket),
      });
      await waitFor(
        () => existsSync(join(dir, "status", "B.running")) && existsSync(join(dir, "status", "D.success")),
        30_000,
        "B running",
      );
      first.kill("SIGKILL");
      await first;
      const state = stateOf(dir)!;
      expect(state.phase).toBe("running");
      expect(existsSync(join(dir, "execution_report.json"))).toBe(false);
      const session = state.tasks.find((t) => t.id === "B")!.current.session!;
      expect(tmuxSessions(socket)).toContain(session);

      if (when === "finishes while termorch is down") {
        writeFileSync(gate, "");
        await waitFor(
          () => existsSync(join(dir, ".termorch", state.run_id, "tasks", "B", "1", "exit.json")),
          20_000,
          "B's exit record",
        );
      } else {
        // Release B only once the resumed run has re-adopted it.
        void waitFor(
          () => readFileSync(join(dir, "events.jsonl"), "utf8").includes('"task.adopted"'),
          30_000,
          "adoption",
        ).then(() => writeFileSync(gate, ""));
      }
      const resumed = await termorch(["resume", dir], { socket });
      expect(resumed.stderr).toContain(`resuming ${state.run_id}`);
      expect(resumed.exitCode).toBe(0);
      expect(lines(counter).sort()).toEqual(["A", "B", "C", "D"]);
      const report = readReport(dir);
      expect(report.tasks.map((t) => [t.id, t.status, t.attempts])).toEqual([
        ["A", "success", 1],
        ["B", "success", 1],
        ["C", "success", 1],
        ["D", "success", 1],
      ]);
      expect(report.merge.result).toBe("success");
      for (const f of ["a.txt", "b.txt", "c.txt", "d.txt"]) expect(existsSync(join(repo, f))).toBe(true);
      expect(git(repo, "status", "--porcelain")).toBe("");
      expect((await termorch(["verify-ledger", dir], { socket })).exitCode).toBe(0);
      // A finished run has nothing to resume.
      const again = await termorch(["resume", dir], { socket });
      expect(again.exitCode).toBe(2);
      expect(again.stderr).toMatch(/already finished/);
    });
  }

  it("rewrites the status files a driver killed mid-write left: no finished task still running, no temp file", async () => {
    const { dir } = workspace();
    const gate = join(dir, "go");
    const file = writeAssignments(dir, [
      { id: "A", env: { WRITE: "a.txt=A" } },
      { id: "B", env: { WAIT_FILE: gate, WRITE: "b.txt=B" } },
    ]);
    const first = execa(process.execPath, [BIN, "run", file], {
      reject: false,
      cwd: ROOT,
      env: cliEnv(socket),
    });
    const status = join(dir, "status");
    await waitFor(
      () => existsSync(join(status, "A.success")) && existsSync(join(status, "B.running")),
      30_000,
      "A done, B running",
    );
    first.kill("SIGKILL");
    await first;
    // What a SIGKILL between writing A.success's temp copy and renaming it leaves: the temp copy
    // (named by the dead driver's pid) and A's previous file.
    const done = readFileSync(join(status, "A.success"), "utf8");
    const stray = `.${first.pid}.7.tmp`;
    renameSync(join(status, "A.success"), join(status, stray));
    writeFileSync(join(status, "A.running"), done.replace('"state": "success"', '"state": "running"'));
    writeFileSync(gate, "");
    const resumed = await termorch(["resume", dir], { socket });
    expect(resumed.exitCode, resumed.stderr).toBe(0);
    expect(readdirSync(status).sort()).toEqual(["A.success", "B.success"]);
    expect(JSON.parse(readFileSync(join(status, "A.success"), "utf8"))).toMatchObject({
      task_id: "A",
      state: "success",
    });
    expect(readReport(dir).tasks.map((t) => [t.id, t.status])).toEqual([
      ["A", "success"],
      ["B", "success"],
    ]);
  });

  it("marks a task whose session vanished without an exit record as lost", async () => {
    const ws = workspace();
    const { dir } = ws;
    const counter = join(dir, "starts");
    const file = writeAssignments(dir, [{ id: "gone", env: { COUNTER: counter, SLEEP: "1000" } }]);
    const first = execa(process.execPath, [BIN, "run", file], {
      reject: false,
      cwd: ROOT,
      env: cliEnv(socket),
    });
    // The status file is the supervisor's; the counter line is the agent's own first act.
    await waitFor(() => lines(counter).length === 1, 30_000, "agent started");
    first.kill("SIGKILL");
    await first;
    const state = stateOf(dir)!;
    await execa("tmux", ["-L", socket, "kill-session", "-t", `=${state.tasks[0]!.current.session}`], {
      env: { TMUX: "" },
    });
    const resumed = await termorch(["resume", dir], { socket });
    expect(resumed.exitCode).toBe(1);
    expect(readReport(dir).tasks[0]).toMatchObject({ status: "failed", reason: "lost" });
    expect(lines(counter)).toEqual(["gone"]);
  });
});
