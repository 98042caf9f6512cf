import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { execa } from "execa";
import { describe, expect, it } from "vitest";
import { LedgerEntry } from "../../src/contract/ledger-events.js";
import { TmuxServer } from "../../src/tmux/server.js";
import {
  BIN,
  cliEnv,
  filesContaining,
  isAlive,
  killServer,
  ROOT,
  readReport,
  termorch,
  testFile,
  tmuxSessions,
  uniqueSocket,
  waitFor,
  writeAssignments,
} from "./harness.js";

const { socket, workspace } = testFile("life");

describe("run lifecycle", () => {
  it("SIGINT cancels running tasks, skips pending ones, still writes the report and exits 130", async () => {
    const { dir, stamps } = workspace();
    const pidFile = join(dir, "sleeper.pid");
    const file = writeAssignments(dir, [
      { id: "busy", env: { SLEEPER: pidFile, SLEEP: "1000", STAMPS: stamps } },
      { id: "later", dependencies: ["busy"], env: { STAMPS: stamps } },
    ]);
    const child = execa(process.execPath, [BIN, "run", file], {
      reject: false,
      cwd: ROOT,
      env: cliEnv(socket),
    });
    await waitFor(
      () => existsSync(join(dir, "status", "busy.running")) && existsSync(pidFile),
      20_000,
      "busy running",
    );
    child.kill("SIGINT");
    const result = await child;
    expect(result.exitCode).toBe(130);
    const report = readReport(dir);
    const byId = Object.fromEntries(report.tasks.map((t) => [t.id, t]));
    expect(byId.busy).toMatchObject({ status: "failed", reason: "cancelled" });
    expect(byId.later?.status).toBe("skipped");
    expect(report.summary.completed).toBe(false);
    expect(existsSync(join(stamps, "later.start"))).toBe(false);
    const sleeper = Number(readFileSync(pidFile, "utf8"));
    await waitFor(() => !isAlive(sleeper), 10_000, "the agent's process group to be gone");
    // The run is over: its state says so, and there is nothing to resume.
    expect(JSON.parse(readFileSync(join(dir, "state.json"), "utf8")).phase).toBe("reported");
    expect((await termorch(["resume", dir], { socket })).exitCode).toBe(2);
  });

  it("keeps one tmux server alive while several termorch processes start and end on it at once", async () => {
    // Runs starting and closing the shared server together (closeIfIdle's exit-empty) must not
    // end it under another run: a witness session must outlive four concurrent runs.
    const server = new TmuxServer({ socket });
    await server.run(["new-session", "-d", "-s", "witness", "sleep", "1000"]);
    const pid = await server.serverPid();
    const runs = [0, 1, 2, 3].map(() => {
      const { dir } = workspace();
      return { dir, file: writeAssignments(dir, [{ id: "a" }, { id: "b" }, { id: "c" }]) };
    });
    const results = await Promise.all(runs.map((r) => termorch(["run", r.file], { socket })));
    for (const [i, r] of results.entries()) {
      expect(r.exitCode, r.stderr).toBe(0);
      expect(readReport(runs[i]!.dir).summary.completed).toBe(true);
    }
    expect(tmuxSessions(socket)).toContain("witness");
    expect(await server.serverPid()).toBe(pid);
    await server.killSession("witness");
  });

  it("streams a gate's output into a capped log without failing the gate", async () => {
    const { dir } = workspace();
    const file = writeAssignments(
      dir,
      [{ id: "chatty", success_criteria: { tests_cmd: "seq 1 20000; echo done" } }],
      {
        environment: { workspace_dir: "repo", resource_limits: { max_log_bytes: 4096 } },
      },
    );
    expect((await termorch(["run", file], { socket })).exitCode).toBe(0);
    const gate = readReport(dir).tasks[0]!.gates.find((g) => g.name === "tests_cmd")!;
    expect(gate.passed).toBe(true);
    const log = readFileSync(join(dir, gate.detail.match(/logs\/\S+\.out/)![0]), "utf8");
    expect(log).toMatch(/\[termorch: log truncated at 4096 bytes\]\n$/);
  });

  it("redacts secrets of a config agent's env everywhere under the run directory", async () => {
    const { dir } = workspace();
    const secret = "cfg-secret-value-8d1f0a";
    const config = join(dir, "config.json");
    const script =
      'echo "out $AGENT_SECRET"; echo "err $AGENT_SECRET" >&2; echo "$AGENT_SECRET" > "$TERMORCH_ARTIFACTS_DIR/note.txt"; printf "# handoff %s\\n" "$AGENT_SECRET" > handoff.md';
    writeFileSync(
      config,
      JSON.stringify({
        agents: { leak: { command: ["bash", "-c", script], env: { AGENT_SECRET: secret } } },
      }),
    );
    const file = writeAssignments(dir, [{ id: "A" }]);
    const a = JSON.parse(readFileSync(file, "utf8"));
    delete a.tasks[0].command;
    a.tasks[0].agent = "leak";
    writeFileSync(file, JSON.stringify(a));
    // Its handoff.md would be committed with the secret: the secrets gate fails the task instead
    // (the repository is left as it was), and its artifacts are collected and redacted all the same.
    expect((await termorch(["run", file, "--config", config], { socket })).exitCode).toBe(1);
    expect(readReport(dir).tasks[0]).toMatchObject({ status: "failed", reason: "validation" });
    const under = (d: string): string[] => filesContaining(d, secret).filter((f) => f !== "config.json");
    expect(under(dir)).toEqual([]);
    expect(readFileSync(join(dir, "artifacts", "A", "note.txt"), "utf8")).toBe("[REDACTED]\n");
    expect(readFileSync(join(dir, "artifacts", "A", "handoff.md"), "utf8")).toBe("# handoff [REDACTED]\n");
  });

  it('retry_from "base": retries a failed task in a fresh session from the same base', async () => {
    const { dir } = workspace();
    const counter = join(dir, "count");
    const file = writeAssignments(dir, [{ id: "flaky", retries: 2, retry_from: "base" }]);
    const a = JSON.parse(readFileSync(file, "utf8"));
    // Fails the first time (leaving a stray file behind), succeeds the second.
    a.tasks[0].command = [
      "bash",
      "-c",
      `echo x >> ${counter}; if [ $(wc -l < ${counter}) -lt 2 ]; then echo junk > stray.txt; exit 1; fi; test ! -e stray.txt && echo ok > done.txt`,
    ];
    writeFileSync(file, JSON.stringify(a));
    const result = await termorch(["run", file], { socket });
    expect(result.exitCode).toBe(0);
    const report = readReport(dir);
    expect(report.tasks[0]).toMatchObject({ status: "success", attempts: 2 });
    expect(readFileSync(counter, "utf8")).toBe("x\nx\n");
    expect(readFileSync(join(dir, "repo", "done.txt"), "utf8")).toBe("ok\n");
  });

  it("fails a task whose changes leave allowed_paths, and one whose tests_cmd fails", async () => {
    const { dir, repo } = workspace();
    const file = writeAssignments(dir, [
      { id: "sprawl", env: { WRITE: "elsewhere/x.txt=x" }, allowed_paths: ["src/**"] },
      {
        id: "tested",
        env: { WRITE: "src/t.txt=t" },
        success_criteria: { tests_cmd: "grep -q nope src/t.txt" },
      },
      {
        id: "fine",
        env: { WRITE: "src/f.txt=f" },
        allowed_paths: ["src/**"],
        success_criteria: { required_artifacts: ["src/f.txt"], tests_cmd: "grep -q f src/f.txt" },
      },
    ]);
    const before = readFileSync(join(repo, "README.md"), "utf8");
    expect((await termorch(["run", file], { socket })).exitCode).toBe(1);
    const byId = Object.fromEntries(readReport(dir).tasks.map((t) => [t.id, t]));
    expect(byId.sprawl).toMatchObject({
      status: "failed",
      reason: "validation",
      detail: expect.stringMatching(/elsewhere\/x\.txt/),
    });
    expect(byId.tested).toMatchObject({ status: "failed", reason: "validation" });
    expect(byId.tested!.gates.find((g) => g.name === "tests_cmd")?.passed).toBe(false);
    expect(byId.fine!.gates.map((g) => [g.name, g.passed])).toEqual([
      ["core", true],
      ["changes", true],
      ["required_artifacts", true],
      ["allowed_paths", true],
      ["tests_cmd", true],
    ]);
    expect(readdirSync(join(dir, "artifacts", "fine", "files", "src"))).toEqual(["f.txt"]);
    expect(readFileSync(join(repo, "README.md"), "utf8")).toBe(before);
  });

  it("a second run on a locked workspace exits 4 at once; with --wait it runs after the first", async () => {
    const { dir } = workspace();
    const gate = join(dir, "go");
    const first = writeAssignments(dir, [{ id: "hold", env: { WAIT_FILE: gate } }], {}, "first.json");
    mkdirSync(join(dir, "second"));
    const second = writeAssignments(
      dir,
      [{ id: "other", env: { WRITE: "other.txt=o" } }],
      { environment: { workspace_dir: "../repo" } },
      "second/second.json",
    );
    const run1 = termorch(["run", first], { socket });
    await waitFor(
      () => existsSync(join(dir, "status", "hold.running")),
      20_000,
      "first run holding the lock",
    );
    const locked = await termorch(["run", second], { socket });
    expect(locked.exitCode).toBe(4);
    expect(locked.stderr).toMatch(/locked by run t\w+ \(pid \d+/);
    expect(existsSync(join(dir, "second", "execution_report.json"))).toBe(false);
    const waiting = termorch(["run", second, "--wait"], { socket });
    writeFileSync(gate, "");
    expect((await run1).exitCode).toBe(0);
    expect((await waiting).exitCode).toBe(0);
    expect(readReport(join(dir, "second")).merge.result).toBe("success");
  });

  it("gives a tty agent the pane's terminal and logs its output from the pane", async () => {
    const { dir } = workspace();
    const config = join(dir, "config.json");
    writeFileSync(
      config,
      JSON.stringify({
        agents: {
          interactive: { command: ["bash", "-c", "test -t 0 && test -t 1 && echo on-a-tty"], tty: true },
        },
      }),
    );
    const file = writeAssignments(dir, [{ id: "term" }]);
    const a = JSON.parse(readFileSync(file, "utf8"));
    delete a.tasks[0].command;
    a.tasks[0].agent = "interactive";
    writeFileSync(file, JSON.stringify(a));
    const result = await termorch(["run", file, "--config", config], { socket });
    expect(result.exitCode).toBe(0);
    const report = readReport(dir);
    expect(
      await waitFor(
        () => readFileSync(join(dir, report.tasks[0]!.logs.stdout!), "utf8").includes("on-a-tty"),
        5000,
        "pane output in the log",
      ),
    ).toBe(true);
  });

  it("records every decision in a hash-chained ledger that verify-ledger checks", async () => {
    const { dir } = workspace();
    const file = writeAssignments(dir, [{ id: "A" }, { id: "B", dependencies: ["A"] }]);
    expect((await termorch(["run", file], { socket })).exitCode).toBe(0);
    const events = readFileSync(join(dir, "events.jsonl"), "utf8")
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l));
    const types = events.map((e) => `${e.type}${e.task_id ? `:${e.task_id}` : ""}`);
    expect(types).toEqual(
      expect.arrayContaining([
        "run.accepted",
        "run.planned",
        "task.launched:A",
        "task.exited:A",
        "task.success:B",
        "merge.success",
        "report.written",
      ]),
    );
    expect(types.indexOf("task.success:A")).toBeLessThan(types.indexOf("task.launched:B"));
    // Each event is one of the contract's, its data as the contract says (a git run's events too).
    expect(events.filter((e) => !LedgerEntry.safeParse({ type: e.type, data: e.data }).success)).toEqual([]);
    const ok = await termorch(["verify-ledger", dir], { socket });
    expect(ok.exitCode).toBe(0);
    const lines = readFileSync(join(dir, "events.jsonl"), "utf8").split("\n");
    lines[3] = lines[3]!.replace('"type":"', '"type":"x');
    writeFileSync(join(dir, "events.jsonl"), lines.join("\n"));
    const broken = await termorch(["verify-ledger", dir], { socket });
    expect(broken.exitCode).toBe(1);
    expect(broken.stderr).toMatch(/broken at line 4 \(seq 3\)/);
  });

  it("leaves no session and no tmux server behind after a successful run", async () => {
    const { dir } = workspace();
    const own = uniqueSocket("idle");
    const file = writeAssignments(dir, [{ id: "A" }]);
    expect((await termorch(["run", file], { socket: own })).exitCode).toBe(0);
    expect(tmuxSessions(own)).toEqual([]);
    const server = await execa("tmux", ["-L", own, "list-sessions"], { reject: false, env: { TMUX: "" } });
    expect(server.exitCode).not.toBe(0);
    killServer(own);
  });
});

describe("a workspace inside a repository", () => {
  it("runs tasks in that folder of their worktree and checks paths relative to it", async () => {
    const ws = workspace();
    const app = join(ws.repo, "packages", "app");
    mkdirSync(join(app, "ctx"), { recursive: true });
    writeFileSync(join(app, "ctx", "task.md"), "# app task\n");
    writeFileSync(join(app, "index.txt"), "app\n");
    execFileSync("git", ["-C", ws.repo, "add", "-A"]);
    execFileSync("git", ["-C", ws.repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "app"]);
    const file = writeAssignments(
      ws.dir,
      [
        {
          id: "inside",
          env: { WRITE: "src/new.txt=new" },
          allowed_paths: ["src/**"],
          success_criteria: { required_artifacts: ["src/new.txt"] },
        },
        { id: "pwd", command: ["bash", "-c", "test -f index.txt && pwd > where.txt"] },
      ],
      {
        environment: { workspace_dir: "repo/packages/app" },
        success_criteria: {
          required_artifacts: ["src/new.txt", "where.txt"],
          tests_cmd: "test -f index.txt",
        },
      },
    );
    const result = await termorch(["run", file], { socket });
    expect(result.exitCode).toBe(0);
    expect(readFileSync(join(app, "src", "new.txt"), "utf8")).toBe("new\n");
    expect(readFileSync(join(app, "where.txt"), "utf8").trim()).toMatch(/\/pwd\/packages\/app$/);
    expect(existsSync(join(ws.repo, "src"))).toBe(false);
  });
});
