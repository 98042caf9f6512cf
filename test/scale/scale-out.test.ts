import { execFileSync } from "node:child_process";
import { existsSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { expect, it } from "vitest";
import {
  git,
  readReport,
  termorch,
  waitFor,
  workspaceSnapshot,
  writeAssignments,
} from "../integration/harness.js";
import { has } from "../needs.js";
import { bashTask, freePort, lines, RedisServer, scaleTestFile, WorkerProcess } from "./cluster.js";

/**
 * The bullmq backend with real parts: a private redis-server, two `termorch worker` processes
 * (own tmux sockets, workdirs and TMPDIRs), a bare git remote, and the built CLI as coordinator.
 */

const { socket, redis, worker, cluster, track, suite } = scaleTestFile("scale");
const task = bashTask;

suite("termorch run --backend bullmq", () => {
  it("spreads a diamond over two workers and merges exactly what a local run merges", async () => {
    const w1 = await worker("dia1", ["--max-parallel", "1"]);
    const w2 = await worker("dia2", ["--max-parallel", "1"]);
    const diamond = (marks: string): Record<string, unknown>[] => [
      task("A", "printf 'from A\\n' > a.txt; echo A done"),
      // B and C wait for each other: they run at once, so on two workers of one slot each.
      task(
        "B",
        'touch "$MARKS/B"; while [ ! -e "$MARKS/C" ]; do sleep 0.05; done; cat a.txt > b.txt; echo B >> b.txt',
        ["A"],
        marks,
      ),
      task(
        "C",
        'touch "$MARKS/C"; while [ ! -e "$MARKS/B" ]; do sleep 0.05; done; printf "C\\n" > c.txt',
        ["A"],
        marks,
      ),
      task("D", "cat b.txt c.txt > d.txt; mkdir -p out && echo D > out/d", ["B", "C"]),
    ];
    const remoteRun = cluster();
    const file = writeAssignments(remoteRun.dir, diamond(remoteRun.marks) as never);
    const r = await termorch(["run", file, "--config", remoteRun.config], { socket });
    expect(r.stderr).toContain("4/4 tasks succeeded");
    expect(r.exitCode).toBe(0);
    const report = readReport(remoteRun.dir);
    const hostOf = new Map(report.tasks.map((t) => [t.id, t.hosts?.map((h) => h.worker) ?? []]));
    // Every task ran once, on a worker, and both workers ran some.
    for (const t of report.tasks) expect(hostOf.get(t.id)).toHaveLength(1);
    expect(new Set([...hostOf.values()].flat())).toEqual(new Set([w1.name, w2.name]));
    expect(hostOf.get("B")).not.toEqual(hostOf.get("C"));
    // The logs came back: A's stdout is in the coordinator's run directory.
    const a = report.tasks.find((t) => t.id === "A")!;
    expect(readFileSync(join(remoteRun.dir, a.logs.stdout!), "utf8")).toContain("A done");

    const local = cluster();
    const localFile = writeAssignments(local.dir, diamond(local.marks) as never);
    const l = await termorch(["run", localFile], { socket });
    expect(l.exitCode).toBe(0);
    // Byte-identical result: the same tree at the same place.
    expect(git(remoteRun.repo, "rev-parse", "HEAD^{tree}")).toBe(git(local.repo, "rev-parse", "HEAD^{tree}"));
    expect(readFileSync(join(remoteRun.repo, "d.txt"), "utf8")).toBe("from A\nB\nC\n");
    expect(git(remoteRun.repo, "status", "--porcelain")).toBe("");
    // The run's refs on the remote went with its merged branches; the workers kept no task folder.
    expect(git(remoteRun.remote, "for-each-ref")).toBe("");
    for (const w of [w1, w2]) expect(readdirSync(join(w.workdir, "jobs"))).toEqual([]);
    // Nor did Redis keep the run's jobs (their results carry logs) once their ends were recorded.
    const keys = execFileSync(
      "redis-cli",
      ["-p", String(redis().port), "--scan", "--pattern", `*${report.run_id}*`],
      {
        encoding: "utf8",
      },
    );
    expect(keys.trim()).toBe("");
    // `status --redis` lists both workers.
    const status = await termorch(["status", "--redis", redis().url], { socket });
    expect(status.stdout).toContain(`${w1.name}: host`);
    expect(status.stdout).toContain(`${w2.name}: host`);
    await w1.dispose();
    await w2.dispose();
  });

  it("takes over the task of a worker killed mid-task, runs it once to completion and merges it once", async () => {
    const takeover = ["--max-parallel", "1", "--takeover-s", "2"];
    const c = cluster();
    const log = join(c.marks, "log");
    const release = join(c.marks, "release");
    const script = `echo "start $TERMORCH_ATTEMPT" >> "$MARKS/log"; while [ ! -e "$MARKS/release" ]; do sleep 0.05; done; echo X > x.txt; echo end >> "$MARKS/log"`;
    const file = writeAssignments(c.dir, [task("X", script, [], c.marks)] as never);
    const first = await worker("kill1", takeover);
    const run = termorch(["run", file, "--config", c.config], { socket });
    await waitFor(() => lines(log).length === 1, 30_000, "the first start");
    // Only one worker exists yet, so the first start is its.
    const second = await worker("kill2", takeover);
    await first.kill();
    await waitFor(() => lines(log).length === 2, 30_000, "the takeover by the other worker");
    // The killed worker comes back: it ends the session its earlier life left (the agent still waits there).
    const back = track(new WorkerProcess(first.name, redis().url, takeover));
    const said = await back.start();
    await waitFor(
      () => back.output.includes("ended 1 session(s)") && back.output,
      10_000,
      "the stale session ended",
    );
    expect(said + back.output).toContain("ended 1 session(s)");
    writeFileSync(release, "");
    const r = await run;
    expect(r.exitCode).toBe(0);
    expect(lines(log).filter((l) => l.startsWith("start"))).toHaveLength(2);
    expect(lines(log).filter((l) => l === "end")).toHaveLength(1);
    const x = readReport(c.dir).tasks[0]!;
    expect(x.status).toBe("success");
    expect(x.hosts?.map((h) => h.worker)).toEqual([first.name, second.name]);
    expect(x.attempts).toBe(2);
    // Merged once: one task commit of X on the user's branch.
    expect(
      git(c.repo, "log", "--format=%s")
        .split("\n")
        .filter((s) => s.startsWith("termorch: task X")),
    ).toHaveLength(1);
    expect(readFileSync(join(c.repo, "x.txt"), "utf8")).toBe("X\n");
    await back.dispose();
    await second.dispose();
  });

  /**
   * A worker paused (SIGSTOP) mid-task past its lock, so that another takes the task over; both
   * agents then end (the paused worker's agent runs on in its tmux). `hold`: a hook on the bare
   * remote resumes the paused worker when the other's push arrives, and holds that push 3 s.
   */
  async function pausedWorker(tag: string, hold: boolean) {
    const takeover = ["--max-parallel", "1", "--takeover-s", "2"];
    const c = cluster();
    const log = join(c.marks, "log");
    const script = `echo start >> "$MARKS/log"; while [ ! -e "$MARKS/release" ]; do sleep 0.05; done; echo P > p.txt; echo end >> "$MARKS/log"`;
    const file = writeAssignments(c.dir, [task("P", script, [], c.marks)] as never);
    const runId = (JSON.parse(readFileSync(file, "utf8")) as { run_id: string }).run_id;
    const paused = await worker(`${tag}1`, takeover);
    const pid = paused.proc!.pid!;
    if (hold) {
      const hook = join(c.remote, "hooks", "pre-receive");
      writeFileSync(
        hook,
        // Only the first push of the task's work (the other worker's) is held: the paused one's, if
        // it pushes, lands meanwhile.
        `#!/bin/sh\nwhile read old new ref; do case "$ref" in */attempts/*|refs/heads/termorch/*) if mkdir "${c.marks}/held" 2>/dev/null; then kill -CONT ${pid}; sleep 3; fi;; esac; done\nexit 0\n`,
        { mode: 0o755 },
      );
    }
    const run = termorch(["run", file, "--config", c.config], { socket });
    await waitFor(() => lines(log).length === 1, 30_000, "the first start");
    const other = await worker(`${tag}2`, takeover);
    process.kill(pid, "SIGSTOP");
    try {
      await waitFor(() => lines(log).length === 2, 30_000, "the takeover by the other worker");
      writeFileSync(join(c.marks, "release"), "");
      const r = await run;
      process.kill(pid, "SIGCONT");
      // The paused worker, going on, finds it lost the job: it publishes nothing.
      const workerLog = join(paused.workdir, "logs", "termorch.log");
      await waitFor(
        () => existsSync(workerLog) && readFileSync(workerLog, "utf8").includes("lost the task's job"),
        30_000,
        "the paused worker's word that it lost the job",
      );
      return { c, r, runId, other, paused };
    } finally {
      process.kill(pid, "SIGCONT");
    }
  }

  it("publishes nothing from a worker paused past its lock: the task is taken over, merged once, and nothing of the run is left on the remote or in Redis", async () => {
    const { c, r, runId, other, paused } = await pausedWorker("pause", false);
    expect(r.exitCode, r.stderr).toBe(0);
    expect(readReport(c.dir).tasks[0]).toMatchObject({ status: "success" });
    expect(readReport(c.dir).tasks[0]?.hosts?.map((h) => h.worker)).toEqual([paused.name, other.name]);
    expect(
      git(c.repo, "log", "--format=%s")
        .split("\n")
        .filter((s) => s.startsWith("termorch: task P")),
    ).toHaveLength(1);
    // A moment for a late push or result to land, were there one: the worker's clean-up after it.
    await waitFor(
      () => readdirSync(join(paused.workdir, "jobs")).length === 0,
      30_000,
      "its job folder gone",
    );
    expect(git(c.remote, "for-each-ref")).toBe("");
    const keys = execFileSync(
      "redis-cli",
      ["-p", String(redis().port), "--scan", "--pattern", `*${runId}*`],
      {
        encoding: "utf8",
      },
    );
    expect(keys.trim()).toBe("");
    await other.dispose();
    await paused.dispose();
  });

  it("keeps a resumed worker from overwriting the push of the worker that took its task over (a hook resumes it mid-push)", async () => {
    const { c, r, other, paused } = await pausedWorker("clobber", true);
    expect(r.exitCode, r.stderr).toBe(0);
    expect(readReport(c.dir).tasks[0]).toMatchObject({ status: "success" });
    expect(readFileSync(join(c.repo, "p.txt"), "utf8")).toBe("P\n");
    expect(
      git(c.repo, "log", "--format=%s")
        .split("\n")
        .filter((s) => s.startsWith("termorch: task P")),
    ).toHaveLength(1);
    await other.dispose();
    await paused.dispose();
  });

  it("loses no task when Redis restarts mid-run", async () => {
    const w = await worker("restart");
    const c = cluster();
    const log = join(c.marks, "log");
    const script = `echo start >> "$MARKS/log"; while [ ! -e "$MARKS/release" ]; do sleep 0.05; done; echo Y > y.txt; echo end >> "$MARKS/log"`;
    const file = writeAssignments(c.dir, [
      task("Y", script, [], c.marks),
      task("Z", "echo Z > z.txt", ["Y"]),
    ] as never);
    const run = termorch(["run", file, "--config", c.config], { socket });
    await waitFor(() => lines(log).length === 1, 30_000, "Y's start");
    await redis().stop();
    await redis().start();
    writeFileSync(join(c.marks, "release"), "");
    const r = await run;
    expect(r.stderr).toContain("2/2 tasks succeeded");
    expect(r.exitCode).toBe(0);
    expect(lines(log)).toEqual(["start", "end"]);
    expect(readFileSync(join(c.repo, "z.txt"), "utf8")).toBe("Z\n");
    await w.dispose();
  });

  it.runIf(has("bwrap", "test/scale/scale-out.test.ts (sandboxed)"))(
    "runs a sandboxed task in its sandbox on the worker, and merges the commit its agent made there",
    async () => {
      const w = await worker("sbx1");
      const run = cluster();
      writeFileSync(join(run.marks, "secret"), "worker-side secret\n");
      const script = [
        'cat "$MARKS/secret" >/dev/null 2>&1 && echo read=open || echo read=blocked',
        "echo sandboxed > s.txt && git add s.txt",
        "git -c user.name=agent -c user.email=agent@example.com commit -qm 'committed in the sandbox'",
      ].join("; ");
      const file = writeAssignments(run.dir, [
        { ...task("S", script, [], run.marks), sandbox: { network: "none" } },
      ] as never);
      const r = await termorch(["run", file, "--config", run.config], { socket });
      expect(r.exitCode, r.stderr).toBe(0);
      const s = readReport(run.dir).tasks[0]!;
      expect(readFileSync(join(run.dir, s.logs.stdout!), "utf8")).toContain("read=blocked");
      expect(readFileSync(join(run.repo, "s.txt"), "utf8")).toBe("sandboxed\n");
      expect(git(run.repo, "log", "--format=%s", "-3")).toContain("committed in the sandbox");
      // The next tests' jobs are for their own workers.
      await w.dispose();
    },
  );

  it("runs a task's escalated attempt on the worker with the next agent, and names it here", async () => {
    const w = await worker("esc1");
    const c = cluster();
    // The coordinator's config travels with the job: the worker resolves the same agents.
    const config = JSON.parse(readFileSync(c.config, "utf8"));
    config.agents = { better: { command: ["bash", "-c", "echo better > e.txt; echo better ran"] } };
    writeFileSync(c.config, JSON.stringify(config));
    const file = writeAssignments(c.dir, [
      { ...task("E", "echo first try; exit 1"), retries: 1, escalation: ["better"] },
    ] as never);
    const r = await termorch(["run", file, "--config", c.config], { socket });
    expect(r.exitCode, r.stderr).toBe(0);
    const e = readReport(c.dir).tasks[0]!;
    expect(e).toMatchObject({ status: "success", attempts: 2, agent: "step" });
    expect(e.escalation).toEqual([
      { agent: "better", argv: ["bash", "-c", "echo better > e.txt; echo better ran"] },
    ]);
    expect(e.logs.stdout).toMatch(/^logs\/better-/);
    // The worker told attempt 2 what went wrong: its section came back with the artifacts.
    expect(e.attempt_history!.map((a) => [a.n, a.agent, a.reason, a.feedback])).toEqual([
      [1, "step", "exit_code", null],
      [2, "better", null, "artifacts/E/attempt-2/feedback.md"],
    ]);
    expect(readFileSync(join(c.dir, "artifacts/E/attempt-2/feedback.md"), "utf8")).toContain(
      "## What went wrong in attempt 1",
    );
    expect(readFileSync(join(c.dir, e.logs.stdout!), "utf8")).toContain("better ran");
    expect(readFileSync(join(c.repo, "e.txt"), "utf8")).toBe("better\n");
    expect(git(c.repo, "log", "--format=%s", "-5").split("\n")).toContainEqual(
      expect.stringMatching(/^termorch: task E \(agent better, run \S+, attempt 2\)$/),
    );
    const launched = readFileSync(join(c.dir, "events.jsonl"), "utf8")
      .split("\n")
      .filter(Boolean)
      .map((l) => JSON.parse(l) as { type: string; data: { attempt: number; agent?: string } })
      .filter((l) => l.type === "task.launched");
    expect(launched.map((l) => [l.data.attempt, l.data.agent])).toEqual([
      [1, "step"],
      [2, "better"],
    ]);
    await w.dispose();
  });

  it("holds an agent's max_parallel across both workers: never more of its tasks at once, whatever their slots", async () => {
    const w1 = await worker("cap1", ["--max-parallel", "2"]);
    const w2 = await worker("cap2", ["--max-parallel", "2"]);
    const run = cluster();
    const log = join(run.dir, "alive.log");
    // Its work, on whichever host: count the agent's tasks under way (their marks), then take a moment.
    const work = `touch "$MARKS/$TERMORCH_TASK_ID"; ls "$MARKS" | wc -l >> "$LOG"; sleep 0.3; rm "$MARKS/$TERMORCH_TASK_ID"; echo "$TERMORCH_TASK_ID" > "$TERMORCH_TASK_ID.txt"`;
    const config = JSON.parse(readFileSync(run.config, "utf8"));
    writeFileSync(
      run.config,
      JSON.stringify({ ...config, agents: { capped: { command: ["bash", "-c", work], max_parallel: 1 } } }),
    );
    const file = writeAssignments(
      run.dir,
      ["c1", "c2", "c3", "c4"].map((id) => ({
        id,
        agent: "capped",
        command: undefined,
        env: { MARKS: run.marks, LOG: log },
      })) as never,
    );
    const r = await termorch(["run", file, "--config", run.config], { socket });
    expect(r.exitCode, r.stderr).toBe(0);
    const counts = lines(log).map(Number);
    expect(counts).toHaveLength(4);
    expect(Math.max(...counts)).toBe(1);
    // Gone before the next test, whose jobs are for its own workers.
    await Promise.all([w1.dispose(), w2.dispose()]);
  });

  it("fails the task with a clear reason when a worker's git remote is wrong", async () => {
    const c = cluster();
    const wrong = join(c.dir, "no-such-remote.git");
    const w = await worker("wrong", ["--remote", wrong]);
    const file = writeAssignments(c.dir, [task("W", "echo W > w.txt")] as never);
    const r = await termorch(["run", file, "--config", c.config], { socket });
    expect(r.exitCode).toBe(1);
    const t = readReport(c.dir).tasks[0]!;
    expect(t.status).toBe("failed");
    expect(t.reason).toBe("launch_error");
    expect(t.detail).toContain(`on worker ${w.name}, could not fetch its base`);
    expect(t.detail).toContain(wrong);
    // git's own line, not its advice run together with it.
    expect(t.detail).not.toContain("Please make sure");
    expect(existsSync(join(c.repo, "w.txt"))).toBe(false);
    // Said once in the worker's log, for a second run's task as well.
    const again = writeAssignments(c.dir, [task("V", "echo V > v.txt")] as never, {}, "again.json");
    expect(
      (await termorch(["run", again, "--config", c.config, "--out", join(c.dir, "again")], { socket }))
        .exitCode,
    ).toBe(1);
    const said = readFileSync(join(w.workdir, "logs", "termorch.log"), "utf8").split(
      "cannot reach the git remote of its jobs",
    );
    expect(said).toHaveLength(2);
    await w.dispose();
  });

  it("exits 2 before anything starts when the git remote is missing, not bare, or refuses pushes", async () => {
    const c = cluster();
    const file = writeAssignments(c.dir, [task("U", "echo U > u.txt")] as never);
    const before = workspaceSnapshot(c.repo);
    const refusing = join(c.dir, "refusing.git");
    execFileSync("git", ["init", "--quiet", "--bare", refusing]);
    writeFileSync(join(refusing, "hooks", "pre-receive"), "#!/bin/sh\necho no pushes here >&2\nexit 1\n", {
      mode: 0o755,
    });
    const cases: [string, string][] = [
      [join(c.dir, "nope.git"), "does not exist"],
      [c.repo, "is not a bare git repository"],
      [refusing, "it does not take pushes"],
    ];
    for (const [remote, says] of cases) {
      writeFileSync(c.config, JSON.stringify({ backend: "bullmq", redis: redis().url, git: { remote } }));
      const r = await termorch(["run", file, "--config", c.config], { socket });
      expect(r.exitCode, r.stderr).toBe(2);
      expect(r.stderr).toContain(
        `the git remote ${remote} (git.remote in ${c.config}) cannot serve the workers`,
      );
      expect(r.stderr).toContain(says);
      expect(r.stderr).toContain("git init --bare");
      expect(workspaceSnapshot(c.repo)).toBe(before);
    }
    expect(git(refusing, "for-each-ref")).toBe("");
  });

  it("exits 2 before anything starts when Redis cannot be reached", async () => {
    const c = cluster();
    const file = writeAssignments(c.dir, [task("U", "echo U > u.txt")] as never);
    const before = workspaceSnapshot(c.repo);
    const dead = `redis://127.0.0.1:${await freePort()}`;
    const r = await termorch(["run", file, "--config", c.config, "--redis", dead], { socket });
    expect(r.exitCode).toBe(2);
    expect(r.stderr).toContain(`cannot reach Redis at ${dead}`);
    expect(workspaceSnapshot(c.repo)).toBe(before);
    expect(git(c.remote, "for-each-ref")).toBe("");
  });

  it("exits 2 naming git.remote when the config has none", async () => {
    const c = cluster();
    writeFileSync(c.config, JSON.stringify({ backend: "bullmq", redis: redis().url }));
    const file = writeAssignments(c.dir, [task("V", "echo V > v.txt")] as never);
    const r = await termorch(["run", file, "--config", c.config], { socket });
    expect(r.exitCode).toBe(2);
    expect(r.stderr).toContain("git.remote");
  });
});

suite("termorch worker", () => {
  it("stops on SIGTERM when idle and withdraws its announcement; a second worker of the same name is refused", async () => {
    const w = await worker("idle");
    const twin = track(new WorkerProcess(w.name, redis().url));
    await expect(twin.start()).rejects.toThrow(/worker name .* is in use by pid/);
    expect(twin.proc?.exitCode).toBe(4);
    await twin.dispose();
    const listed = await termorch(["status", "--redis", redis().url, "--json"], { socket });
    expect(JSON.parse(listed.stdout).workers.map((x: { name: string }) => x.name)).toContain(w.name);
    expect(await w.stop()).toBe(0);
    const after = await termorch(["status", "--redis", redis().url, "--json"], { socket });
    expect(JSON.parse(after.stdout).workers.map((x: { name: string }) => x.name)).not.toContain(w.name);
    await w.dispose();
  });

  it("finishes its running task on SIGTERM; a second SIGTERM ends it and leaves the task to another worker", async () => {
    const c = cluster();
    const log = join(c.marks, "log");
    const script = `echo start >> "$MARKS/log"; while [ ! -e "$MARKS/release" ]; do sleep 0.05; done; echo L > l.txt; echo end >> "$MARKS/log"`;
    const file = writeAssignments(c.dir, [task("L", script, [], c.marks)] as never);
    const first = await worker("leave1", ["--max-parallel", "1"]);
    const run = termorch(["run", file, "--config", c.config], { socket });
    await waitFor(() => lines(log).length === 1, 30_000, "L's start");
    first.proc?.kill("SIGTERM");
    await waitFor(
      () => first.output.includes("finishing 1 running task(s)"),
      10_000,
      "the first SIGTERM's answer",
    );
    expect(first.proc?.exitCode).toBeNull();
    const second = await worker("leave2", ["--max-parallel", "1"]);
    expect(await first.stop()).toBe(130);
    await waitFor(() => lines(log).length === 2, 30_000, "the other worker's start");
    writeFileSync(join(c.marks, "release"), "");
    const r = await run;
    expect(r.exitCode).toBe(0);
    expect(lines(log)).toEqual(["start", "start", "end"]);
    expect(readReport(c.dir).tasks[0]?.hosts?.map((h) => h.worker)).toEqual([first.name, second.name]);
    await second.dispose();
    await first.dispose();
  });

  it("stops on SIGTERM even when its Redis is gone", async () => {
    const own = await RedisServer.start();
    const w = track(new WorkerProcess(`gone-${process.pid}`, own.url));
    await w.start();
    await own.dispose();
    const code = await Promise.race([
      w.stop(),
      new Promise((r) => setTimeout(() => r("still running"), 30_000)),
    ]);
    expect(code).toBe(0);
  });
});
