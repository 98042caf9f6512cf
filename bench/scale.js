// `npm run build && node bench/scale.js [--workers W] [--max-parallel K] [--tasks T] [--log-tasks L]
// [--log-mib M] [--no-local] [--smoke] [--json FILE]`: the scale-out backend (bullmq) simulated on this
// machine (docs/SCALING.md). One private redis-server (AOF on), one bare git remote, W real
// `termorch worker` processes (each its own TMPDIR, workdir, name and tmux server; K tasks at
// once each), then in one run:
//   1. run: T trivial git tasks shaped as a DAG (1 root, a fan-out of T-10 tasks on it, 8 joins of
//      4 fan-out tasks each, 1 final task on the joins) through the bullmq backend, at max_parallel
//      W*K. Redis commands are counted twice: INFO commandstats (every command, those Lua scripts
//      run included) and a MONITOR connection that attributes each client-sent command to the
//      coordinator or a worker by its connection (the workers' connections are known before the
//      coordinator starts). Git: each process runs with GIT_TRACE to a file of its own; a fetch is
//      one `git upload-pack` on the remote, a push one `git receive-pack`. Sizes of the remote and
//      of each worker's repository, before and after.
//   2. idle: the same workers, no run, for the run's wall time: what W idle workers cost Redis,
//      subtracted from the run's worker commands to give the per-task figure.
//   3. local (the baseline): the same assignments in a fresh workspace, backend local, same
//      max_parallel, same machine, right after.
//   4. logs: L independent tasks each printing M MiB through the bullmq backend: Redis memory kept
//      per result (a result is dropped once recorded; its events stay), bytes in and out per task, the logs intact.
// Task start latency is read from each run's events.jsonl: bullmq task.published -> task.launched
// (the job queued -> a worker's attempt running); local task.worktree -> task.launched.
// Everything it starts is stopped in a finally: workers (SIGTERM, then SIGKILL), their tmux
// servers, redis-server, the temp folder.
import { spawn, spawnSync } from "node:child_process";
import {
  existsSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import net from "node:net";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { setTimeout as sleep } from "node:timers/promises";
import {
  BIN,
  cleanupAll,
  killServer,
  machine,
  median,
  percentile,
  processCpu,
  ROOT,
  removeTemp,
  row,
  runIdOf,
  TMUX_ENV,
  table,
  tempDir,
  timed,
  trackSocket,
  uniqueSocket,
  writeAssignments,
} from "./lib.mjs";

const log = (msg) => console.error(`bench: scale: ${msg}`);

const DEFAULTS = {
  workers: 20,
  maxParallel: 1,
  tasks: 200,
  logTasks: 20,
  logMib: 1,
  refs: 10000,
  stub: 0,
  holdMs: 10000,
  local: true,
  json: null,
  // How long each log task prints (in steps of half a second), the idle phase's bounds (it lasts
  // as long as the run did, within them), the refs phase's repetitions, the stub's idle phase:
  // fixed in the full and quick runs.
  logSeconds: 8,
  idleMinS: 5,
  idleMaxS: 60,
  refReps: 12,
  stubIdleMs: 20_000,
};

/**
 * The smallest form (--smoke, as CI runs it): every phase of the run, or of the stub's, on the
 * least that still exercises it; its figures mean nothing.
 */
const SMOKE = {
  workers: 2,
  tasks: 14,
  logTasks: 1,
  logMib: 0.0625,
  logSeconds: 1,
  refs: 20,
  refReps: 2,
  idleMinS: 1,
  idleMaxS: 1,
  holdMs: 200,
  stubIdleMs: 1000,
};

/** The options when bench/run.js runs this one (`npm run bench -- scale [--quick | --smoke]`). */
export function settings(opts = {}) {
  if (opts.smoke) return { ...DEFAULTS, ...SMOKE };
  return opts.quick ? { ...DEFAULTS, workers: 6, tasks: 40, logTasks: 6, refs: 2000 } : { ...DEFAULTS };
}

function parseArgs(argv) {
  // --smoke is the base the other options change, wherever it stands.
  const o = argv.includes("--smoke") ? { ...DEFAULTS, ...SMOKE } : { ...DEFAULTS };
  const ints = {
    "--workers": "workers",
    "--max-parallel": "maxParallel",
    "--tasks": "tasks",
    "--log-tasks": "logTasks",
    "--refs": "refs",
    "--stub": "stub",
    "--hold-ms": "holdMs",
  };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a in ints || a === "--log-mib") {
      const v = Number(argv[++i]);
      if (
        !(v > 0 || (v === 0 && (a === "--log-tasks" || a === "--refs"))) ||
        (a !== "--log-mib" && !Number.isInteger(v))
      )
        throw new Error(`${a} needs a positive ${a === "--log-mib" ? "number" : "whole number"}`);
      o[a === "--log-mib" ? "logMib" : ints[a]] = v;
    } else if (a === "--no-local") o.local = false;
    else if (a === "--smoke") continue;
    else if (a === "--json") o.json = argv[++i];
    else if (a === "--help" || a === "-h") {
      console.log(
        "usage: node bench/scale.js [--workers W (20)] [--max-parallel K per worker (1)] [--tasks T (200, >= 14)] [--log-tasks L (20; 0: none)] [--log-mib M (1)] [--refs N (10000; 0: none)] [--no-local] [--smoke] [--json FILE]",
      );
      console.log(
        "   or: node bench/scale.js --stub N [--tasks T (N)] [--hold-ms H (10000)] [--smoke] [--json FILE]: N simulated workers (bench/scale-stub.mjs) instead of real ones",
      );
      console.log(
        "   --smoke: the smallest form of every phase (2 workers, 14 tasks, 1 log task, short idle phases), for CI; other options change it",
      );
      process.exit(0);
    } else throw new Error(`unknown option "${a}"`);
  }
  if (o.stub > 0) {
    if (!argv.includes("--tasks")) o.tasks = o.stub;
    return o;
  }
  if (o.tasks < 14) throw new Error("--tasks must be at least 14 (root, fan-out, 8 joins, final)");
  return o;
}

// ---------------------------------------------------------------------------------------------
// Redis

function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.on("error", reject);
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

async function startRedis(dir) {
  const port = await freePort();
  const data = join(dir, "redis");
  mkdirSync(data);
  const out = openSync(join(dir, "redis.log"), "a");
  // Without it the spawn's error event would end the whole process, not this benchmark alone.
  if (spawnSync("redis-server", ["--version"], { stdio: "ignore" }).status !== 0)
    throw new Error("redis-server was not found: apt-get install redis-server");
  const child = spawn(
    "redis-server",
    ["--port", String(port), "--bind", "127.0.0.1", "--dir", data, "--appendonly", "yes", "--save", ""],
    { stdio: ["ignore", out, out] },
  );
  let spawnError = null;
  child.on("error", (error) => {
    spawnError = error;
  });
  const { Redis } = await import("ioredis");
  const url = `redis://127.0.0.1:${port}`;
  for (let i = 0; ; i++) {
    const probe = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
    probe.on("error", () => {});
    try {
      await probe.connect();
      await probe.ping();
      probe.disconnect();
      break;
    } catch {
      probe.disconnect();
      if (i > 100 || child.exitCode !== null || spawnError)
        throw new Error(`redis-server did not start (${spawnError?.message ?? `${dir}/redis.log`})`);
      await sleep(50);
    }
  }
  const redis = new Redis(url, { maxRetriesPerRequest: 1 });
  redis.on("error", () => {});
  const me = /addr=(\S+)/.exec(await redis.client("INFO"))[1];
  return { port, url, child, redis, me };
}

/** INFO figures a phase is measured with (deltas of two snapshots). */
async function snapshot(redis) {
  const stats = await redis.info("stats");
  const mem = await redis.info("memory");
  const cs = await redis.info("commandstats");
  const cpu = await redis.info("cpu");
  const float = (text, key) => Number(new RegExp(`^${key}:([\\d.]+)`, "m").exec(text)?.[1] ?? 0);
  const num = (text, key) => Number(new RegExp(`^${key}:(\\d+)`, "m").exec(text)?.[1] ?? 0);
  const commands = {};
  for (const m of cs.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) commands[m[1]] = Number(m[2]);
  return {
    at: performance.now(),
    netIn: num(stats, "total_net_input_bytes"),
    netOut: num(stats, "total_net_output_bytes"),
    usedMemory: num(mem, "used_memory"),
    cpu: float(cpu, "used_cpu_user") + float(cpu, "used_cpu_sys"),
    commands,
  };
}

// The bench's own commands (this file's INFO, CLIENT, MEMORY, SCAN calls), left out of the counts.
const OWN = new Set([
  "info",
  "client|info",
  "client|list",
  "memory|usage",
  "monitor",
  "scan",
  "ping",
  "xlen",
]);

function commandDelta(a, b) {
  const out = {};
  for (const [k, v] of Object.entries(b.commands)) {
    const d = v - (a.commands[k] ?? 0);
    if (d > 0 && !OWN.has(k)) out[k] = d;
  }
  return out;
}

const sum = (o) => Object.values(o).reduce((x, y) => x + y, 0);

/**
 * A MONITOR connection: every command Redis runs, with the connection that sent it (or "lua" for
 * a command a script ran). `phase` collects counts per side and command while set; `bytes` is
 * what MONITOR itself sent (it counts in total_net_output_bytes, so it is taken off).
 */
function startMonitor(port, sideOf) {
  const m = { bytes: 0, phase: null, socket: null };
  let buf = "";
  const handle = (line) => {
    if (!m.phase) return;
    const hit = /^\+[\d.]+ \[\d+ ([^\]]+)\] "((?:[^"\\]|\\.)*)"/.exec(line);
    if (!hit) return;
    const side = hit[1] === "lua" ? "lua" : sideOf(hit[1]);
    if (side === "bench") return;
    const cmd = hit[2].toLowerCase();
    if (!m.phase[side]) m.phase[side] = {};
    m.phase[side][cmd] = (m.phase[side][cmd] ?? 0) + 1;
  };
  return new Promise((resolve, reject) => {
    const s = net.connect(port, "127.0.0.1", () => s.write("MONITOR\r\n"));
    m.socket = s;
    s.on("error", reject);
    s.on("data", (d) => {
      m.bytes += d.length;
      buf += d.toString("latin1");
      let from = 0;
      for (let i = buf.indexOf("\r\n"); i >= 0; i = buf.indexOf("\r\n", from)) {
        const line = buf.slice(from, i);
        from = i + 2;
        if (line === "+OK") resolve(m);
        else handle(line);
      }
      buf = buf.slice(from);
    });
  });
}

// ---------------------------------------------------------------------------------------------
// Workers, workspaces, git

function startWorker(dir, redisUrl, name, maxParallel) {
  const home = join(dir, "workers", name);
  const tmp = join(home, "tmp");
  mkdirSync(tmp, { recursive: true });
  const out = openSync(join(home, "worker.out"), "a");
  const trace = join(home, "git-trace.log");
  const child = spawn(
    process.execPath,
    [
      BIN,
      "worker",
      "--redis",
      redisUrl,
      "--workdir",
      join(home, "wd"),
      "--name",
      name,
      "--max-parallel",
      String(maxParallel),
    ],
    { env: { ...TMUX_ENV, TMPDIR: tmp, GIT_TRACE: trace }, stdio: ["ignore", out, out] },
  );
  return { name, home, child, trace, socket: `termorch-worker-${name}`, exited: false };
}

async function stopWorkers(workers) {
  for (const w of workers) if (w.child.exitCode === null) w.child.kill("SIGTERM");
  const deadline = Date.now() + 20_000;
  for (const w of workers) {
    while (w.child.exitCode === null && w.child.signalCode === null && Date.now() < deadline) await sleep(50);
    if (w.child.exitCode === null && w.child.signalCode === null) {
      log(`worker ${w.name} did not stop within 20 s of SIGTERM; killing it`);
      w.child.kill("SIGKILL");
    }
  }
  // A worker's tmux server is its own (`termorch-worker-<name>`, a name this run made up); an
  // idle worker's server has already gone, but may have left its socket file.
  for (const w of workers) killWorkerServer(w);
}

function killWorkerServer(w) {
  spawnSync("tmux", ["-L", w.socket, "kill-server"], { stdio: "ignore", env: TMUX_ENV });
  rmSync(join(process.env.TMUX_TMPDIR || "/tmp", `tmux-${process.getuid()}`, w.socket), { force: true });
}

/** Connections of every worker are open: each has announced itself and its BullMQ worker is blocking. */
async function waitForWorkers(redis, me, workers) {
  const deadline = Date.now() + 120_000;
  for (;;) {
    const dead = workers.find((w) => w.child.exitCode !== null);
    if (dead) throw new Error(`worker ${dead.name} exited ${dead.child.exitCode}: ${dead.home}/worker.out`);
    const keys = [];
    let cursor = "0";
    do {
      const [next, batch] = await redis.scan(cursor, "MATCH", "termorch:worker:*", "COUNT", 1000);
      cursor = next;
      keys.push(...batch);
    } while (cursor !== "0");
    const mine = workers.filter((w) => keys.includes(`termorch:worker:${w.name}`)).length;
    const clients = clientAddrs(await redis.client("LIST"), me);
    const blocking = (await redis.client("LIST")).split("\n").filter((l) => / cmd=bzpopmin/.test(l)).length;
    if (mine === workers.length && blocking >= workers.length) return clients;
    if (Date.now() > deadline)
      throw new Error(`only ${mine} of ${workers.length} workers announced, ${blocking} blocking, in 120 s`);
    await sleep(250);
  }
}

function clientAddrs(list, me) {
  return new Set(
    list
      .split("\n")
      .map((l) => /addr=(\S+)/.exec(l)?.[1])
      .filter((a) => a && a !== me),
  );
}

function git(cwd, args) {
  const r = spawnSync("git", args, { cwd, encoding: "utf8", maxBuffer: 64 * 1024 * 1024 });
  if (r.status !== 0) throw new Error(`git ${args.join(" ")} in ${cwd}: ${r.stderr}`);
  return r.stdout.trim();
}

/** A workspace: a git repository with a few files (the remote, the workers' copies: this history). */
function workspace(dir) {
  const ws = join(dir, "ws");
  mkdirSync(join(ws, "ctx"), { recursive: true });
  mkdirSync(join(ws, "src"), { recursive: true });
  writeFileSync(join(ws, "ctx", "task.md"), "# bench task\n");
  writeFileSync(join(ws, "README.md"), "bench\n");
  for (let i = 0; i < 20; i++)
    writeFileSync(join(ws, "src", `f${i}.txt`), `${"line of a source file\n".repeat(50)}${i}\n`);
  git(ws, ["init", "-q", "-b", "main"]);
  git(ws, ["add", "-A"]);
  git(ws, ["-c", "user.name=bench", "-c", "user.email=bench@example.invalid", "commit", "-q", "-m", "init"]);
  return ws;
}

/** Bytes of the files under a folder (objects of a repository, say). */
function duBytes(dir) {
  if (!existsSync(dir)) return 0;
  let total = 0;
  for (const e of readdirSync(dir, { withFileTypes: true, recursive: true }))
    if (e.isFile()) total += statSync(join(e.parentPath ?? e.path, e.name)).size;
  return total;
}

function countObjects(gitDir) {
  const out = spawnSync("git", ["--git-dir", gitDir, "count-objects", "-v"], { encoding: "utf8" }).stdout;
  const n = (k) => Number(new RegExp(`^${k}: (\\d+)`, "m").exec(out)?.[1] ?? 0);
  return {
    loose: n("count"),
    looseKiB: n("size"),
    inPack: n("in-pack"),
    packs: n("packs"),
    packKiB: n("size-pack"),
  };
}

/** What a GIT_TRACE file grew by since `from`: fetches and pushes served by the remote, git processes. */
function traceCounts(file, from = 0) {
  if (!existsSync(file)) return { fetches: 0, pushes: 0, processes: 0, size: 0 };
  const text = readFileSync(file, "utf8").slice(from);
  const count = (re) => (text.match(re) ?? []).length;
  return {
    fetches: count(/trace: built-in: git upload-pack /g),
    pushes: count(/trace: built-in: git receive-pack /g),
    processes: count(/trace: built-in: git /g),
    size: Buffer.byteLength(readFileSync(file, "utf8")),
  };
}

/** The DAG: root, a fan-out of T-10 tasks on it, 8 joins of 4 fan-out tasks each, a final task. */
function dagTasks(n, agent) {
  const fan = n - 10;
  const tasks = [{ id: "root", command: agent("root"), dependencies: [] }];
  for (let i = 0; i < fan; i++) tasks.push({ id: `f${i}`, command: agent(`f${i}`), dependencies: ["root"] });
  for (let j = 0; j < 8; j++)
    tasks.push({
      id: `j${j}`,
      command: agent(`j${j}`),
      dependencies: [0, 1, 2, 3].map((k) => `f${(j * 4 + k) % fan}`),
    });
  tasks.push({
    id: "final",
    command: agent("final"),
    dependencies: [0, 1, 2, 3, 4, 5, 6, 7].map((j) => `j${j}`),
  });
  return tasks;
}

/** A trivial agent: one new file of its own (so every task has a commit, and merges never conflict). */
const writeFileAgent = (id) => ["sh", "-c", `echo ${id} > out-${id}.txt`];

/**
 * An agent that prints `bytes` to stdout (64-byte lines) in 16 pieces half a second apart (so
 * the worker streams them while it runs), and changes one file.
 */
/** An agent printing `bytes` in `steps` parts half a second apart. */
const printAgent = (bytes, steps) => (id) => [
  "sh",
  "-c",
  `i=0; while [ $i -lt ${steps} ]; do yes 0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcde | head -c ${Math.floor(bytes / steps)}; sleep 0.5; i=$((i+1)); done; yes 0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcde | head -c ${bytes - steps * Math.floor(bytes / steps)}; echo ${id} > out-${id}.txt`,
];

/**
 * One push and one fetch of a new commit against a remote that holds `n` other refs (as a shared
 * remote does while many tasks are in flight: two refs each): none, `n` loose, `n` packed. The
 * three remotes take turns, so the machine's load falls on each alike. Medians, ms.
 */
export function refsPhase(dir, n, reps = 12) {
  const rdir = join(dir, "refs");
  const src = join(rdir, "src");
  mkdirSync(src, { recursive: true });
  git(src, ["init", "-q", "-b", "main"]);
  const id = ["-c", "user.name=bench", "-c", "user.email=bench@example.invalid"];
  git(src, [...id, "commit", "-q", "--allow-empty", "-m", "base"]);
  const base = git(src, ["rev-parse", "HEAD"]);
  const kinds = ["none", "loose", "packed"];
  for (const k of kinds) {
    const r = join(rdir, `${k}.git`);
    git(rdir, ["init", "-q", "--bare", r]);
    git(src, ["push", "-q", r, "HEAD:refs/heads/main"]);
    if (k === "none") continue;
    const lines = Array.from(
      { length: n },
      (_, i) => `create refs/termorch/r${i % 100}/base/t${i} ${base}\n`,
    );
    const u = spawnSync("git", ["--git-dir", r, "update-ref", "--stdin"], { input: lines.join("") });
    if (u.status !== 0) throw new Error(`update-ref --stdin: ${u.stderr}`);
    if (k === "packed") git(r, ["pack-refs", "--all"]);
  }
  const times = Object.fromEntries(kinds.map((k) => [k, { push: [], fetch: [] }]));
  for (let i = 0; i < reps; i++)
    for (const k of kinds) {
      const r = join(rdir, `${k}.git`);
      git(src, [...id, "commit", "-q", "--allow-empty", "-m", `c${i}`]);
      const ref = `refs/heads/termorch/bench/t${i}`;
      let t = performance.now();
      git(src, ["push", "-q", "--no-verify", "--", r, `+HEAD:${ref}`]);
      times[k].push.push(performance.now() - t);
      t = performance.now();
      git(src, [
        "fetch",
        "-q",
        "--no-tags",
        "--no-write-fetch-head",
        "--",
        r,
        `+${ref}:refs/heads/f-${k}-${i}`,
      ]);
      times[k].fetch.push(performance.now() - t);
    }
  return Object.fromEntries(
    kinds.map((k) => [k, { push_ms: median(times[k].push), fetch_ms: median(times[k].fetch) }]),
  );
}

/** When each task's job was taken by a worker ("took a task" in the workers' logs), by task id. */
function tookAt(workers, runId) {
  const at = new Map();
  for (const w of workers) {
    const file = join(w.home, "wd", "logs", "termorch.log");
    if (!existsSync(file)) continue;
    for (const line of readFileSync(file, "utf8").split("\n")) {
      if (!line.includes('"took a task"')) continue;
      const e = JSON.parse(line);
      if (e.run === runId && !at.has(e.task)) at.set(e.task, e.time);
    }
  }
  return at;
}

/** ms from task.published to a worker taking the job, and from that to the attempt running. */
function queueSplit(evs, took) {
  const queue = [];
  const prep = [];
  const published = new Map();
  for (const e of evs) {
    const ts = Date.parse(e.ts);
    if (e.type === "task.published") published.set(e.task_id, ts);
    if (e.type === "task.launched" && took.has(e.task_id) && published.has(e.task_id)) {
      queue.push(took.get(e.task_id) - published.get(e.task_id));
      prep.push(ts - took.get(e.task_id));
    }
  }
  const stats = (xs) =>
    xs.length ? { median: median(xs), p90: percentile(xs, 90), max: Math.max(...xs) } : null;
  return { queue_ms: stats(queue), worker_prep_ms: stats(prep) };
}

function events(runDir) {
  return readFileSync(join(runDir, "events.jsonl"), "utf8")
    .split("\n")
    .filter(Boolean)
    .map((l) => JSON.parse(l));
}

/** ms from each task's `from` event to its `task.launched`; merge time (last task.success -> merge end). */
function timeline(evs, from) {
  const start = new Map();
  const lat = [];
  for (const e of evs) {
    const ts = Date.parse(e.ts);
    if (e.type === from && !start.has(e.task_id)) start.set(e.task_id, ts);
    if (e.type === "task.launched" && start.has(e.task_id)) {
      lat.push(ts - start.get(e.task_id));
      start.delete(e.task_id);
    }
  }
  const succ = evs
    .filter((e) => /^task\.(success|failed|skipped)$/.test(e.type))
    .map((e) => Date.parse(e.ts));
  const merge = evs.find((e) => /^merge\.(success|conflict|failed)/.test(e.type));
  const first = evs.find((e) => e.type === "run.planned");
  return {
    latencies: lat,
    mergeMs: merge ? Date.parse(merge.ts) - Math.max(...succ) : null,
    tasksMs: Math.max(...succ) - Date.parse(first.ts),
  };
}

// The workspace is a folder below the assignments file: the run directory is the file's folder.
function report(runDir) {
  return JSON.parse(readFileSync(join(runDir, "execution_report.json"), "utf8"));
}

/** Tasks that did not succeed, with their reasons: the bullmq runs report them (they must be none). */
function notSucceeded(rep) {
  return rep.tasks
    .filter((t) => t.status !== "success")
    .map((t) => ({ id: t.id, status: t.status, reason: t.reason, detail: t.detail, hosts: t.hosts }));
}

function okReport(rep, n, what) {
  const ok = rep.tasks.filter((t) => t.status === "success").length;
  if (ok !== n || rep.merge?.result !== "success")
    throw new Error(
      `${what}: ${ok}/${n} tasks succeeded, merge ${rep.merge?.result}: ${JSON.stringify(rep.tasks.find((t) => t.status !== "success") ?? rep.merge).slice(0, 600)}`,
    );
}

/** `termorch run` as a coordinator or locally, with its own TMPDIR, tmux socket and GIT_TRACE. */
async function termorchRun(dir, file, config, trace, { allowFail = false } = {}) {
  const socket = trackSocket(uniqueSocket("scale"));
  const tmp = join(dir, "tmp");
  mkdirSync(tmp, { recursive: true });
  const args = [BIN, "run", file, ...(config ? ["--config", config] : [])];
  const r = await timed(process.execPath, args, {
    env: { ...TMUX_ENV, TMPDIR: tmp, TERMORCH_TMUX_SOCKET: socket, ...(trace ? { GIT_TRACE: trace } : {}) },
  });
  killServer(socket);
  if (r.code !== 0 && !(allowFail && r.code === 1))
    throw new Error(`termorch run ${file} exited ${r.code}: ${r.stderr.slice(-2000)}`);
  return r;
}

const workerCpu = (workers) =>
  workers.reduce((s, w) => s + (w.child.exitCode === null ? processCpu(w.child.pid) : 0), 0);

// ---------------------------------------------------------------------------------------------

/** What a run started, for a signal's clean-up (the finally block cannot run then). */
const live = { workers: [], redis: null, stub: null };

function killEverything() {
  for (const w of live.workers) {
    if (w.child.exitCode === null) w.child.kill("SIGKILL");
    killWorkerServer(w);
  }
  if (live.stub?.exitCode === null) live.stub.kill("SIGKILL");
  if (live.redis?.child.exitCode === null) live.redis.child.kill("SIGKILL");
  cleanupAll();
}

export async function run(options) {
  // From bench/run.js: its options (quick, json), not this file's.
  const o = "workers" in options ? options : settings(options);
  const onSignal = () => killEverything();
  // Before bench/run.js's own handler (it exits): the workers and redis-server go first.
  process.prependListener("SIGINT", onSignal);
  process.prependListener("SIGTERM", onSignal);
  const dir = tempDir("scale");
  const workers = [];
  live.workers = workers;
  let redis = null;
  let mon = null;
  const tag = Math.random().toString(36).slice(2, 8);
  const result = { options: o, phases: {} };
  try {
    redis = await startRedis(dir);
    live.redis = redis;
    log(`redis-server on port ${redis.port}; starting ${o.workers} workers`);
    const remote = join(dir, "remote.git");
    git(dir, ["init", "-q", "--bare", remote]);
    for (let i = 0; i < o.workers; i++)
      workers.push(startWorker(dir, redis.url, `sc${tag}-${i}`, o.maxParallel));
    const t0 = performance.now();
    const workerAddrs = await waitForWorkers(redis.redis, redis.me, workers);
    log(`${o.workers} workers up in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
    mon = await startMonitor(redis.port, (addr) =>
      addr === redis.me ? "bench" : workerAddrs.has(addr) ? "worker" : "coordinator",
    );
    const parallel = o.workers * o.maxParallel;

    // 1. The run through the bullmq backend.
    const bdir = join(dir, "bullmq");
    mkdirSync(bdir);
    const bws = workspace(bdir);
    const bfile = writeAssignments(bdir, "scale", dagTasks(o.tasks, writeFileAgent), {
      resource_limits: { max_parallel: parallel },
    });
    const config = join(bdir, "config.json");
    writeFileSync(config, JSON.stringify({ backend: "bullmq", redis: redis.url, git: { remote } }));
    const coordTrace = join(bdir, "git-trace.log");
    const remote0 = { bytes: duBytes(remote), objects: countObjects(remote) };
    const ws0 = duBytes(join(bws, ".git", "objects"));
    const traces0 = workers.map((w) => traceCounts(w.trace).size);
    const cpu0 = workerCpu(workers);
    const s0 = await snapshot(redis.redis);
    mon.phase = {};
    const mon0 = mon.bytes;
    log(`run: ${o.tasks} tasks through ${o.workers} workers (max_parallel ${parallel})`);
    const r = await termorchRun(bdir, bfile, config, coordTrace, { allowFail: true });
    await sleep(200);
    const s1 = await snapshot(redis.redis);
    const runMon = mon.phase;
    mon.phase = null;
    const runMonBytes = mon.bytes - mon0;
    const wCpu = workerCpu(workers) - cpu0;
    const brep = report(bdir);
    const bFailed = notSucceeded(brep);
    if (bFailed.length > 0)
      log(`run: ${bFailed.length} task(s) did not succeed: ${JSON.stringify(bFailed.slice(0, 3))}`);
    const bevs = events(bdir);
    const bt = timeline(bevs, "task.published");
    const split = queueSplit(bevs, tookAt(workers, runIdOf(bfile)));
    const perWorker = new Map();
    for (const t of brep.tasks)
      for (const h of t.hosts ?? []) perWorker.set(h.worker, (perWorker.get(h.worker) ?? 0) + 1);
    const wTrace = { fetches: 0, pushes: 0, processes: 0 };
    workers.forEach((w, i) => {
      const c = traceCounts(w.trace, traces0[i]);
      wTrace.fetches += c.fetches;
      wTrace.pushes += c.pushes;
      wTrace.processes += c.processes;
    });
    const cTrace = traceCounts(coordTrace);
    const remote1 = { bytes: duBytes(remote), objects: countObjects(remote) };
    const workerRepos = workers.map((w) => duBytes(join(w.home, "wd", "repos")));
    const wsGrowth = duBytes(join(bws, ".git", "objects")) - ws0;
    const runWall = r.wall;
    result.phases.run = {
      wall_s: runWall,
      coordinator_cpu_s: r.cpu,
      workers_cpu_s: wCpu,
      tasks_ms: bt.tasksMs,
      merge_ms: bt.mergeMs,
      not_succeeded: bFailed,
      merge_result: brep.merge?.result ?? null,
      start_latency_ms: {
        median: median(bt.latencies),
        p90: percentile(bt.latencies, 90),
        max: Math.max(...bt.latencies),
      },
      ...split,
      tasks_per_worker: {
        min: Math.min(...perWorker.values()),
        max: Math.max(...perWorker.values()),
        workers_used: perWorker.size,
      },
      commandstats: commandDelta(s0, s1),
      monitor: runMon,
      net_in: s1.netIn - s0.netIn,
      net_out: s1.netOut - s0.netOut - runMonBytes,
      used_memory_delta: s1.usedMemory - s0.usedMemory,
      git: { coordinator: cTrace, workers: wTrace },
      remote: { before: remote0, after: remote1 },
      worker_repo_bytes: {
        min: Math.min(...workerRepos),
        max: Math.max(...workerRepos),
        median: median(workerRepos),
      },
      workspace_objects_growth: wsGrowth,
    };

    // 2. The same workers idle for as long.
    const idleS = Math.min(o.idleMaxS, Math.max(o.idleMinS, runWall));
    log(`idle: ${o.workers} workers, no run, ${idleS.toFixed(1)} s`);
    const i0 = await snapshot(redis.redis);
    const imon0 = mon.bytes;
    mon.phase = {};
    await sleep(idleS * 1000);
    const i1 = await snapshot(redis.redis);
    const idleMon = mon.phase;
    mon.phase = null;
    const idleSeconds = (i1.at - i0.at) / 1000;
    result.phases.idle = {
      seconds: idleSeconds,
      commandstats: commandDelta(i0, i1),
      monitor: idleMon,
      net_in: i1.netIn - i0.netIn,
      net_out: i1.netOut - i0.netOut - (mon.bytes - imon0),
    };

    // 3. The baseline: the same assignments, backend local, same max_parallel.
    if (o.local) {
      const ldir = join(dir, "local");
      mkdirSync(ldir);
      workspace(ldir);
      const lfile = writeAssignments(ldir, "scale", dagTasks(o.tasks, writeFileAgent), {
        resource_limits: { max_parallel: parallel },
      });
      log(`local: the same ${o.tasks} tasks, backend local, max_parallel ${parallel}`);
      const lr = await termorchRun(ldir, lfile, null, null);
      okReport(report(ldir), o.tasks, "local run");
      const lt = timeline(events(ldir), "task.worktree");
      result.phases.local = {
        wall_s: lr.wall,
        cpu_s: lr.cpu,
        tasks_ms: lt.tasksMs,
        merge_ms: lt.mergeMs,
        start_latency_ms: {
          median: median(lt.latencies),
          p90: percentile(lt.latencies, 90),
          max: Math.max(...lt.latencies),
        },
      };
    }

    // 4. Results that carry logs: L tasks printing M MiB each (MONITOR off: it would echo every byte).
    mon.socket.destroy();
    mon = null;
    if (o.logTasks > 0) {
      const bytes = Math.round(o.logMib * 1024 * 1024);
      const gdir = join(dir, "logs");
      mkdirSync(gdir);
      workspace(gdir);
      const tasks = Array.from({ length: o.logTasks }, (_, i) => ({
        id: `p${i}`,
        command: printAgent(bytes, o.logSeconds * 2)(`p${i}`),
      }));
      const gfile = writeAssignments(gdir, "scalelogs", tasks, {
        resource_limits: { max_parallel: parallel },
      });
      const gconfig = join(gdir, "config.json");
      writeFileSync(gconfig, JSON.stringify({ backend: "bullmq", redis: redis.url, git: { remote } }));
      log(`logs: ${o.logTasks} tasks printing ${o.logMib} MiB each`);
      const g0 = await snapshot(redis.redis);
      // Redis's memory while the logs stream (sampled every 250 ms): its peak over the start.
      let peak = g0.usedMemory;
      const sampler = setInterval(() => {
        redis.redis
          .info("memory")
          .then((m) => {
            peak = Math.max(peak, Number(/^used_memory:(\d+)/m.exec(m)?.[1] ?? 0));
          })
          .catch(() => {});
      }, 250);
      const gr = await termorchRun(gdir, gfile, gconfig, null, { allowFail: true }).finally(() =>
        clearInterval(sampler),
      );
      await sleep(200);
      const g1 = await snapshot(redis.redis);
      const grun = runIdOf(gfile);
      const grep = report(gdir);
      const gFailed = notSucceeded(grep);
      const sizes = grep.tasks.map((t) => (t.logs ? statSync(join(gdir, t.logs.stdout)).size : 0));
      const jobKeys = [];
      let cursor = "0";
      do {
        const [next, batch] = await redis.redis.scan(
          cursor,
          "MATCH",
          `bull:termorch-tasks:${grun}.*`,
          "COUNT",
          1000,
        );
        cursor = next;
        jobKeys.push(...batch.filter((k) => !/:(lock|logs)$/.test(k)));
      } while (cursor !== "0");
      const jobMem = [];
      for (const k of jobKeys) jobMem.push(Number(await redis.redis.memory("USAGE", k, "SAMPLES", "0")));
      const eventsKey = "bull:termorch-tasks:events";
      result.phases.logs = {
        wall_s: gr.wall,
        bytes_per_task: bytes,
        stdout_logs_intact: sizes.filter((s) => s === bytes).length,
        not_succeeded: gFailed,
        used_memory_delta: g1.usedMemory - g0.usedMemory,
        used_memory_peak_delta: peak - g0.usedMemory,
        job_hash_bytes: { count: jobMem.length, median: jobMem.length ? median(jobMem) : null },
        events_stream: {
          entries: await redis.redis.xlen(eventsKey),
          bytes: Number(await redis.redis.memory("USAGE", eventsKey, "SAMPLES", "0")),
        },
        net_in: g1.netIn - g0.netIn,
        net_out: g1.netOut - g0.netOut,
        commandstats: commandDelta(g0, g1),
      };
    }
    // 5. The remote's refs: a push and a fetch against a remote holding many.
    if (o.refs > 0) {
      log(`refs: a push and a fetch against remotes with 0 and ${o.refs} other refs (loose, packed)`);
      result.phases.refs = { refs: o.refs, ...refsPhase(dir, o.refs, o.refReps) };
    }
    return summarize(o, result);
  } finally {
    mon?.socket?.destroy();
    await stopWorkers(workers);
    if (redis) await stopRedis(redis);
    if (process.env.SCALE_KEEP) log(`kept ${dir}`);
    else removeTemp(dir);
    process.off("SIGINT", onSignal);
    process.off("SIGTERM", onSignal);
  }
}

async function stopRedis(redis) {
  await redis.redis.shutdown("NOSAVE").catch(() => {});
  redis.redis.disconnect();
  const deadline = Date.now() + 10_000;
  while (redis.child.exitCode === null && redis.child.signalCode === null && Date.now() < deadline)
    await sleep(50);
  if (redis.child.exitCode === null && redis.child.signalCode === null) redis.child.kill("SIGKILL");
}

/**
 * `--stub N`: N simulated workers (bench/scale-stub.mjs, one process) instead of real ones:
 * Redis and the coordinator with N workers idle, then T independent tasks all in flight at once
 * (max_parallel N), each held --hold-ms by its worker.
 */
export async function stubRun(o) {
  const onSignal = () => killEverything();
  process.prependListener("SIGINT", onSignal);
  process.prependListener("SIGTERM", onSignal);
  const dir = tempDir("scale-stub");
  const tag = Math.random().toString(36).slice(2, 8);
  let redis = null;
  let stub = null;
  const res = { options: o, phases: {} };
  try {
    redis = await startRedis(dir);
    live.redis = redis;
    const remote = join(dir, "remote.git");
    git(dir, ["init", "-q", "--bare", remote]);
    const out = openSync(join(dir, "stub.out"), "a");
    stub = spawn(
      process.execPath,
      [
        join(ROOT, "bench", "scale-stub.mjs"),
        "--redis",
        redis.url,
        "--workers",
        String(o.stub),
        "--hold-ms",
        String(o.holdMs),
        "--remote",
        remote,
        "--tag",
        `st${tag}`,
      ],
      { stdio: ["ignore", out, out], env: { ...process.env, GIT_TRACE: "" } },
    );
    live.stub = stub;
    log(`stub: ${o.stub} simulated workers starting`);
    const t0 = performance.now();
    for (;;) {
      if (stub.exitCode !== null) throw new Error(`the stub exited ${stub.exitCode}: ${dir}/stub.out`);
      const blocking = (await redis.redis.client("LIST"))
        .split("\n")
        .filter((l) => / cmd=bzpopmin/.test(l)).length;
      if (blocking >= o.stub) break;
      if (performance.now() - t0 > 300_000)
        throw new Error(`only ${blocking} of ${o.stub} simulated workers blocking after 300 s`);
      await sleep(500);
    }
    log(
      `stub: ${o.stub} workers up in ${((performance.now() - t0) / 1000).toFixed(1)} s; idle ${o.stubIdleMs / 1000} s`,
    );
    await sleep(2000);
    const i0 = await snapshot(redis.redis);
    const sc0 = processCpu(stub.pid);
    await sleep(o.stubIdleMs);
    const i1 = await snapshot(redis.redis);
    const idleS = (i1.at - i0.at) / 1000;
    res.phases.idle = {
      seconds: idleS,
      commands: sum(commandDelta(i0, i1)),
      redis_cpu_s: i1.cpu - i0.cpu,
      stub_cpu_s: processCpu(stub.pid) - sc0,
      net: i1.netIn - i0.netIn + i1.netOut - i0.netOut,
    };

    const rdir = join(dir, "run");
    mkdirSync(rdir);
    workspace(rdir);
    const tasks = Array.from({ length: o.tasks }, (_, i) => ({ id: `t${i}`, command: ["true"] }));
    const file = writeAssignments(rdir, "stub", tasks, { resource_limits: { max_parallel: o.stub } });
    const config = join(rdir, "config.json");
    writeFileSync(config, JSON.stringify({ backend: "bullmq", redis: redis.url, git: { remote } }));
    log(`stub: a run of ${o.tasks} tasks, each held ${o.holdMs} ms, max_parallel ${o.stub}`);
    const r0 = await snapshot(redis.redis);
    const rc0 = processCpu(stub.pid);
    const r = await termorchRun(rdir, file, config, null, { allowFail: true });
    const r1 = await snapshot(redis.redis);
    const rep = report(rdir);
    const evs = events(rdir);
    const tl = timeline(evs, "task.published");
    const pub = evs.filter((e) => e.type === "task.published").map((e) => Date.parse(e.ts));
    const launched = evs.filter((e) => e.type === "task.launched").map((e) => Date.parse(e.ts));
    const ended = evs
      .filter((e) => e.type === "task.success" || e.type === "task.failed")
      .map((e) => Date.parse(e.ts));
    res.phases.run = {
      wall_s: r.wall,
      coordinator_cpu_s: r.cpu,
      stub_cpu_s: processCpu(stub.pid) - rc0,
      redis_cpu_s: r1.cpu - r0.cpu,
      commands: sum(commandDelta(r0, r1)),
      commandstats: commandDelta(r0, r1),
      net: r1.netIn - r0.netIn + r1.netOut - r0.netOut,
      not_succeeded: notSucceeded(rep),
      merge_result: rep.merge?.result ?? null,
      merge_ms: tl.mergeMs,
      start_latency_ms: {
        median: median(tl.latencies),
        p90: percentile(tl.latencies, 90),
        max: Math.max(...tl.latencies),
      },
      publish_span_s: (Math.max(...pub) - Math.min(...pub)) / 1000,
      launched: launched.length,
      launch_span_s: (Math.max(...launched) - Math.min(...launched)) / 1000,
      end_span_s: (Math.max(...ended) - Math.min(...ended)) / 1000,
      // The coordinator's own stretches: before the first job, and after the last task's end.
      before_first_publish_s:
        (Math.min(...pub) - Date.parse(evs.find((e) => e.type === "run.accepted").ts)) / 1000,
      after_last_end_s:
        (Date.parse(evs.find((e) => e.type === "report.written")?.ts ?? evs.at(-1).ts) - Math.max(...ended)) /
        1000,
    };
    return stubSummary(o, res);
  } finally {
    if (stub && stub.exitCode === null) {
      stub.kill("SIGTERM");
      const deadline = Date.now() + 20_000;
      while (stub.exitCode === null && stub.signalCode === null && Date.now() < deadline) await sleep(50);
      if (stub.exitCode === null && stub.signalCode === null) stub.kill("SIGKILL");
    }
    if (redis) await stopRedis(redis);
    if (process.env.SCALE_KEEP) log(`kept ${dir}`);
    else removeTemp(dir);
    process.off("SIGINT", onSignal);
    process.off("SIGTERM", onSignal);
  }
}

function stubSummary(o, res) {
  const { idle, run } = res.phases;
  const N = o.stub;
  const T = o.tasks;
  const tag = `scale stub ${N} workers`;
  const idleRate = idle.commands / idle.seconds;
  const perTaskCommands = (run.commands - idleRate * run.wall_s) / T;
  const perTaskRedisCpu = ((run.redis_cpu_s - (idle.redis_cpu_s / idle.seconds) * run.wall_s) * 1000) / T;
  res.per_task = {
    commands: perTaskCommands,
    redis_cpu_ms: perTaskRedisCpu,
    coordinator_cpu_ms: (run.coordinator_cpu_s * 1000) / T,
  };
  const rows = [
    row(`${tag} idle: Redis commands per s (all, scripts' included)`, idleRate, "/s"),
    row(`${tag} idle: Redis commands per s per worker`, idleRate / N, "/s"),
    row(`${tag} idle: Redis CPU (share of one core)`, (idle.redis_cpu_s / idle.seconds) * 100, "%"),
    row(`${tag} idle: Redis bytes in+out per s`, idle.net / idle.seconds / 1024, "KiB/s"),
    row(
      `${tag}, ${T} tasks held ${o.holdMs / 1000} s: tasks that did not succeed`,
      run.not_succeeded.length,
      "",
      {
        target: { value: 0, text: "0" },
        check: true,
      },
    ),
    row(`${tag}, ${T} tasks: wall (vs the hold: the floor)`, run.wall_s, "s", { baseline: o.holdMs / 1000 }),
    // The stub's progress must parse as the coordinator's TaskJobProgress, or no launch is recorded.
    row(`${tag}, ${T} tasks: launches the coordinator recorded (task.launched)`, run.launched, "", {
      target: { value: T, text: `${T}` },
      lowerIsBetter: false,
      check: true,
    }),
    row(`${tag}, ${T} tasks: run.accepted to the first task.published`, run.before_first_publish_s, "s"),
    row(`${tag}, ${T} tasks: first to last task.published`, run.publish_span_s, "s"),
    row(`${tag}, ${T} tasks: first to last task.launched`, run.launch_span_s, "s"),
    row(
      `${tag}, ${T} tasks: start latency median / p90 (published -> launched)`,
      `${run.start_latency_ms.median} / ${run.start_latency_ms.p90} ms`,
      "",
    ),
    row(`${tag}, ${T} tasks: first to last task end (success or failed)`, run.end_span_s, "s"),
    row(`${tag}, ${T} tasks: last task end to report.written`, run.after_last_end_s, "s"),
    row(
      `${tag}, ${T} tasks: merge (last task end -> merge end)`,
      run.merge_ms === null ? null : run.merge_ms / 1000,
      "s",
    ),
    row(`${tag}, ${T} tasks: coordinator CPU per task`, res.per_task.coordinator_cpu_ms, "ms"),
    row(`${tag}, ${T} tasks: Redis commands per task (idle taken off)`, perTaskCommands, ""),
    row(`${tag}, ${T} tasks: Redis CPU per task (idle taken off)`, perTaskRedisCpu, "ms"),
    row(
      `${tag}, ${T} tasks: Redis CPU during the run (share of one core)`,
      (run.redis_cpu_s / run.wall_s) * 100,
      "%",
    ),
  ];
  const notes = [
    `stub: ${N} simulated workers (bench/scale-stub.mjs: BullMQ workers with termorch worker's options, announcements, cancel polls; no tmux, no git transfers, canned results); the coordinator is the real \`termorch run\``,
    `commands during the run by kind (per task): ${Object.entries(run.commandstats)
      .sort((a, b) => b[1] - a[1])
      .slice(0, 12)
      .map(([k, v]) => `${k} ${(v / T).toFixed(2)}`)
      .join(", ")}`,
  ];
  if (run.not_succeeded.length > 0)
    notes.push(`not succeeded: ${JSON.stringify(run.not_succeeded.slice(0, 3))}`);
  return { name: "scale-stub", rows, notes, result: res };
}

/** Rows of the table and the per-task figures the JSON carries. */
function summarize(o, res) {
  const T = o.tasks;
  const W = o.workers;
  const run = res.phases.run;
  const idle = res.phases.idle;
  const local = res.phases.local;
  const rows = [];
  const tag = `scale ${W}w×${o.maxParallel} ${T} tasks`;
  const side = (m, s) => sum(m[s] ?? {});
  const idleWorkerRate = side(idle.monitor, "worker") / idle.seconds / W;
  const idleLuaRate = side(idle.monitor, "lua") / idle.seconds / W;
  const idleAllRate = sum(idle.commandstats) / idle.seconds / W;
  const idleInRate = idle.net_in / idle.seconds / W;
  const idleOutRate = idle.net_out / idle.seconds / W;
  const busy = run.wall_s * W;
  const perTask = {
    all_commands: (sum(run.commandstats) - idleAllRate * busy) / T,
    coordinator_commands: side(run.monitor, "coordinator") / T,
    worker_commands: (side(run.monitor, "worker") - idleWorkerRate * busy) / T,
    script_commands: (side(run.monitor, "lua") - idleLuaRate * busy) / T,
    net_in: (run.net_in - idleInRate * busy) / T,
    net_out: (run.net_out - idleOutRate * busy) / T,
    fetches: (run.git.coordinator.fetches + run.git.workers.fetches) / T,
    pushes: (run.git.coordinator.pushes + run.git.workers.pushes) / T,
    coordinator_fetches: run.git.coordinator.fetches / T,
    coordinator_pushes: run.git.coordinator.pushes / T,
    worker_fetches: run.git.workers.fetches / T,
    worker_pushes: run.git.workers.pushes / T,
    coordinator_git_processes: run.git.coordinator.processes / T,
    worker_git_processes: run.git.workers.processes / T,
    remote_growth_bytes: (run.remote.after.bytes - run.remote.before.bytes) / T,
    coordinator_cpu_ms: (run.coordinator_cpu_s * 1000) / T,
    workers_cpu_ms: (run.workers_cpu_s * 1000) / T,
  };
  const idlePerWorker = {
    client_commands_per_s: idleWorkerRate,
    all_commands_per_s: idleAllRate,
    net_in_per_s: idleInRate,
    net_out_per_s: idleOutRate,
    by_command_per_s: Object.fromEntries(
      Object.entries(idle.monitor.worker ?? {}).map(([k, v]) => [k, v / idle.seconds / W]),
    ),
  };
  res.per_task = perTask;
  res.idle_per_worker = idlePerWorker;
  rows.push(
    row(`${tag}: tasks that did not succeed (bullmq run)`, run.not_succeeded.length, "", {
      target: { value: 0, text: "0" },
      check: true,
    }),
  );
  rows.push(
    row(
      `${tag}: wall, bullmq (vs local, same max_parallel ${W * o.maxParallel})`,
      run.wall_s,
      "s",
      local ? { baseline: local.wall_s } : {},
    ),
  );
  rows.push(
    row(
      `${tag}: tasks phase (run.planned -> last task.success), bullmq vs local`,
      run.tasks_ms / 1000,
      "s",
      local ? { baseline: local.tasks_ms / 1000 } : {},
    ),
  );
  if (run.merge_result === "success")
    rows.push(
      row(
        `${tag}: merge (last task.success -> merge end), bullmq vs local`,
        run.merge_ms / 1000,
        "s",
        local ? { baseline: local.merge_ms / 1000 } : {},
      ),
    );
  else
    rows.push(row(`${tag}: merge, bullmq: not run (${run.merge_result}: tasks did not succeed)`, null, ""));

  rows.push(
    row(
      `${tag}: start latency median (published/worktree -> launched), bullmq vs local`,
      run.start_latency_ms.median,
      "ms",
      local ? { baseline: local.start_latency_ms.median } : {},
    ),
  );
  rows.push(
    row(
      `${tag}: start latency p90, bullmq vs local`,
      run.start_latency_ms.p90,
      "ms",
      local ? { baseline: local.start_latency_ms.p90 } : {},
    ),
  );
  if (run.queue_ms) {
    rows.push(
      row(
        `${tag}: of which queued (published -> a worker took it), median / p90`,
        `${run.queue_ms.median} / ${run.queue_ms.p90} ms`,
        "",
      ),
    );
    rows.push(
      row(
        `${tag}: of which on the worker (took -> launched), median / p90`,
        `${run.worker_prep_ms.median} / ${run.worker_prep_ms.p90} ms`,
        "",
      ),
    );
  }
  rows.push(
    row(
      `${tag}: CPU per task, coordinator + workers (vs local run)`,
      perTask.coordinator_cpu_ms + perTask.workers_cpu_ms,
      "ms",
      local ? { baseline: (local.cpu_s * 1000) / T } : {},
    ),
  );
  rows.push(
    row(
      `${tag}: workers used; tasks per worker min-max`,
      `${run.tasks_per_worker.workers_used}; ${run.tasks_per_worker.min}-${run.tasks_per_worker.max}`,
      "",
    ),
  );
  rows.push(
    row(
      `${tag}: Redis commands per task, all (commandstats, scripts' included, idle taken off)`,
      perTask.all_commands,
      "",
    ),
  );
  rows.push(row(`${tag}: Redis commands per task sent by the coordinator`, perTask.coordinator_commands, ""));
  rows.push(
    row(`${tag}: Redis commands per task sent by workers (idle taken off)`, perTask.worker_commands, ""),
  );
  rows.push(
    row(`${tag}: Redis commands per task run inside scripts (idle taken off)`, perTask.script_commands, ""),
  );
  rows.push(row(`${tag}: Redis bytes in per task`, perTask.net_in / 1024, "KiB"));
  rows.push(row(`${tag}: Redis bytes out per task`, perTask.net_out / 1024, "KiB"));
  rows.push(row(`${tag}: idle worker: commands sent per s`, idleWorkerRate, "/s"));
  rows.push(row(`${tag}: idle worker: all commands per s (scripts' included)`, idleAllRate, "/s"));
  rows.push(row(`${tag}: idle worker: bytes in+out per s`, (idleInRate + idleOutRate) / 1024, "KiB/s"));
  rows.push(row(`${tag}: git fetches per task (coordinator + workers)`, perTask.fetches, ""));
  rows.push(row(`${tag}: git pushes per task (coordinator + workers)`, perTask.pushes, ""));
  rows.push(
    row(
      `${tag}: git processes per task, coordinator / workers`,
      `${perTask.coordinator_git_processes.toFixed(1)} / ${perTask.worker_git_processes.toFixed(1)}`,
      "",
    ),
  );
  rows.push(row(`${tag}: remote growth per task`, perTask.remote_growth_bytes / 1024, "KiB"));
  rows.push(
    row(`${tag}: a worker's repository after the run (median)`, run.worker_repo_bytes.median / 1024, "KiB"),
  );
  rows.push(row(`${tag}: Redis memory kept per finished task`, run.used_memory_delta / T / 1024, "KiB"));
  const lg = res.phases.logs;
  if (lg) {
    const L = o.logTasks;
    const ltag = `scale logs ${L} tasks × ${o.logMib} MiB stdout over ${o.logSeconds} s`;
    rows.push(
      row(`${ltag}: tasks that did not succeed`, lg.not_succeeded.length, "", {
        target: { value: 0, text: "0" },
        check: true,
      }),
    );
    rows.push(
      row(`${ltag}: stdout logs arrived whole`, `${lg.stdout_logs_intact}/${L}`, "", {
        met: lg.stdout_logs_intact === L,
        target: { value: L, text: `${L}/${L}` },
        check: true,
      }),
    );
    rows.push(
      row(
        `${ltag}: Redis memory at its peak during the run, per task (vs its log)`,
        lg.used_memory_peak_delta / L / 2 ** 20,
        "MiB",
        {
          baseline: o.logMib,
        },
      ),
    );
    rows.push(
      row(`${ltag}: Redis memory kept per task (vs its log)`, lg.used_memory_delta / L / 2 ** 20, "MiB", {
        baseline: o.logMib,
      }),
    );
    rows.push(
      row(
        `${ltag}: one job's hash in Redis (MEMORY USAGE, median)`,
        lg.job_hash_bytes.median / 2 ** 20,
        "MiB",
        { baseline: o.logMib },
      ),
    );
    rows.push(
      row(`${ltag}: events stream (MEMORY USAGE) per task`, lg.events_stream.bytes / L / 2 ** 20, "MiB", {
        baseline: o.logMib,
      }),
    );
    rows.push(
      row(`${ltag}: Redis bytes in per task (vs its log)`, lg.net_in / L / 2 ** 20, "MiB", {
        baseline: o.logMib,
      }),
    );
    rows.push(
      row(`${ltag}: Redis bytes out per task (vs its log)`, lg.net_out / L / 2 ** 20, "MiB", {
        baseline: o.logMib,
      }),
    );
    rows.push(row(`${ltag}: wall`, lg.wall_s, "s"));
  }
  const rf = res.phases.refs;
  if (rf) {
    const rtag = `scale remote refs`;
    for (const k of ["loose", "packed"]) {
      rows.push(
        row(`${rtag}: push of one commit, remote with ${rf.refs} ${k} refs (vs none)`, rf[k].push_ms, "ms", {
          baseline: rf.none.push_ms,
        }),
      );
      rows.push(
        row(`${rtag}: fetch of one ref, remote with ${rf.refs} ${k} refs (vs none)`, rf[k].fetch_ms, "ms", {
          baseline: rf.none.fetch_ms,
        }),
      );
    }
  }
  const notes = [
    `run: ${T} tasks (root, ${T - 10} fan-out, 8 joins of 4, final), ${W} workers × ${o.maxParallel}; idle measured for ${idle.seconds.toFixed(1)} s after it`,
    `idle worker commands by kind (per worker per s): ${Object.entries(idlePerWorker.by_command_per_s)
      .map(([k, v]) => `${k} ${v.toFixed(3)}`)
      .join(", ")}`,
    `coordinator commands by kind (per task): ${Object.entries(run.monitor.coordinator ?? {})
      .sort((a, b) => b[1] - a[1])
      .map(([k, v]) => `${k} ${(v / T).toFixed(2)}`)
      .join(", ")}`,
    `worker commands by kind during the run (per task, idle not taken off): ${Object.entries(
      run.monitor.worker ?? {},
    )
      .sort((a, b) => b[1] - a[1])
      .map(([k, v]) => `${k} ${(v / T).toFixed(2)}`)
      .join(", ")}`,
    `remote after the run: ${JSON.stringify(run.remote.after.objects)}; coordinator's objects grew ${(run.workspace_objects_growth / 1024).toFixed(0)} KiB`,
  ];
  return { name: "scale", rows, notes, result: res };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  let o;
  try {
    o = parseArgs(process.argv.slice(2));
  } catch (error) {
    console.error(String(error.message));
    process.exit(2);
  }
  const m = machine();
  console.log(
    `machine: ${m.cores} cores (${m.cpu}), ${m.memory_gib} GiB, ${m.os}, tmux ${m.tmux}, git ${m.git}, node ${m.node}; redis ${spawnSync("redis-server", ["--version"], { encoding: "utf8" }).stdout.trim().split(" ")[2]}; ${m.date}`,
  );
  const onSignal = () => {
    killEverything();
    process.exit(130);
  };
  process.once("SIGINT", onSignal);
  process.once("SIGTERM", onSignal);
  const t0 = Date.now();
  const out = o.stub > 0 ? await stubRun(o) : await run(o);
  log(`done in ${((Date.now() - t0) / 1000).toFixed(0)} s`);
  console.log(table(out.rows));
  for (const n of out.notes) console.log(`- ${n}`);
  if (o.json) writeFileSync(o.json, `${JSON.stringify({ machine: m, ...out }, null, 2)}\n`);
}
