// Operators' views (issue 15). 1. What a RunFeed (the live view behind `termorch watch` and
// `termorch serve`) costs while a chatty agent runs: a real run (built CLI, a private tmux socket,
// registry and TMPDIR) whose first task prints a line every ~10 ms for ~10 s while short tasks
// start and finish next to it, with K finished runs registered in the same scope. The feed runs
// alone in a child process; its CPU (its own and its tmux clients', /proc/self/stat) while the run
// is in view, per second, against the run's driver (its process tree, bash's `times`) per second
// of the same run; how many views it emitted; and the latency from a status file appearing
// (fs.watch in the feed's process) to the first view that shows that state.
// 2. report.html: rendering and writing the page of a run of N tasks (a synthetic ledger and
// report) against writing its execution_report.json, in the same run.
// FEED_PROF=DIR: the feed's process also writes its CPU profile (node --cpu-prof) there.
import { spawn, spawnSync } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import {
  BIN,
  killServer,
  makeWorkspace,
  median,
  percentile,
  ROOT,
  removeTemp,
  row,
  runIdOf,
  TMUX_ENV,
  tempDir,
  trackSocket,
  uniqueSocket,
  writeAssignments,
} from "./lib.mjs";

/** Runs a command to its end; wall time and CPU of its process tree (bash's `times`), and its stdout. */
function treeTimed(cmd, args, env, onStdout, timeoutMs = 600_000) {
  const script = '"$@"; rc=$?; times >&3; exit $rc';
  const t0 = performance.now();
  const child = spawn("bash", ["-c", script, "bench", cmd, ...args], {
    env,
    stdio: ["ignore", "pipe", "pipe", "pipe"],
    detached: true,
  });
  // Its own process group: a feed that never sees the end of its run is stopped with its children.
  const timer = setTimeout(() => {
    stderr += `killed after ${timeoutMs} ms`;
    process.kill(-child.pid, "SIGKILL");
  }, timeoutMs);
  let times = "";
  let stderr = "";
  child.stdio[3].on("data", (d) => {
    times += d;
  });
  child.stderr.on("data", (d) => {
    stderr += d;
  });
  child.stdout.on("data", (d) => onStdout?.(String(d)));
  return new Promise((resolve) =>
    child.on("close", (code) => {
      clearTimeout(timer);
      const wall = (performance.now() - t0) / 1000;
      const [u, s] = (times.trim().split("\n")[1] ?? "0m0s 0m0s").split(/\s+/).map(bashTime);
      resolve({ code, wall, cpu: u + s, stderr });
    }),
  );
}

function bashTime(text) {
  const m = /^(\d+)m([\d.]+)s$/.exec(text ?? "");
  return m ? Number(m[1]) * 60 + Number(m[2]) : 0;
}

/**
 * The feed's process: opens a RunFeed on the registry, says "ready", and once the run shows up
 * counts views and the CPU of this process and its reaped children (the tmux clients it runs)
 * until the view shows the run reported; then prints its figures as JSON and leaves.
 */
const FEED_CHILD = `
import { readFileSync, watch } from "node:fs";
import { performance } from "node:perf_hooks";
const cfg = JSON.parse(process.env.BENCH_FEED);
const { RunFeed } = await import(cfg.runFeed);
const TCK = cfg.clkTck;
const ticks = () => {
  const s = readFileSync("/proc/self/stat", "utf8");
  const f = s.slice(s.lastIndexOf(")") + 2).split(" ");
  return { all: (Number(f[11]) + Number(f[12]) + Number(f[13]) + Number(f[14])) / TCK, children: (Number(f[13]) + Number(f[14])) / TCK };
};
const cpu = () => ticks().all;
const childCpu = () => ticks().children;
const fileSeen = new Map();
watch(cfg.statusDir, (_e, name) => {
  if (name && !fileSeen.has(name)) fileSeen.set(name, performance.now());
});
const feed = await RunFeed.open({ kind: "registry" }, { env: cfg.env, cwd: cfg.cwd });
let start = null;
let views = 0;
const shown = new Set();
const latency = [];
feed.subscribe((v) => {
  const t = performance.now();
  const run = v.runs.find((r) => r.run_id === cfg.runId);
  if (!run) return;
  if (start === null) start = { t, cpu: cpu(), children: childCpu() };
  views++;
  for (const task of run.tasks) {
    const key = task.id + "." + task.state;
    if (shown.has(key)) continue;
    shown.add(key);
    const at = fileSeen.get(key);
    if (at !== undefined) latency.push(t - at);
  }
  if (run.phase !== "reported") return;
  const out = { views, seconds: (t - start.t) / 1000, cpu: cpu() - start.cpu, children: childCpu() - start.children, latency, runs: v.runs.length };
  process.stdout.write(JSON.stringify(out) + "\\n", () => process.exit(0));
});
process.stdout.write("ready\\n");
`;

const CHATTY =
  '$|=1; for my $i (1..$ENV{LINES_N}) { printf "line %d of a chatty agent at %.3f\\n", $i, time; sleep 0.01 }';

/** Runs of one task each, run to their end one after another: the finished runs of the scope. */
async function finishedRuns(base, k, env) {
  for (let i = 0; i < k; i++) {
    const dir = join(base, `done-${i}`);
    mkdirSync(dir);
    makeWorkspace(dir);
    const file = writeAssignments(dir, "views-done", [
      { id: "a", command: ["sh", "-c", `echo finished run ${i}`] },
      { id: "b", command: ["true"], dependencies: ["a"] },
    ]);
    const r = await treeTimed(process.execPath, [BIN, "run", file], env);
    if (r.code !== 0) throw new Error(`finished run ${i} exited ${r.code}: ${r.stderr.slice(-1000)}`);
  }
}

async function feedRun(k, lines, shorts) {
  const base = tempDir("views");
  const tmp = join(base, "tmp");
  mkdirSync(tmp);
  const socket = trackSocket(uniqueSocket("views"));
  const env = {
    ...TMUX_ENV,
    TERMORCH_TMUX_SOCKET: socket,
    TERMORCH_REGISTRY: join(base, "registry"),
    TMPDIR: tmp,
  };
  try {
    await finishedRuns(base, k, env);
    const dir = join(base, "live");
    mkdirSync(dir);
    makeWorkspace(dir);
    const tasks = [
      {
        id: "chatty",
        command: ["perl", "-MTime::HiRes=sleep,time", "-e", CHATTY],
        env: { LINES_N: String(lines) },
      },
      ...Array.from({ length: shorts }, (_, i) => ({ id: `s${i + 1}`, command: ["sleep", "0.6"] })),
    ];
    const file = writeAssignments(dir, "views-live", tasks);
    mkdirSync(join(dir, "status"));
    const clkTck = Number(spawnSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).stdout.trim()) || 100;
    const cfg = {
      runFeed: join(ROOT, "dist", "ops", "run-feed.js"),
      env,
      cwd: dir,
      runId: runIdOf(file),
      statusDir: join(dir, "status"),
      clkTck,
    };
    let ready;
    const isReady = new Promise((r) => {
      ready = r;
    });
    let out = "";
    const feed = treeTimed(
      process.execPath,
      [
        ...(process.env.FEED_PROF ? ["--cpu-prof", `--cpu-prof-dir=${process.env.FEED_PROF}`] : []),
        "--input-type=module",
        "-e",
        FEED_CHILD,
      ],
      { ...env, BENCH_FEED: JSON.stringify(cfg) },
      (d) => {
        out += d;
        if (out.includes("ready\n")) ready();
      },
      120_000,
    );
    await Promise.race([
      isReady,
      feed.then((r) => Promise.reject(new Error(`feed exited ${r.code}: ${r.stderr}`))),
    ]);
    const driver = await treeTimed(process.execPath, [BIN, "run", file, "--max-parallel", "2"], env);
    if (driver.code !== 0)
      throw new Error(`the chatty run exited ${driver.code}: ${driver.stderr.slice(-1000)}`);
    const fed = await feed;
    if (fed.code !== 0) throw new Error(`feed exited ${fed.code}: ${fed.stderr.slice(-1000)}`);
    const figures = JSON.parse(out.split("\n").find((l) => l.startsWith("{")));
    return { driver, figures };
  } finally {
    killServer(socket);
    removeTemp(base);
  }
}

/** A ledger and a report of `n` tasks in waves of 50, each started, exited and succeeded once. */
async function syntheticRun(dir, n) {
  const { buildReport, skippedMerge } = await import(join(ROOT, "dist", "report", "build.js"));
  const { newTaskRun } = await import(join(ROOT, "dist", "task", "task-run.js"));
  const t0 = Date.parse("2026-01-01T00:00:00.000Z");
  const iso = (ms) => new Date(ms).toISOString();
  const ids = Array.from({ length: n }, (_, i) => `task-${String(i).padStart(5, "0")}`);
  const waves = [];
  for (let i = 0; i < n; i += 50) waves.push(ids.slice(i, i + 50));
  const hash = "0".repeat(64);
  const lines = [];
  const event = (ms, type, task, data) =>
    lines.push(
      JSON.stringify({
        schema_version: 1,
        seq: lines.length,
        ts: iso(ms),
        type,
        ...(task ? { task_id: task } : {}),
        data,
        prev: hash,
        hash,
      }),
    );
  event(t0, "run.accepted", null, {
    run_id: "bench",
    tasks: ids.map((id) => ({ id, agent: "bench", dependencies: [] })),
  });
  event(t0, "run.planned", null, {
    waves,
    critical_path: waves.map((w) => w[0]),
    max_parallel: 8,
    schedule: "eager",
  });
  const runs = [];
  ids.forEach((id, i) => {
    const start = t0 + 1000 + Math.floor(i / 8) * 2000;
    const end = start + 1500 + (i % 7) * 50;
    const logs = { stdout: `logs/${id}-1.out`, stderr: `logs/${id}-1.err` };
    event(start, "task.launched", id, { attempt: 1, session: `termorch-bench-${id}`, logs });
    event(start, "task.running", id, { attempt: 1, state: "running", started_at: iso(start) });
    event(end, "task.exited", id, {
      attempt: 1,
      exit_code: 0,
      started_at: iso(start),
      finished_at: iso(end),
    });
    event(end, "task.success", id, {
      attempt: 1,
      state: "success",
      reason: null,
      detail: null,
      finished_at: iso(end),
    });
    const t = newTaskRun(id, "bench", [], ["sh", "-c", `echo ${id}`]);
    Object.assign(t, {
      state: "success",
      exitCode: 0,
      attempts: 1,
      startedAt: start,
      finishedAt: end,
      logs,
      session: `termorch-bench-${id}`,
    });
    runs.push(t);
  });
  const finishedAt = t0 + 2000 + Math.ceil(n / 8) * 2000;
  event(finishedAt, "merge.success", null, {});
  event(finishedAt, "report.written", null, {});
  writeFileSync(join(dir, "events.jsonl"), `${lines.join("\n")}\n`);
  return buildReport({
    runId: "bench",
    startedAt: t0,
    finishedAt,
    dryRun: false,
    waves,
    tasks: runs,
    merge: skippedMerge("non-git workspace"),
    validation: "skipped",
    cancelled: false,
    error: null,
    workspace: dir,
    tmuxSocket: "termorch-bench",
    criticalPath: waves.map((w) => w[0]),
    maxParallel: 8,
    peakParallelism: 8,
  });
}

async function reportCost(n, reps) {
  const { writeReport, writeReportHtml } = await import(join(ROOT, "dist", "run", "report-file.js"));
  const dir = tempDir("views-report");
  try {
    const report = await syntheticRun(dir, n);
    const json = [];
    const html = [];
    for (let i = 0; i < reps; i++) {
      let t = performance.now();
      await writeReport(dir, report, { html: false });
      json.push(performance.now() - t);
      t = performance.now();
      await writeReportHtml(dir, report);
      html.push(performance.now() - t);
    }
    return { json: median(json), html: median(html) };
  } finally {
    removeTemp(dir);
  }
}

/** Finished runs K, the chatty task's lines, the short tasks, report sizes, repetitions. */
function settings(opts) {
  if (opts.smoke) return { ks: [0, 2], lines: 50, shorts: 2, sizes: [100], reps: 1 };
  if (opts.quick) return { ks: [0, 10], lines: 300, shorts: 4, sizes: [1000], reps: 3 };
  return { ks: [0, 30], lines: 1000, shorts: 12, sizes: [1000, 10_000], reps: 5 };
}

export async function run(opts = {}) {
  const rows = [];
  const notes = [];
  const { ks, lines, shorts, sizes, reps } = settings(opts);
  for (const k of ks) {
    const { driver, figures: f } = await feedRun(k, lines, shorts);
    const label = `views: RunFeed, chatty run + ${k} finished runs`;
    const feedPerS = f.cpu / f.seconds;
    const driverPerS = driver.cpu / driver.wall;
    rows.push(row(`${label}: run's driver CPU per s (process tree)`, driverPerS * 1000, "ms/s"));
    rows.push(
      row(`${label}: feed CPU per s (vs driver)`, feedPerS * 1000, "ms/s", {
        baseline: driverPerS * 1000,
        target: { value: 0.25, text: "≤ 0.25× driver" },
      }),
    );
    rows.push(
      row(`${label}: feed CPU per s, of which its tmux clients`, (f.children / f.seconds) * 1000, "ms/s"),
    );
    rows.push(row(`${label}: views emitted per s`, f.views / f.seconds, "/s"));
    rows.push(
      row(`${label}: status file → view, p50`, percentile(f.latency, 50), "ms", {
        target: { value: 250, text: "p50 < 250 ms" },
      }),
    );
    rows.push(
      row(`${label}: status file → view, p95 (${f.latency.length} changes)`, percentile(f.latency, 95), "ms"),
    );
  }
  notes.push(
    `views: the feed runs alone in a child process (RunFeed on the registry, default throttle and sweep); its CPU counts its tmux clients. The run: one task printing a line every 10 ms (${lines} lines) and ${shorts} tasks of \`sleep 0.6\`, --max-parallel 2; each finished run: two tasks. Latency: a status file's appearance (fs.watch in the feed's process) to the first view with that state.`,
  );
  for (const n of sizes) {
    const r = await reportCost(n, reps);
    rows.push(row(`views: report.html ${n} tasks: write execution_report.json`, r.json, "ms"));
    rows.push(
      row(`views: report.html ${n} tasks: render + write report.html (vs JSON)`, r.html, "ms", {
        baseline: r.json,
      }),
    );
  }
  notes.push(
    `views: report.html from a synthetic ledger (4 events per task) and report of N tasks in waves of 50; median of ${reps} writes each, the JSON report with writeReport (atomic), the page with writeReportHtml (reads the ledger, builds the timeline, renders, writes atomically).`,
  );
  return { name: "views", rows, notes };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  // Not a top-level await: run.js imports this module, which must have finished loading by then.
  void import("./run.js").then(({ main }) => main(["views", ...process.argv.slice(2)]));
}
