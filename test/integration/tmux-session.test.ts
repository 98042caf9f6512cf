// Launching and watching task attempts on a real, private tmux server.
import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdir, readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { RunningAttempt } from "../../src/runner/task-runner.js";
import { LaunchError } from "../../src/tmux/errors.js";
import type { TmuxServer } from "../../src/tmux/server.js";
import {
  groupMembers,
  isAlive,
  makeTmpDir,
  removeDir,
  runnerOf,
  taskSpec,
  testServer,
  waitFor,
} from "../fixtures/tmux-helpers.js";

let server: TmuxServer;
let root: string;

beforeAll(async () => {
  server = testServer();
  root = await makeTmpDir();
});

afterAll(async () => {
  await server.kill();
  await removeDir(root);
});

describe("launch", () => {
  it("passes a hostile argv byte-exact", async () => {
    const big = `${"x".repeat(50_000)};$HOME#{pane_id}\\;${"y".repeat(50_000)}`;
    const args = [";", "y;", "x\\;", "#{pane_id}", "$HOME", "", "a\nb", 'it\'s "quoted"', big];
    const out = join(root, "argv.bin");
    // perl writes its arguments NUL-terminated, so the test compares bytes, not a rendering.
    const spec = taskSpec(root, [
      "perl",
      "-e",
      'open my $f, ">", shift or die; print $f map { "$_\\0" } @ARGV',
      out,
      ...args,
    ]);
    const task = await runnerOf(server).launch(spec);
    const exit = await task.exited;
    expect(exit).toMatchObject({ exit_code: 0, signal: null, lost: false });
    const got = (await readFile(out, "utf8")).split("\0");
    expect(got.pop()).toBe("");
    expect(got).toEqual(args);
  });

  it("gives the agent exactly the environment it was given", async () => {
    const env = {
      PATH: "/usr/bin:/bin",
      ONLY: "value with spaces; and $dollar",
      MULTI: "line1\nline2",
      EMPTY: "",
    };
    const out = join(root, "env.bin");
    const spec = taskSpec(
      root,
      ["perl", "-e", 'open my $f, ">", shift or die; print $f map { "$_=$ENV{$_}\\0" } sort keys %ENV', out],
      { env },
    );
    const exit = await (await runnerOf(server).launch(spec)).exited;
    expect(exit.exit_code).toBe(0);
    const got = (await readFile(out, "utf8")).split("\0").filter(Boolean);
    expect(got).toEqual(
      Object.entries(env)
        .map(([k, v]) => `${k}=${v}`)
        .sort(),
    );
  });

  it("runs in the given cwd, even one with spaces and a #", async () => {
    const cwd = join(root, "dir with #{space};");
    await mkdir(cwd);
    const out = join(root, "cwd.txt");
    const exit = await (
      await runnerOf(server).launch(taskSpec(root, ["sh", "-c", 'pwd > "$1"', "sh", out], { cwd }))
    ).exited;
    expect(exit.exit_code).toBe(0);
    expect((await readFile(out, "utf8")).trim()).toBe(cwd);
  });

  it("copes with an attempt folder whose path has spaces, quotes, # and a trailing ;", async () => {
    for (const tty of [false, true]) {
      const attemptDir = join(root, `odd 'dir' #{pane_id} ${tty};`);
      const spec = taskSpec(root, ["sh", "-c", "echo hello from $0", "odd"], { attemptDir, tty });
      const exit = await (await runnerOf(server).launch(spec)).exited;
      expect(exit).toMatchObject({ exit_code: 0, lost: false });
      expect(await readFile(spec.stdoutLog, "utf8")).toMatch(/hello from odd/);
    }
  });

  it("reports a working directory that does not exist as a launch failure", async () => {
    const spec = taskSpec(root, ["true"], { cwd: join(root, "missing-dir") });
    const exit = await (await runnerOf(server).launch(spec)).exited;
    expect(exit).toMatchObject({ exit_code: 126, launch_failed: true });
    expect(exit.detail).toMatch(/cannot change to directory/);
  });

  it("deletes the launch file (environment, patterns) once the supervisor has read it", async () => {
    const spec = taskSpec(root, ["sh", "-c", "exit 0"], {
      env: { PATH: "/usr/bin:/bin", API_KEY: "s3cr3t-value" },
      redact: ["s3cr3t"],
    });
    const exit = await (await runnerOf(server).launch(spec)).exited;
    expect(exit.exit_code).toBe(0);
    expect(existsSync(join(spec.attemptDir, "launch"))).toBe(false);
    expect(existsSync(join(spec.attemptDir, "env"))).toBe(false);
    expect(existsSync(join(spec.attemptDir, "redact"))).toBe(false);
  });

  it("ships a supervisor and a pane logger that compile without warnings under perl -w", () => {
    // They leave `use warnings` out (1.6 ms of CPU on every task); this keeps them warning-free.
    for (const name of ["supervisor.pl", "pane-logger.pl"]) {
      const source = fileURLToPath(new URL(`../../src/tmux/${name}`, import.meta.url));
      const r = spawnSync("perl", ["-w", "-c", source], { encoding: "utf8" });
      expect(r.status).toBe(0);
      expect(r.stderr.trim()).toBe(`${source} syntax OK`);
    }
  });

  it("records exit code 3", async () => {
    const exit = await (await runnerOf(server).launch(taskSpec(root, ["sh", "-c", "exit 3"]))).exited;
    expect(exit).toMatchObject({ exit_code: 3, signal: null, lost: false, launch_failed: false });
    expect(exit.pid).toBeGreaterThan(1);
    expect(Date.parse(exit.finished_at)).toBeGreaterThanOrEqual(Date.parse(exit.started_at!));
  });

  it("records the real signal of an agent killed by SIGTERM", async () => {
    const exit = await (await runnerOf(server).launch(taskSpec(root, ["sh", "-c", "kill -TERM $$"]))).exited;
    expect(exit).toMatchObject({ exit_code: null, signal: "SIGTERM", lost: false });
  });

  it("records 127 and a message when the command does not exist", async () => {
    const spec = taskSpec(root, ["no-such-command-termorch"]);
    const exit = await (await runnerOf(server).launch(spec)).exited;
    expect(exit).toMatchObject({ exit_code: 127, signal: null, launch_failed: true, lost: false });
    expect(exit.detail).toMatch(/no-such-command-termorch: No such file or directory/);
    expect(await readFile(spec.stderrLog, "utf8")).toMatch(
      /termorch: cannot run the agent: no-such-command-termorch/,
    );
    await waitFor(
      async () => /no-such-command-termorch/.test(await server.capturePane(spec.session)),
      10_000,
      "message in pane",
    );
  });

  it("refuses a second live session of the same attempt with a typed error", async () => {
    const spec = taskSpec(root, ["sleep", "30"]);
    const task = await runnerOf(server).launch(spec);
    await waitFor(() => existsSync(join(spec.attemptDir, "pid")));
    const again = runnerOf(server).launch({ ...spec, attemptDir: join(root, "other-attempt") });
    await expect(again).rejects.toBeInstanceOf(LaunchError);
    await expect(again).rejects.toMatchObject({ code: "duplicate_session" });
    // Relaunching into the live attempt's own folder must leave its files alone.
    await expect(runnerOf(server).launch(spec)).rejects.toMatchObject({ code: "duplicate_session" });
    expect(existsSync(join(spec.attemptDir, "pid"))).toBe(true);
    const exit = await task.stop(5_000);
    expect(exit.signal).toBe("SIGTERM");
  });

  it("launches asked for together share a tmux client and still succeed or fail one by one", async () => {
    const live = taskSpec(root, ["sleep", "30"]);
    const first = await runnerOf(server).launch(live);
    await waitFor(() => existsSync(join(live.attemptDir, "pid")));
    // One command line for all four; the duplicate in the middle fails alone, and the launches
    // after it run again by themselves.
    const specs = [
      taskSpec(root, ["sh", "-c", "exit 0"]),
      { ...live, attemptDir: join(root, "dup-attempt") },
      taskSpec(root, ["sh", "-c", "exit 5"]),
      taskSpec(root, ["sh", "-c", "exit 6"]),
    ];
    const run = server.run.bind(server);
    let clients = 0;
    server.run = (args) => {
      clients += 1;
      return run(args);
    };
    const results = await Promise.allSettled(specs.map((s) => runnerOf(server).launch(s))).finally(() => {
      server.run = run;
    });
    // The batch up to the duplicate, then the two after it together.
    expect(clients).toBe(2);
    expect(results.map((r) => r.status)).toEqual(["fulfilled", "rejected", "fulfilled", "fulfilled"]);
    expect((results[1] as PromiseRejectedResult).reason).toMatchObject({ code: "duplicate_session" });
    const codes = await Promise.all(
      [0, 2, 3].map(
        async (i) => (await (results[i] as PromiseFulfilledResult<RunningAttempt>).value.exited).exit_code,
      ),
    );
    expect(codes).toEqual([0, 5, 6]);
    await first.stop(5_000);
  });

  it("splits a large burst of launches under tmux's command-line limit", async () => {
    // Forty launches are ~25 KB of arguments; one command line over ~16 KB is refused whole.
    const specs = Array.from({ length: 40 }, (_, i) => taskSpec(root, ["sh", "-c", `exit ${i % 7}`]));
    const running = await Promise.all(specs.map((s) => runnerOf(server).launch(s)));
    const codes = await Promise.all(running.map(async (r) => (await r.exited).exit_code));
    expect(codes).toEqual(specs.map((_, i) => i % 7));
    await Promise.all(specs.map((s) => server.killSession(s.session)));
  });

  it("keeps the session (dead pane) after the agent ended", async () => {
    const spec = taskSpec(root, ["sh", "-c", "echo bye; exit 4"]);
    await (await runnerOf(server).launch(spec)).exited;
    expect(await server.hasSession(spec.session)).toBe(true);
    const row = await waitFor(async () => {
      const r = (await server.listPanes()).find((p) => p.session === spec.session);
      // A lost SIGCHLD leaves the pane dead without status until the server is kicked.
      if (r?.dead && r.deadStatus === null) await server.kickChld();
      return r?.dead && r.deadStatus !== null ? r : null;
    });
    expect(row).toMatchObject({ run: spec.runId, task: spec.taskId, attempt: 1, deadStatus: 4 });
  });
});

describe("kill", () => {
  it("ends the agent's whole process group, background grandchildren included", async () => {
    const pids = join(root, "grandchild.pid");
    const spec = taskSpec(root, [
      "sh",
      "-c",
      'sleep 1000 & echo $! > "$1"; sh -c "sleep 1000" & wait',
      "sh",
      pids,
    ]);
    const task = await runnerOf(server).launch(spec);
    const grandchild = Number(
      await waitFor(async () => (await readFile(pids, "utf8").catch(() => "")).trim()),
    );
    const pgid = Number((await readFile(join(spec.attemptDir, "pid"), "utf8")).trim());
    expect(isAlive(grandchild)).toBe(true);
    expect(groupMembers(pgid).length).toBeGreaterThanOrEqual(3);
    const exit = await task.stop(2_000);
    expect(exit).toMatchObject({ signal: "SIGTERM", lost: false });
    expect(isAlive(grandchild)).toBe(false);
    expect(groupMembers(pgid)).toEqual([]);
  });

  it("escalates to SIGKILL when the agent ignores SIGTERM", async () => {
    const ready = join(root, "ignoring.ready");
    const spec = taskSpec(root, [
      "sh",
      "-c",
      'trap "" TERM; touch "$1"; while :; do sleep 1; done',
      "sh",
      ready,
    ]);
    const task = await runnerOf(server).launch(spec);
    await waitFor(() => existsSync(ready));
    const exit = await task.stop(300);
    expect(exit.signal).toBe("SIGKILL");
    expect(groupMembers(exit.pid!)).toEqual([]);
  });

  it("kills an agent whose supervisor has not written its pid yet", async () => {
    const spec = taskSpec(root, ["sleep", "1000"]);
    const task = await runnerOf(server).launch(spec);
    // Immediately: the pid file may or may not exist yet; either way nothing may survive.
    const exit = await task.stop(1_000);
    expect(exit.exit_code === null).toBe(true);
    const pid = exit.pid;
    if (pid !== null) expect(groupMembers(pid)).toEqual([]);
  });
});

describe("leftovers and limits", () => {
  it("ends a background process that outlived the agent, then records the exit", async () => {
    const pidFile = join(root, "leftover.pid");
    const spec = taskSpec(root, ["sh", "-c", 'sleep 1000 & echo $! > "$1"; echo done', "sh", pidFile]);
    const exit = await (await runnerOf(server).launch(spec)).exited;
    expect(exit).toMatchObject({ exit_code: 0, lost: false });
    expect(isAlive(Number((await readFile(pidFile, "utf8")).trim()))).toBe(false);
    expect(await readFile(spec.stdoutLog, "utf8")).toBe("done\n");
    expect(await readFile(spec.stderrLog, "utf8")).toMatch(
      /left 1 process\(es\) running; they were terminated/,
    );
  });

  it("ends a detached leftover that does not hold the pipes", async () => {
    const pidFile = join(root, "quiet-leftover.pid");
    const spec = taskSpec(root, ["sh", "-c", 'sleep 1000 >/dev/null 2>&1 & echo $! > "$1"', "sh", pidFile]);
    const exit = await (await runnerOf(server).launch(spec)).exited;
    expect(exit.exit_code).toBe(0);
    expect(isAlive(Number((await readFile(pidFile, "utf8")).trim()))).toBe(false);
  });

  it("ends a leftover that a job-control shell moved to a process group of its own", async () => {
    // Not in the agent's group, only in its session: found through the supervisor's children (it
    // is the subreaper of the agent's tree) and then the session scan.
    const pidFile = join(root, "job-leftover.pid");
    const script = 'set -m; sleep 1000 >/dev/null 2>&1 & echo $! > "$1"';
    const spec = taskSpec(root, ["bash", "-c", script, "bash", pidFile]);
    const exit = await (await runnerOf(server).launch(spec)).exited;
    expect(exit.exit_code).toBe(0);
    const pid = Number((await readFile(pidFile, "utf8")).trim());
    expect(pid).toBeGreaterThan(1);
    expect(isAlive(pid)).toBe(false);
  });

  it("reaps orphans of a live agent's tree instead of leaving them zombies", async () => {
    // The supervisor is the subreaper of the agent's tree: an orphan that exits while the agent
    // still runs becomes its child, and must be reaped (a zombie keeps /proc/<pid> with state Z).
    const orphan = join(root, "orphan.pid");
    const gate = join(root, "orphan.gate");
    const script = '(sleep 0.1 & echo $! > "$1"); while [ ! -e "$2" ]; do sleep 0.05; done';
    const running = await runnerOf(server).launch(taskSpec(root, ["sh", "-c", script, "sh", orphan, gate]));
    const pid = Number(await waitFor(async () => (await readFile(orphan, "utf8").catch(() => "")).trim()));
    expect(pid).toBeGreaterThan(1);
    await waitFor(() => !existsSync(`/proc/${pid}`), 10_000, "the orphan reaped");
    await writeFile(gate, "");
    expect((await running.exited).exit_code).toBe(0);
  });

  it("applies memory_mb as an address-space limit", async () => {
    const grab = 'my $x = "a" x (300 * 1024 * 1024); print length($x), "\\n"';
    const limited = taskSpec(root, ["perl", "-e", grab], { memoryMb: 100 });
    const free = taskSpec(root, ["perl", "-e", grab], { memoryMb: 2048 });
    const [a, b] = await Promise.all([
      (await runnerOf(server).launch(limited)).exited,
      (await runnerOf(server).launch(free)).exited,
    ]);
    expect(a.exit_code).not.toBe(0);
    expect(await readFile(limited.stderrLog, "utf8")).toMatch(/Out of memory/i);
    expect(b.exit_code).toBe(0);
  });

  it("still reports a missing command as a launch failure under a memory limit", async () => {
    const exit = await (
      await runnerOf(server).launch(taskSpec(root, ["no-such-command-termorch"], { memoryMb: 512 }))
    ).exited;
    expect(exit).toMatchObject({ exit_code: 127, launch_failed: true });
  });
});

describe("exit detection", () => {
  it("reports lost promptly when an operator kills the session", async () => {
    const spec = taskSpec(root, ["sleep", "1000"]);
    const task = await runnerOf(server).launch(spec);
    await waitFor(() => existsSync(join(spec.attemptDir, "pid")));
    const t0 = Date.now();
    expect(await server.killSession(spec.session)).toBe(true);
    const exit = await task.exited;
    expect(exit.lost).toBe(true);
    expect(Date.now() - t0).toBeLessThan(8_000);
    const pid = Number((await readFile(join(spec.attemptDir, "pid"), "utf8")).trim());
    await waitFor(() => groupMembers(pid).length === 0, 10_000, "agent gone after hangup");
  });

  it("reports lost when the session vanished and no exit record exists (adopt)", async () => {
    const exit = await (
      await runnerOf(server).watch({
        session: "termorch-test-never-started",
        attemptDir: join(root, "nothing"),
      })
    ).exited;
    expect(exit).toMatchObject({ lost: true, exit_code: null });
  });

  it("adopts a still-running attempt and resolves when it ends", async () => {
    const go = join(root, "adopt.go");
    const spec = taskSpec(root, ["sh", "-c", 'while [ ! -e "$1" ]; do sleep 0.05; done; exit 7', "sh", go]);
    const first = await runnerOf(server).launch(spec);
    const adopted = await runnerOf(server).watch({
      session: spec.session,
      attemptDir: spec.attemptDir,
      runId: spec.runId,
      taskId: spec.taskId,
      attempt: 1,
    });
    await writeFile(go, "");
    const [a, b] = await Promise.all([adopted.exited, first.exited]);
    expect(a).toMatchObject({ exit_code: 7, lost: false });
    expect(b).toEqual(a);
  });

  it("does not take another attempt's live session for the adopted one", async () => {
    const spec = taskSpec(root, ["sleep", "1000"]);
    const live = await runnerOf(server).launch(spec);
    const other = await runnerOf(server).watch({
      session: spec.session,
      attemptDir: join(root, "attempt-2"),
      attempt: 2,
    });
    const exit = await other.exited;
    expect(exit).toMatchObject({ lost: true, detail: expect.stringMatching(/another attempt/) });
    await live.stop(2_000);
  });

  it("detach stops watching but leaves the attempt running for a later adopt", async () => {
    const go = join(root, "detach.go");
    const spec = taskSpec(root, ["sh", "-c", 'while [ ! -e "$1" ]; do sleep 0.05; done; exit 9', "sh", go]);
    const first = await runnerOf(server).launch(spec);
    first.release();
    expect(await server.hasSession(spec.session)).toBe(true);
    const again = await runnerOf(server).watch(spec);
    await writeFile(go, "");
    expect(await again.exited).toMatchObject({ exit_code: 9, lost: false });
    const settled = await Promise.race([first.exited.then(() => "resolved"), Promise.resolve("pending")]);
    expect(settled).toBe("pending");
  });

  it("adopts a finished attempt from its exit.json", async () => {
    const spec = taskSpec(root, ["sh", "-c", "exit 5"]);
    await (await runnerOf(server).launch(spec)).exited;
    await server.killSession(spec.session);
    const exit = await (await runnerOf(server).watch({ session: spec.session, attemptDir: spec.attemptDir }))
      .exited;
    expect(exit).toMatchObject({ exit_code: 5, lost: false });
  });
});

describe("tty mode", () => {
  it("gives the agent the pane's terminal as foreground group and logs it via pipe-pane", async () => {
    const spec = taskSpec(
      root,
      [
        "sh",
        "-c",
        'test -t 0 && test -t 1 && echo "IS A TTY pgrp=$(ps -o tpgid= -p $$) me=$$"; echo SECRET-abc123',
      ],
      { tty: true, redact: ["SECRET-[a-z0-9]+"] },
    );
    const exit = await (await runnerOf(server).launch(spec)).exited;
    expect(exit).toMatchObject({ exit_code: 0, lost: false });
    const log = await readFile(spec.stdoutLog, "utf8");
    const m = /IS A TTY pgrp=\s*(\d+) me=(\d+)/.exec(log);
    expect(m).not.toBeNull();
    expect(m![1]).toBe(m![2]);
    expect(log).toContain("[REDACTED]");
    expect(log).not.toContain("abc123");
    expect(exit.stdout_bytes).toBeGreaterThan(0);
    expect(await readFile(spec.stderrLog, "utf8")).toBe("");
    expect(existsSync(join(spec.attemptDir, "filter"))).toBe(false);
    expect(await server.capturePane(spec.session)).toContain("SECRET-abc123");
  });

  it("kills a tty agent's group", async () => {
    const ready = join(root, "tty.ready");
    const spec = taskSpec(root, ["sh", "-c", 'sleep 1000 & touch "$1"; wait', "sh", ready], { tty: true });
    const task = await runnerOf(server).launch(spec);
    await waitFor(() => existsSync(ready));
    const exit = await task.stop(2_000);
    expect(exit).toMatchObject({ signal: "SIGTERM", lost: false });
    expect(groupMembers(exit.pid!)).toEqual([]);
  });

  it("reports lost when an operator kills a tty session, and the agent is gone", async () => {
    const spec = taskSpec(root, ["sleep", "1000"], { tty: true });
    const task = await runnerOf(server).launch(spec);
    await waitFor(() => existsSync(join(spec.attemptDir, "pid")));
    const pid = Number((await readFile(join(spec.attemptDir, "pid"), "utf8")).trim());
    await server.killSession(spec.session);
    const exit = await task.exited;
    expect(exit.lost).toBe(true);
    await waitFor(() => groupMembers(pid).length === 0, 10_000, "tty agent gone after hangup");
  });

  it("logs the very first output of a fast tty agent", async () => {
    const spec = taskSpec(root, ["printf", "first-line\\n"], { tty: true });
    const exit = await (await runnerOf(server).launch(spec)).exited;
    expect(exit.exit_code).toBe(0);
    expect(await readFile(spec.stdoutLog, "utf8")).toContain("first-line");
  });
});

describe("latency (measured, not asserted)", () => {
  it("launch to exit detected, 50 `true` tasks", async () => {
    const launchToExit: number[] = [];
    const agentEndToDetected: number[] = [];
    for (let i = 0; i < 50; i += 1) {
      const spec = taskSpec(root, ["true"]);
      const t0 = performance.now();
      const task = await runnerOf(server).launch(spec);
      const exit = await task.exited;
      const detectedAt = Date.now();
      launchToExit.push(performance.now() - t0);
      agentEndToDetected.push(detectedAt - Date.parse(exit.finished_at));
      expect(exit.exit_code).toBe(0);
      await server.killSession(spec.session);
    }
    const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
    const p90 = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length * 0.9)]!;
    console.log(
      `[tmux latency] launch->exit detected: median ${median(launchToExit).toFixed(1)} ms, p90 ${p90(launchToExit).toFixed(1)} ms; ` +
        `agent end->detected: median ${median(agentEndToDetected)} ms, p90 ${p90(agentEndToDetected)} ms (n=50)`,
    );
  });
});
