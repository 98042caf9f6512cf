import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { execa } from "execa";
import { expect, it, onTestFinished } from "vitest";
import { Report } from "../../src/contract/report.js";
import {
  BIN,
  cliEnv,
  FAULTY_BIN,
  git,
  isAlive,
  killServer,
  readReport,
  TEST_TMP,
  termorch,
  uniqueSocket,
  waitFor,
  writeAssignments,
} from "../integration/harness.js";
import { bashTask, lines, RedisServer, scaleTestFile, until, WorkerProcess } from "./cluster.js";

/** The coordinator's side of the bullmq backend: status, cancel, a resume after its death, the daemon. */

const { socket, redis, worker, cluster, track, suite } = scaleTestFile("coord");

/** An agent that says it started, then waits for `release` in MARKS before it writes its file. */
const waiting = (id: string): string =>
  `echo "working on ${id}"; echo start >> "$MARKS/${id}.log"; while [ ! -e "$MARKS/release" ]; do sleep 0.05; done; echo ${id} > ${id.toLowerCase()}.txt; echo end >> "$MARKS/${id}.log"`;

suite("a coordinator of a bullmq run", () => {
  it("shows where each task runs, with the line that watches it on its worker", async () => {
    const w = await worker("status");
    const c = cluster();
    const file = writeAssignments(c.dir, [bashTask("S", waiting("S"), [], c.marks)] as never);
    const run = termorch(["run", file, "--config", c.config], { socket });
    await waitFor(() => lines(join(c.marks, "S.log")).length === 1, 30_000, "S's start");
    const shown = await until(
      async () => {
        const s = await termorch(["status", join(c.dir, ".")], { socket });
        return s.stdout.includes("on worker") ? s.stdout : null;
      },
      20_000,
      "the worker in the status",
    );
    expect(shown).toContain(`S (on worker ${w.name}, host `);
    expect(shown).toContain(`tmux -S ${join("/", "tmp")}`);
    expect(shown).toContain(`attach -r -t =termorch-`);
    // The status file names the worker's host and tmux server, not the coordinator's.
    const status = JSON.parse(readFileSync(join(c.dir, "status", "S.running"), "utf8")) as Record<
      string,
      unknown
    >;
    expect(status.worker).toBe(w.name);
    expect(status.socket).toBe(`termorch-worker-${w.name}`);
    expect(status.socket_path).toMatch(new RegExp(`/termorch-worker-${w.name}$`));
    // Its output streams to the coordinator while it runs: the status's last line, and `termorch logs`.
    const last = await until(
      async () => {
        const s = await termorch(["status", join(c.dir, "."), "--json"], { socket });
        const line = JSON.parse(s.stdout).runs[0]?.tasks[0]?.last_line as string | null;
        return line === "working on S" ? line : null;
      },
      20_000,
      "S's output on the coordinator",
    );
    expect(last).toBe("working on S");
    expect((await termorch(["logs", "S", "--run", c.dir], { socket })).stdout).toContain("working on S");
    writeFileSync(join(c.marks, "release"), "");
    expect((await run).exitCode).toBe(0);
    // The streamed copy was replaced by the whole log, under the same name.
    const s = readReport(c.dir).tasks[0]!;
    expect(readFileSync(join(c.dir, s.logs.stdout!), "utf8")).toBe("working on S\n");
    await w.dispose();
  });

  it("names a worker's host by its --host-label, runs its tasks on the tmux socket its --config names, and reports no socket of its own", async () => {
    const c = cluster();
    const own = uniqueSocket("labelled");
    const workerConfig = join(c.dir, "worker.json");
    writeFileSync(workerConfig, JSON.stringify({ tmux: { socket: own } }));
    const w = track(
      new WorkerProcess(
        `labelled-${process.pid}`,
        redis().url,
        ["--config", workerConfig, "--host-label", "lab-1.example"],
        { TERMORCH_TMUX_SOCKET: "" },
      ),
    );
    try {
      await w.start();
      const file = writeAssignments(c.dir, [bashTask("H", "echo H > h.txt")] as never);
      const r = await termorch(["run", file, "--config", c.config], { socket });
      expect(r.exitCode, r.stderr).toBe(0);
      const report = readReport(c.dir);
      expect(report.tmux_socket).toBeNull();
      const host = report.tasks[0]!.hosts![0]!;
      expect(host).toMatchObject({ worker: w.name, host: "lab-1.example" });
      expect(host.socket).toMatch(new RegExp(`/${own}$`));
    } finally {
      await w.dispose();
      killServer(own);
    }
  });

  it("ends the tasks on their workers when the run is cancelled", async () => {
    const w = await worker("cancel");
    const c = cluster();
    const file = writeAssignments(c.dir, [bashTask("K", waiting("K"), [], c.marks)] as never);
    const run = termorch(["run", file, "--config", c.config], { socket });
    await waitFor(() => lines(join(c.marks, "K.log")).length === 1, 30_000, "K's start");
    const report = readReportWhenWritten(c.dir);
    const cancel = await termorch(["cancel", join(c.dir, ".")], { socket });
    expect(cancel.exitCode).toBe(0);
    const r = await run;
    expect(r.exitCode).toBe(130);
    const k = (await report).tasks[0]!;
    expect(k.status).toBe("failed");
    expect(k.reason).toBe("cancelled");
    // The agent was ended on its worker: it never got to write its end.
    expect(lines(join(c.marks, "K.log"))).toEqual(["start"]);
    await w.dispose();
  });

  it("says when no worker is there to take its tasks, and a cancel withdraws the jobs nobody took", async () => {
    // A Redis of its own: the file's keeps a SIGKILLed worker's announcement ~15 s, which the
    // warning would wait out.
    const own = await RedisServer.start();
    const c = cluster();
    writeFileSync(c.config, JSON.stringify({ backend: "bullmq", redis: own.url, git: { remote: c.remote } }));
    const file = writeAssignments(c.dir, [bashTask("N", "echo N > n.txt")] as never);
    const coordinator = coordinate(file, c);
    let said = "";
    coordinator.stderr?.on("data", (chunk: Buffer) => {
      said += chunk.toString();
    });
    await waitFor(() => said.includes("no termorch worker is announced"), 40_000, "the no-worker warning");
    // status says it too, from the run's state.
    const runId = (JSON.parse(readFileSync(file, "utf8")) as { run_id: string }).run_id;
    const status = await termorch(["status", runId], { socket });
    expect(status.stdout).toContain("no termorch worker is announced");
    coordinator.kill("SIGINT");
    const r = await coordinator;
    expect(r.exitCode).toBe(130);
    const n = readReport(c.dir).tasks[0]!;
    expect(n.status).toBe("skipped");
    expect(n.reason).toBe("cancelled");
    // The job was withdrawn: a worker started now finds nothing of this run to take.
    const w = track(new WorkerProcess(`late-${process.pid}`, own.url));
    await w.start();
    const keys = execFileSync(
      "redis-cli",
      ["-p", String(own.port), "--scan", "--pattern", `bull:*${readReport(c.dir).run_id}*`],
      {
        encoding: "utf8",
      },
    );
    expect(keys.trim()).toBe("");
    expect(w.output).not.toContain("took a task");
    await w.dispose();
    await own.dispose();
  });

  it("still reports when cancelled while its Redis is gone (the task fails as cancelled, saying why)", async () => {
    const own = await RedisServer.start();
    const c = cluster();
    writeFileSync(
      c.config,
      JSON.stringify({
        backend: "bullmq",
        redis: own.url,
        git: { remote: c.remote },
        defaults: { kill_grace_s: 1 },
      }),
    );
    const w = track(new WorkerProcess(`cut-${process.pid}`, own.url));
    await w.start();
    const file = writeAssignments(c.dir, [bashTask("G", waiting("G"), [], c.marks)] as never);
    const coordinator = coordinate(file, c);
    await waitFor(() => lines(join(c.marks, "G.log")).length === 1, 30_000, "G's start");
    await own.dispose();
    coordinator.kill("SIGINT");
    const r = await coordinator;
    expect(r.exitCode).toBe(130);
    const g = readReport(c.dir).tasks[0]!;
    expect(g.reason).toBe("cancelled");
    expect(g.detail).toContain("did not answer");
    await w.dispose();
  }, 120_000);

  it("picks up its job again after it was killed: the task runs once", async () => {
    const w = await worker("resume");
    // Its worker ends with the test whatever the test finds: a live one would take the next tests' jobs.
    onTestFinished(() => w.dispose());
    const c = cluster();
    const file = writeAssignments(c.dir, [
      bashTask("R", waiting("R"), [], c.marks),
      bashTask("T", "echo T > t.txt", ["R"]),
    ] as never);
    const coordinator = coordinate(file, c);
    await waitFor(() => lines(join(c.marks, "R.log")).length === 1, 30_000, "R's start");
    coordinator.kill("SIGKILL");
    await coordinator;
    writeFileSync(join(c.marks, "release"), "");
    const r = await termorch(["resume", c.dir], { socket });
    expect(r.stderr).toContain("2/2 tasks succeeded");
    expect(r.exitCode).toBe(0);
    expect(lines(join(c.marks, "R.log"))).toEqual(["start", "end"]);
    expect(readFileSync(join(c.repo, "t.txt"), "utf8")).toBe("T\n");
    expect(
      git(c.repo, "log", "--format=%s")
        .split("\n")
        .filter((s) => s.startsWith("termorch: task R")),
    ).toHaveLength(1);
    // The ledger names the host of R's attempt, and its chain holds across the two processes.
    const events = readFileSync(join(c.dir, "events.jsonl"), "utf8")
      .split("\n")
      .filter(Boolean)
      .map((l) => JSON.parse(l));
    const launched = events.filter((e) => e.type === "task.launched" && e.task_id === "R");
    expect(launched.map((e) => e.data.worker)).toEqual([w.name]);
    expect((await termorch(["verify-ledger", c.dir], { socket })).exitCode).toBe(0);
  });

  it("killed once a worker's launch is in its ledger, before the state: the resume records that launch once", async () => {
    const w = await worker("launched");
    onTestFinished(() => w.dispose());
    const c = cluster();
    const file = writeAssignments(c.dir, [bashTask("L", waiting("L"), [], c.marks)] as never);
    const coordinator = execa(process.execPath, [FAULTY_BIN, "run", file, "--config", c.config], {
      reject: false,
      env: cliEnv(socket, { TERMORCH_FAULT: "kill-after-remote-launch:L" }),
      cwd: c.dir,
    });
    const killed = await coordinator;
    expect(killed.signal, killed.stderr).toBe("SIGKILL");
    expect(ledgerOf(c.dir).filter((e) => e.type === "task.launched" && e.task_id === "L")).toHaveLength(1);
    // Its launch is journaled, its state is not: the resume, told the attempt runs, says so.
    const resume = await resumedAndLooked(c.dir);
    await waitFor(() => existsSync(join(c.dir, "status", "L.running")), 20_000, "L shown running");
    writeFileSync(join(c.marks, "release"), "");
    const r = await resume.ended;
    expect(r.exitCode, r.stderr).toBe(0);
    expect(ledgerOf(c.dir).some((e) => e.type === "task.running" && e.task_id === "L")).toBe(true);
    expect(lines(join(c.marks, "L.log"))).toEqual(["start", "end"]);
    const launched = ledgerOf(c.dir).filter((e) => e.type === "task.launched" && e.task_id === "L");
    expect(launched.map((e) => [e.data.worker, e.data.attempt])).toEqual([[w.name, 1]]);
    expect(readReport(c.dir).tasks[0]!.hosts).toHaveLength(1);
    expect((await termorch(["verify-ledger", c.dir], { socket })).exitCode).toBe(0);
  });

  it("resumed while its task still runs: the worker's progress, read again, is not a new attempt", async () => {
    const w = await worker("still");
    onTestFinished(() => w.dispose());
    const c = cluster();
    const file = writeAssignments(c.dir, [
      bashTask("S", `${waiting("S")}; echo "S after the resume"`, [], c.marks),
    ] as never);
    const coordinator = coordinate(file, c);
    await waitFor(
      () => ledgerOf(c.dir).some((e) => e.type === "task.running" && e.task_id === "S"),
      30_000,
      "S running",
    );
    coordinator.kill("SIGKILL");
    await coordinator;
    const resume = await resumedAndLooked(c.dir);
    writeFileSync(join(c.marks, "release"), "");
    const r = await resume.ended;
    expect(r.exitCode, r.stderr).toBe(0);
    const launched = ledgerOf(c.dir).filter((e) => e.type === "task.launched" && e.task_id === "S");
    expect(launched.map((e) => [e.data.worker, e.data.attempt])).toEqual([[w.name, 1]]);
    const task = readReport(c.dir).tasks[0]!;
    expect(task).toMatchObject({ status: "success", attempts: 1 });
    expect(task.hosts).toEqual([expect.objectContaining({ attempt: 1, worker: w.name })]);
    // The log its launch names is copied on by the resumed coordinator, to the attempt's end.
    const logs = launched[0]!.data.logs as { stdout: string };
    expect(readFileSync(join(c.dir, logs.stdout), "utf8")).toContain("S after the resume");
  });

  it("names the worker of an attempt it learned of only from the result (killed before any progress reached it)", async () => {
    const c = cluster();
    const file = writeAssignments(c.dir, [bashTask("U", "echo U > u.txt")] as never);
    const coordinator = coordinate(file, c);
    // The task's job is queued after its base is published (the ledger says so first); no worker
    // runs yet to take it.
    const runId = (JSON.parse(readFileSync(file, "utf8")) as { run_id: string }).run_id;
    const queued = (): boolean =>
      execFileSync(
        "redis-cli",
        ["-p", String(redis().port), "--scan", "--pattern", `bull:termorch-tasks:${runId}.*`],
        { encoding: "utf8" },
      ).trim() !== "";
    await waitFor(queued, 30_000, "U's job");
    coordinator.kill("SIGKILL");
    await coordinator;
    // A worker takes the job with no coordinator listening: its progress reaches nobody.
    const w = await worker("late");
    await waitFor(
      () => git(c.remote, "for-each-ref", "--format=%(refname)", "refs/termorch").includes("/attempts/U/1\n"),
      30_000,
      "U's branch pushed",
    );
    const r = await termorch(["resume", c.dir], { socket });
    expect(r.exitCode).toBe(0);
    const launched = ledgerOf(c.dir).filter((e) => e.type === "task.launched" && e.task_id === "U");
    expect(launched.map((e) => e.data.worker)).toEqual([w.name]);
    expect(readReport(c.dir).tasks[0]?.hosts?.[0]?.worker).toBe(w.name);
    expect((await termorch(["verify-ledger", c.dir], { socket })).exitCode).toBe(0);
    await w.dispose();
  });

  it("ends the agent of a SIGKILLed worker by itself once the worker has been gone --takeover-s, with no worker coming back", async () => {
    // A Redis of its own, gone with the test: the run's job, left there by its killed coordinator,
    // is never taken by a later test's worker.
    const own = await RedisServer.start();
    const w = track(new WorkerProcess(`orphan-${process.pid}`, own.url, ["--takeover-s", "2"]));
    await w.start();
    const c = cluster();
    writeFileSync(c.config, JSON.stringify({ backend: "bullmq", redis: own.url, git: { remote: c.remote } }));
    const script = `echo $$ > "$MARKS/agent.pid"; while :; do sleep 0.05; done`;
    const file = writeAssignments(c.dir, [bashTask("O", script, [], c.marks)] as never);
    const coordinator = coordinate(file, c);
    const pidFile = join(c.marks, "agent.pid");
    await waitFor(
      () => existsSync(pidFile) && readFileSync(pidFile, "utf8").trim() !== "",
      30_000,
      "O's start",
    );
    const agent = Number(readFileSync(pidFile, "utf8"));
    expect(isAlive(agent)).toBe(true);
    await w.kill();
    // 2 s of takeover, then TERM: the agent is gone within seconds, though no worker came back.
    await waitFor(() => !isAlive(agent), 30_000, "the orphaned agent's end");
    // Its coordinator goes too: cancelled, it would wait 35 s for the dead worker's answer
    // (test/unit/cancel-bound.test.ts asserts that bound).
    coordinator.kill("SIGKILL");
    await coordinator;
    await w.dispose();
    await own.dispose();
  });

  it("termorch clean removes what a killed coordinator's run left on the git remote and in Redis", async () => {
    const c = cluster();
    const file = writeAssignments(c.dir, [bashTask("K", "echo K > k.txt")] as never);
    const runId = (JSON.parse(readFileSync(file, "utf8")) as { run_id: string }).run_id;
    const inRedis = (): string =>
      execFileSync("redis-cli", ["-p", String(redis().port), "--scan", "--pattern", `*${runId}*`], {
        encoding: "utf8",
      }).trim();
    const coordinator = coordinate(file, c);
    // No worker: the job waits in Redis, the task's base on the remote.
    await waitFor(() => inRedis() !== "", 30_000, "K's job");
    coordinator.kill("SIGKILL");
    await coordinator;
    expect(git(c.remote, "for-each-ref", "--format=%(refname)")).toContain(`refs/termorch/${runId}/base/K`);
    // Not resumable any more: its assignments file is gone.
    rmSync(file);
    const r = await termorch(["clean", c.dir], { socket });
    expect(r.exitCode, r.stdout + r.stderr).toBe(0);
    expect(r.stdout).toContain("ref(s) on the git remote");
    expect(r.stdout).toContain("in Redis");
    expect(git(c.remote, "for-each-ref")).toBe("");
    expect(inRedis()).toBe("");
  });

  it("runs as a daemon whose runs' tasks go to workers (--backend bullmq --redis)", async () => {
    const w = await worker("daemon");
    const c = cluster();
    const home = mkdtempSync(join(TEST_TMP, "home-"));
    mkdirSync(join(home, "inbox"), { recursive: true });
    // The daemon's config names only the remote: backend and Redis come from its flags.
    writeFileSync(c.config, JSON.stringify({ git: { remote: c.remote } }));
    const daemon = execa(
      process.execPath,
      [BIN, "daemon", "--home", home, "--config", c.config, "--backend", "bullmq", "--redis", redis().url],
      { reject: false, env: cliEnv(socket), all: true },
    );
    const file = writeAssignments(
      c.dir,
      [bashTask("Q", "echo Q > q.txt")] as never,
      { run_id: "viadaemon" },
      "q.json",
    );
    writeFileSync(
      join(home, "inbox", "q.json"),
      readFileSync(file, "utf8").replace(
        '"workspace_dir": "repo"',
        `"workspace_dir": ${JSON.stringify(c.repo)}`,
      ),
    );
    const answer = join(home, "outbox", "viadaemon.json");
    await waitFor(() => existsSync(answer), 60_000, "the daemon's answer");
    const report = Report.parse(JSON.parse(readFileSync(answer, "utf8")));
    expect(report.exit_code).toBe(0);
    expect(report.tasks[0]?.hosts?.[0]?.worker).toBe(w.name);
    expect(readFileSync(join(c.repo, "q.txt"), "utf8")).toBe("Q\n");
    daemon.kill("SIGTERM");
    expect((await daemon).exitCode).toBe(0);
    await w.dispose();
  });
});

/** `termorch run` as a child process the test can signal (the harness's termorch() only awaits it). */
function coordinate(file: string, c: { dir: string; config: string }) {
  return execa(process.execPath, [BIN, "run", file, "--config", c.config], {
    reject: false,
    env: cliEnv(socket),
    cwd: c.dir,
  });
}

/** The report, once the run wrote it. */
async function readReportWhenWritten(dir: string): Promise<Report> {
  await waitFor(() => existsSync(join(dir, "execution_report.json")), 60_000, "the report");
  return readReport(dir);
}

/**
 * `termorch resume` of a bullmq run, once its first look at its task's job has read the worker's
 * progress (its debug log says so); `ended` is the resume's end.
 */
async function resumedAndLooked(dir: string) {
  const resume = execa(process.execPath, [BIN, "resume", dir, "--debug"], {
    reject: false,
    env: cliEnv(socket),
    cwd: dir,
  });
  let said = "";
  resume.stderr?.on("data", (d: Buffer) => {
    said += d.toString();
  });
  await waitFor(() => /a worker's progress/.test(said), 30_000, "the resumed coordinator's look at the job");
  return { ended: resume.then((r) => ({ exitCode: r.exitCode, stderr: said })) };
}

/** The run's ledger events, as written so far. */
function ledgerOf(dir: string): { type: string; task_id?: string; data: Record<string, unknown> }[] {
  const path = join(dir, "events.jsonl");
  if (!existsSync(path)) return [];
  return readFileSync(path, "utf8")
    .split("\n")
    .filter(Boolean)
    .map((l) => JSON.parse(l));
}
