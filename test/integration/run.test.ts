import { execFileSync } from "node:child_process";
import { existsSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { StatusFile } from "../../src/contract/status.js";
import {
  filesContaining,
  git,
  isAlive,
  readReport,
  stamp,
  termorch,
  testFile,
  tmuxSessions,
  waitFor,
  writeAssignments,
} from "./harness.js";

const { socket, workspace } = testFile("run");

describe("termorch run", () => {
  it("runs a diamond DAG in dependency order, each task on its own branch seeing its upstream work", async () => {
    const { dir, repo, stamps } = workspace();
    const env = (id: string) => ({
      STAMPS: stamps,
      WRITE: `out/${id}.txt=${id}`,
      SAY: `hello from ${id}`,
      WARN: `warning from ${id}`,
    });
    const file = writeAssignments(dir, [
      { id: "A", env: env("A") },
      { id: "B", dependencies: ["A"], env: env("B") },
      { id: "C", dependencies: ["A"], env: env("C") },
      { id: "D", dependencies: ["B", "C"], env: env("D") },
    ]);
    const result = await termorch(["run", file, "--max-parallel", "2"], { socket });
    expect(result.stderr).toContain("4/4 tasks succeeded");
    const report = readReport(dir);
    expect(report.waves).toEqual([["A"], ["B", "C"], ["D"]]);
    expect(report.tasks.map((t) => [t.id, t.status, t.exit_code])).toEqual([
      ["A", "success", 0],
      ["B", "success", 0],
      ["C", "success", 0],
      ["D", "success", 0],
    ]);
    // Ordering from the agents' own clocks: every dependency ended before its dependent started.
    for (const [dep, task] of [
      ["A", "B"],
      ["A", "C"],
      ["B", "D"],
      ["C", "D"],
    ] as const) {
      expect(stamp(stamps, dep, "end")).toBeLessThan(stamp(stamps, task, "start"));
    }
    // D's branch holds what A, B and C wrote: it started from its dependencies' merged work.
    const d = report.tasks.find((t) => t.id === "D")!;
    expect(d.branch).toMatch(/^termorch\/.+\/D$/);
    const tree = git(repo, "ls-tree", "-r", "--name-only", d.commit!).split("\n");
    expect(tree).toEqual(expect.arrayContaining(["out/A.txt", "out/B.txt", "out/C.txt", "out/D.txt"]));
    // Separate stdout and stderr logs, named in the report.
    const b = report.tasks.find((t) => t.id === "B")!;
    expect(b.logs.stdout).toMatch(/^logs\/step-\d{8}T\d{9}Z\.out$/);
    expect(readFileSync(join(dir, b.logs.stdout!), "utf8")).toBe("hello from B\n");
    expect(readFileSync(join(dir, b.logs.stderr!), "utf8")).toBe("warning from B\n");
    expect(new Set(report.tasks.map((t) => t.logs.stdout)).size).toBe(4);
    // Status: exactly one file per task, holding the contract's fields.
    const statuses = readdirSync(join(dir, "status")).sort();
    expect(statuses).toEqual(["A.success", "B.success", "C.success", "D.success"]);
    const status = StatusFile.parse(JSON.parse(readFileSync(join(dir, "status", "D.success"), "utf8")));
    expect(status).toMatchObject({
      task_id: "D",
      state: "success",
      socket,
      exit_code: 0,
      reason: null,
      attempt: 1,
    });
    // Artifacts: the patch of the task's own change.
    expect(readFileSync(join(dir, "artifacts", "D", "changes.patch"), "utf8")).toContain("+D");
    expect(report.tasks.find((t) => t.id === "D")!.gates.map((g) => [g.name, g.passed])).toContainEqual([
      "core",
      true,
    ]);
    // Successful sessions are closed once the report is written.
    expect(tmuxSessions(socket).filter((s) => s.includes(report.run_id!))).toEqual([]);
  });

  it("ends a timed-out agent's whole process tree", async () => {
    const { dir } = workspace();
    const pidFile = join(dir, "sleeper.pid");
    const file = writeAssignments(dir, [
      { id: "slow", timeout_s: 1, env: { SLEEPER: pidFile, SLEEP: "1000" } },
    ]);
    const result = await termorch(["run", file, "--clean"], { socket });
    expect(result.exitCode).toBe(1);
    const report = readReport(dir);
    expect(report.tasks[0]).toMatchObject({ status: "failed", reason: "timeout" });
    const sleeper = Number(readFileSync(pidFile, "utf8"));
    await waitFor(() => !isAlive(sleeper), 10_000, "the grandchild to be gone");
    expect(tmuxSessions(socket)).not.toContain(report.tasks[0]!.session);
  });

  it("keeps secrets out of every file it writes", async () => {
    const { dir } = workspace();
    const secret = "sk-live-0123456789abcdefSECRET";
    const file = writeAssignments(dir, [{ id: "leaky" }], {
      environment: { workspace_dir: "repo", env_vars: ["SERVICE_API_KEY"] },
    });
    // The agent echoes the secret to stdout and stderr, and fails (its detail names the logs).
    const assignments = JSON.parse(readFileSync(file, "utf8"));
    assignments.tasks[0].command = [
      "bash",
      "-c",
      'echo "key=$SERVICE_API_KEY"; echo "err=$SERVICE_API_KEY" >&2; exit 1',
    ];
    writeFileSync(file, JSON.stringify(assignments));
    const result = await termorch(["run", file, "--clean"], { socket, env: { SERVICE_API_KEY: secret } });
    expect(result.exitCode).toBe(1);
    const report = readReport(dir);
    expect(readFileSync(join(dir, report.tasks[0]!.logs.stdout!), "utf8")).toBe("key=[REDACTED]\n");
    expect(readFileSync(join(dir, report.tasks[0]!.logs.stderr!), "utf8")).toBe("err=[REDACTED]\n");
    expect(filesContaining(dir, secret)).toEqual([]);
    expect(result.stdout + result.stderr).not.toContain(secret);
  });

  it("lets an operator read a live pane through the status file's socket and session", async () => {
    const { dir } = workspace();
    const gate = join(dir, "release");
    const file = writeAssignments(dir, [
      { id: "live", env: { SAY: "visible-in-the-pane", WAIT_FILE: gate } },
    ]);
    const run = termorch(["run", file], { socket });
    const statusPath = join(dir, "status", "live.running");
    const status = StatusFile.parse(
      JSON.parse(
        await waitFor(
          () => existsSync(statusPath) && readFileSync(statusPath, "utf8"),
          20_000,
          "live.running",
        ),
      ),
    );
    expect(status.session).toMatch(/^termorch-.+-live$/);
    const pane = await waitFor(
      () => {
        const text = execFileSync(
          "tmux",
          ["-S", status.socket_path, "capture-pane", "-p", "-t", `=${status.session}:`],
          { encoding: "utf8", env: { ...process.env, TMUX: "" } },
        );
        return text.includes("visible-in-the-pane") && text;
      },
      10_000,
      "the agent's output in the pane",
    );
    expect(pane).toContain("visible-in-the-pane");
    writeFileSync(gate, "");
    expect((await run).exitCode).toBe(0);
    expect(readdirSync(join(dir, "status"))).toEqual(["live.success"]);
  });
});
