import { existsSync, lstatSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { execa } from "execa";
import { describe, expect, it } from "vitest";
import {
  BIN,
  cliEnv,
  git,
  killedAfterFile,
  lines,
  ROOT,
  readReport,
  running,
  termorch,
  testFile,
  waitFor,
  writeAssignments,
} from "./harness.js";

const { socket, workspace } = testFile("setup");

/** Processes the set-ups start; any still running when the file ends are killed. */
const started = killedAfterFile();

/** A workspace whose repository ignores `installed/`, `made-by-setup.txt` and nothing else. */
function repoWithIgnores() {
  const ws = workspace();
  writeFileSync(join(ws.repo, ".gitignore"), "installed/\nmade-by-setup.txt\n");
  git(ws.repo, "add", ".gitignore");
  git(ws.repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "ignore");
  return ws;
}

/** An agent script: the given lines, with `set -eu`. */
function agentScript(dir: string, name: string, body: string[]): string {
  const file = join(dir, name);
  writeFileSync(file, ["set -eu", ...body, ""].join("\n"));
  return file;
}

describe("environment.setup_cmd", () => {
  it("runs in the fresh worktree before the agent, with the task's environment and its own logs and gate", async () => {
    const { dir, repo } = repoWithIgnores();
    const agent = agentScript(dir, "agent.sh", [
      // What the set-up left is there when the agent starts.
      "cat made-by-setup.txt > seen-$TERMORCH_TASK_ID.txt",
    ]);
    const file = writeAssignments(
      dir,
      [
        { id: "A", command: ["bash", agent], env: { LEVEL: "7" } },
        { id: "B", command: ["bash", agent], dependencies: ["A"] },
      ],
      {
        environment: {
          setup_cmd:
            'echo "setup $TERMORCH_TASK_ID attempt $TERMORCH_ATTEMPT level [$LEVEL] in $(pwd)" > made-by-setup.txt; echo installing; echo warned >&2',
        },
      },
    );
    const result = await termorch(["run", file], { socket });
    const report = readReport(dir);
    expect(
      report.tasks.map((t) => [t.id, t.status, t.reason]),
      result.stderr,
    ).toEqual([
      ["A", "success", null],
      ["B", "success", null],
    ]);
    expect(result.exitCode).toBe(0);
    const a = report.tasks[0]!;
    expect(a.gates.map((g) => [g.name, g.passed])).toEqual([
      ["setup", true],
      ["core", true],
      ["changes", null],
      ["required_artifacts", null],
      ["allowed_paths", null],
      ["tests_cmd", null],
    ]);
    const gate = a.gates[0]!;
    const logs = /output in (logs\/setup-A-[^ ]+\.out) and (logs\/setup-A-[^ ]+\.err)$/.exec(gate.detail);
    expect(logs, gate.detail).not.toBeNull();
    expect(readFileSync(join(dir, logs![1]!), "utf8")).toBe("installing\n");
    expect(readFileSync(join(dir, logs![2]!), "utf8")).toBe("warned\n");
    // It ran in the task's worktree (not in the workspace), before the agent, with its environment.
    const seenA = readFileSync(join(repo, "seen-A.txt"), "utf8");
    expect(seenA).toMatch(/^setup A attempt 1 level \[7\] in \/.+\n$/);
    expect(seenA).not.toContain(` in ${repo}\n`);
    expect(readFileSync(join(repo, "seen-B.txt"), "utf8")).toMatch(/^setup B attempt 1 level \[\] in /);
    expect(existsSync(join(repo, "made-by-setup.txt"))).toBe(false);
    const events = readFileSync(join(dir, "events.jsonl"), "utf8")
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l) as { type: string; task_id?: string });
    const order = events.filter((e) => e.task_id === "A").map((e) => e.type);
    expect(order.indexOf("task.setup")).toBeGreaterThan(-1);
    expect(order.indexOf("task.setup")).toBeLessThan(order.indexOf("task.launched"));
  });

  it("a failing setup_cmd fails the task with reason setup and starts no agent; no retry without retries", async () => {
    const { dir, repo } = repoWithIgnores();
    const marker = join(dir, "agent-started");
    const setups = join(dir, "setups");
    const file = writeAssignments(
      dir,
      [
        { id: "A", env: { COUNTER: marker } },
        { id: "B", dependencies: ["A"], env: { COUNTER: marker } },
      ],
      { environment: { setup_cmd: `echo run >> ${setups}; echo broken >&2; exit 3` } },
    );
    const result = await termorch(["run", file], { socket });
    expect(result.exitCode).toBe(1);
    const report = readReport(dir);
    const [a, b] = report.tasks;
    expect(a).toMatchObject({
      status: "failed",
      reason: "setup",
      attempts: 1,
      exit_code: null,
      output_log: null,
    });
    expect(a!.detail).toBe(`its setup_cmd failed (${a!.gates[0]!.detail}); no agent was started`);
    expect(b).toMatchObject({ status: "skipped", reason: "dependency_failed" });
    expect(report.summary.failed_tasks).toEqual(["A"]);
    expect(a!.gates.map((g) => [g.name, g.passed])).toEqual([
      ["setup", false],
      ["core", null],
    ]);
    const logs = /^exit code 3; output in (logs\/setup-A-[^ ]+\.out) and (logs\/setup-A-[^ ]+\.err)$/.exec(
      a!.gates[0]!.detail,
    );
    expect(logs, a!.gates[0]!.detail).not.toBeNull();
    expect(readFileSync(join(dir, logs![2]!), "utf8")).toBe("broken\n");
    expect(existsSync(marker)).toBe(false);
    expect(lines(setups)).toEqual(["run"]);
    expect(JSON.parse(readFileSync(join(dir, "status", "A.failed"), "utf8"))).toMatchObject({
      reason: "setup",
    });
    // The summary says where to look.
    expect(result.stdout + result.stderr).toMatch(
      /A: failed \(setup: its setup_cmd failed \(exit code 3; output in logs\/setup-A-/,
    );
    expect(git(repo, "log", "--format=%s").trim().split("\n")).toHaveLength(2);
  });

  it("with retries, a failed setup runs again in the reset worktree (what it installed is gone)", async () => {
    const { dir } = repoWithIgnores();
    const marker = join(dir, "agent-started");
    const setups = join(dir, "setups");
    const file = writeAssignments(dir, [{ id: "A", retries: 1, env: { COUNTER: marker } }], {
      environment: {
        setup_cmd: [
          `if [ -e installed ]; then echo stale >> ${setups}; fi`,
          "mkdir installed && echo x > installed/dep",
          `echo "$TERMORCH_ATTEMPT" >> ${setups}`,
          '[ "$TERMORCH_ATTEMPT" = 2 ]',
        ].join("\n"),
      },
    });
    const result = await termorch(["run", file], { socket });
    const a = readReport(dir).tasks[0]!;
    expect(a.status, `${result.stderr}\n${a.detail}`).toBe("success");
    expect(a.attempts).toBe(2);
    expect(lines(setups)).toEqual(["1", "2"]);
    expect(lines(marker)).toEqual(["A"]);
    expect(a.gates[0]).toMatchObject({ name: "setup", passed: true });
    const events = readFileSync(join(dir, "events.jsonl"), "utf8");
    expect(events).toContain('"type":"task.retrying"');
    expect(events).toMatch(/"reason":"setup"/);
  });

  it("a task's own setup_cmd replaces the environment's", async () => {
    const { dir } = repoWithIgnores();
    const setups = join(dir, "setups");
    const file = writeAssignments(
      dir,
      [{ id: "A" }, { id: "B", setup_cmd: `echo "task:$TERMORCH_TASK_ID" >> ${setups}` }],
      { environment: { setup_cmd: `echo "env:$TERMORCH_TASK_ID" >> ${setups}` } },
    );
    const result = await termorch(["run", file], { socket });
    expect(result.exitCode, result.stderr).toBe(0);
    expect(lines(setups).sort()).toEqual(["env:A", "task:B"]);
  });

  it("a task's setup_cmd alone: tasks without one have no setup gate", async () => {
    const { dir } = repoWithIgnores();
    const setups = join(dir, "setups");
    const file = writeAssignments(dir, [{ id: "A" }, { id: "B", setup_cmd: `echo B >> ${setups}` }]);
    const result = await termorch(["run", file], { socket });
    expect(result.exitCode, result.stderr).toBe(0);
    const [a, b] = readReport(dir).tasks;
    expect(a!.gates[0]!.name).toBe("core");
    expect(b!.gates[0]).toMatchObject({ name: "setup", passed: true });
    expect(lines(setups)).toEqual(["B"]);
  });

  for (const c of [
    { name: "environment.setup_timeout_s", task: { timeout_s: 120 }, env: { setup_timeout_s: 1 } },
    { name: "the task's timeout when no setup_timeout_s is given", task: { timeout_s: 1 }, env: {} },
  ]) {
    it(`times out after ${c.name}: reason setup, no agent`, async () => {
      const { dir } = repoWithIgnores();
      const marker = join(dir, "agent-started");
      const pidFile = join(dir, "setup-pid");
      const file = writeAssignments(dir, [{ id: "A", env: { COUNTER: marker }, ...c.task }], {
        environment: { setup_cmd: `echo $$ > ${pidFile}; exec sleep 1000`, ...c.env },
      });
      const t0 = Date.now();
      const result = await termorch(["run", file], { socket });
      expect(result.exitCode).toBe(1);
      const a = readReport(dir).tasks[0]!;
      expect(a).toMatchObject({ status: "failed", reason: "setup" });
      expect(a.detail).toMatch(
        /^its setup_cmd failed \(timed out; output in logs\/setup-A-.*\); no agent was started$/,
      );
      expect(a.gates[0]!.detail).toMatch(/^timed out; output in logs\/setup-A-/);
      expect(existsSync(marker)).toBe(false);
      expect(Date.now() - t0).toBeLessThan(60_000);
      const pid = Number(readFileSync(pidFile, "utf8"));
      started.push(pid);
      expect(running(pid)).toBe(false);
    });
  }

  it("a setup interrupted by the driver's death runs again on resume", async () => {
    const { dir } = repoWithIgnores();
    const setups = join(dir, "setups");
    const go = join(dir, "go");
    const marker = join(dir, "agent-started");
    const file = writeAssignments(dir, [{ id: "A", env: { COUNTER: marker } }], {
      environment: {
        // The first set-up waits until it is killed; the second passes at once.
        setup_cmd: `echo $$ >> ${setups}; if [ ! -e ${go} ]; then exec sleep 1000; fi`,
      },
    });
    const first = execa(process.execPath, [BIN, "run", file], {
      reject: false,
      cwd: ROOT,
      env: cliEnv(socket),
    });
    await waitFor(() => lines(setups).length > 0, 60_000, "the set-up to start");
    const pid = Number(lines(setups)[0]);
    started.push(pid);
    first.kill("SIGKILL");
    await first;
    // The gate watchdog ends the set-up once its driver is gone.
    await waitFor(() => !running(pid), 15_000, "the interrupted set-up to end");
    expect(existsSync(marker)).toBe(false);
    writeFileSync(go, "");
    const resumed = await termorch(["resume", dir], { socket });
    expect(resumed.exitCode, resumed.stderr).toBe(0);
    expect(lines(setups)).toHaveLength(2);
    expect(lines(marker)).toEqual(["A"]);
    const a = readReport(dir).tasks[0]!;
    expect(a).toMatchObject({ status: "success", attempts: 1 });
    expect(a.gates[0]).toMatchObject({ name: "setup", passed: true });
  });

  it("a cancel ends a running setup: reason cancelled, no agent", async () => {
    const { dir } = repoWithIgnores();
    const setups = join(dir, "setups");
    const marker = join(dir, "agent-started");
    const file = writeAssignments(dir, [{ id: "A", env: { COUNTER: marker } }], {
      environment: { setup_cmd: `echo $$ >> ${setups}; exec sleep 1000` },
    });
    const run = execa(process.execPath, [BIN, "run", file], {
      reject: false,
      cwd: ROOT,
      env: cliEnv(socket),
    });
    await waitFor(() => lines(setups).length > 0, 60_000, "the set-up to start");
    const pid = Number(lines(setups)[0]);
    started.push(pid);
    run.kill("SIGINT");
    const result = await run;
    expect(result.exitCode).toBe(130);
    const a = readReport(dir).tasks[0]!;
    expect(a).toMatchObject({ status: "failed", reason: "cancelled" });
    expect(a.gates[0]).toMatchObject({ name: "setup", passed: false });
    expect(existsSync(marker)).toBe(false);
    expect(running(pid)).toBe(false);
  });

  it("runs in the workspace itself when it is not a git repository", async () => {
    const { dir, repo } = workspace({ git: false });
    const agent = agentScript(dir, "agent.sh", ["cat made-by-setup.txt > seen.txt"]);
    const file = writeAssignments(dir, [{ id: "A", command: ["bash", agent] }], {
      environment: { setup_cmd: "pwd > made-by-setup.txt" },
    });
    const result = await termorch(["run", file], { socket });
    expect(result.exitCode, result.stderr).toBe(0);
    expect(readFileSync(join(repo, "seen.txt"), "utf8")).toBe(`${repo}\n`);
  });
});

describe("environment.worktree_copy", () => {
  function repoWithEnv(ignored: boolean) {
    const ws = workspace();
    if (ignored) {
      writeFileSync(join(ws.repo, ".gitignore"), ".env\nconf/\n");
      git(ws.repo, "add", ".gitignore");
      git(ws.repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "ignore");
    }
    writeFileSync(join(ws.repo, ".env"), "SECRET_URL=postgres://local\n", { mode: 0o600 });
    mkdirSync(join(ws.repo, "conf", "deep"), { recursive: true });
    writeFileSync(join(ws.repo, "conf", "deep", "local.json"), "{}\n");
    return { ...ws, base: git(ws.repo, "rev-parse", "HEAD").trim() };
  }

  for (const ignored of [true, false]) {
    it(`copies .env and a folder into each worktree (${ignored ? "ignored" : "not ignored"}): the agent's edits stay there, never committed, kept across a retry`, async () => {
      const { dir, repo, base } = repoWithEnv(ignored);
      const agent = agentScript(dir, "agent.sh", [
        // A copy, not a link, with the user's content.
        "test -f .env && test ! -L .env && test ! -L conf && test -f conf/deep/local.json",
        'grep -q "SECRET_URL=postgres://local" .env',
        'if [ "$TERMORCH_ATTEMPT" = 1 ]; then echo "EDITED=$TERMORCH_TASK_ID" >> .env; echo edited > conf/deep/local.json; exit 1; fi',
        // The retry's reset kept the copies (with the first attempt's edits).
        'grep -q "EDITED=$TERMORCH_TASK_ID" .env',
        "echo work > work-$TERMORCH_TASK_ID.txt",
        "git add -A && git -c user.name=a -c user.email=a@a commit -q -m 'agent work'",
      ]);
      const file = writeAssignments(
        dir,
        [
          { id: "A", command: ["bash", agent], retries: 1 },
          { id: "B", command: ["bash", agent], retries: 1, dependencies: ["A"] },
        ],
        { environment: { worktree_copy: [".env", "conf/"] } },
      );
      const result = await termorch(["run", file], { socket });
      const report = readReport(dir);
      expect(
        report.tasks.map((t) => [t.id, t.status, t.attempts, t.detail]),
        result.stderr,
      ).toEqual([
        ["A", "success", 2, null],
        ["B", "success", 2, null],
      ]);
      expect(result.exitCode).toBe(0);
      expect(readFileSync(join(repo, ".env"), "utf8")).toBe("SECRET_URL=postgres://local\n");
      expect(readFileSync(join(repo, "conf", "deep", "local.json"), "utf8")).toBe("{}\n");
      expect(readFileSync(join(repo, "work-B.txt"), "utf8")).toBe("work\n");
      expect(
        git(repo, "log", "--full-history", "--format=%H", `${base}..main`, "--", ".env", "conf").trim(),
      ).toBe("");
      expect(git(repo, "ls-tree", "-r", "--name-only", "main")).not.toMatch(/\.env|conf\//);
      for (const id of ["A", "B"])
        expect(readFileSync(join(dir, "artifacts", id, "changes.patch"), "utf8")).not.toMatch(/\.env|conf\//);
      expect(git(repo, "status", "--porcelain", "--untracked-files=no")).toBe("");
    });
  }

  it("each problem is an input error (exit 2, nothing started): missing, tracked, overlapping a worktree_include", async () => {
    const { dir, repo } = workspace();
    writeFileSync(join(repo, ".env"), "X=1\n");
    mkdirSync(join(repo, "node_modules", "pkg"), { recursive: true });
    const marker = join(dir, "agent-started");
    const file = writeAssignments(dir, [{ id: "A", env: { COUNTER: marker } }], {
      environment: {
        worktree_include: ["node_modules"],
        worktree_copy: [".env", "missing.env", "README.md", "node_modules/pkg"],
      },
    });
    const result = await termorch(["run", file], { socket });
    expect(result.exitCode).toBe(2);
    expect(result.stderr).toMatch(
      /environment\.worktree_copy\[1\].*"missing\.env" does not exist in the workspace/,
    );
    expect(existsSync(marker)).toBe(false);
    expect(readdirSync(dir).filter((f) => f === "logs" || f === "status")).toEqual([]);
    // With the missing path gone, the repository's checks speak.
    const again = writeAssignments(
      dir,
      [{ id: "A", env: { COUNTER: marker } }],
      {
        environment: {
          worktree_include: ["node_modules"],
          worktree_copy: [".env", "README.md", "node_modules/pkg"],
        },
      },
      "again.json",
    );
    const second = await termorch(["validate", again], { socket });
    expect(second.exitCode).toBe(2);
    expect(second.stderr).toMatch(
      /environment\.worktree_copy\[1\].*"README\.md" is tracked by git; worktree_copy/,
    );
    expect(second.stderr).toMatch(
      /environment\.worktree_copy\[2\].*overlaps the worktree_include path "node_modules"/,
    );
    expect(existsSync(marker)).toBe(false);
    expect(lstatSync(join(repo, ".env")).isFile()).toBe(true);
  });
});
