// 3. Log throughput: an agent writing 200 MB (realistic log lines, from the page cache with
// `cat`: the fastest producer there is, so the worst case) to stdout — and a variant split
// 100 MB / 100 MB across stdout and stderr — under termorch vs the same command redirecting to
// files directly. termorch always applies its 10 built-in token patterns; a second run adds a
// secret literal and a configured pattern; the tmux adapter run directly with no pattern shows
// the cost of the pipeline alone. Bytes lost must be 0 (sizes and SHA-256 compared).
import { createHash } from "node:crypto";
import { createReadStream, mkdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import {
  killServer,
  makeWorkspace,
  median,
  ROOT,
  removeTemp,
  row,
  tempDir,
  termorchRun,
  timed,
  trackSocket,
  uniqueSocket,
  writeAssignments,
} from "./lib.mjs";

const MB = 1024 * 1024;

/** Writes `bytes` of log-like lines (timestamps, levels, ids, paths: no secrets). */
function writeLogFile(path, bytes) {
  const levels = ["INFO", "DEBUG", "WARN", "ERROR"];
  let seed = 1;
  const rnd = () => {
    seed = (seed * 1103515245 + 12345) % 2 ** 31;
    return seed >>> 8;
  };
  const lines = [];
  let size = 0;
  for (let i = 0; size < 256 * 1024; i++) {
    const l = `2026-11-22T12:${String(i % 60).padStart(2, "0")}:${String(i % 60).padStart(2, "0")}.${String(i % 1000).padStart(3, "0")}Z ${levels[i % 4]} worker-${i % 8} processed request id=${rnd().toString(16).padStart(8, "0")} path=/api/v1/items/${i} status=${200 + (i % 3) * 100} took=${i % 500}ms user=alice@example.com\n`;
    lines.push(l);
    size += l.length;
  }
  const block = Buffer.from(lines.join(""));
  const reps = Math.ceil(bytes / block.length);
  const out = Buffer.alloc(reps * block.length);
  for (let i = 0; i < reps; i++) block.copy(out, i * block.length);
  writeFileSync(path, out.subarray(0, bytes));
}

async function sha256(path) {
  const h = createHash("sha256");
  for await (const chunk of createReadStream(path)) h.update(chunk);
  return h.digest("hex");
}

async function same(a, b) {
  const sa = statSync(a).size;
  const sb = statSync(b).size;
  return { lost: sb - sa, equal: sa === sb && (await sha256(a)) === (await sha256(b)) };
}

async function direct(dir, split) {
  const out = join(dir, "direct.out");
  const err = join(dir, "direct.err");
  const cmd = split
    ? `cat "${join(dir, "half1.log")}" > "${out}" & cat "${join(dir, "half2.log")}" > "${err}"; wait`
    : `cat "${join(dir, "full.log")}" > "${out}"`;
  const r = await timed("sh", ["-c", cmd]);
  return r.wall;
}

/** One `termorch run` of one task; returns the task's duration (launch → status success) and the logs. */
async function viaTermorch(dir, split, extra) {
  const cmd = split
    ? ["sh", "-c", `cat "${join(dir, "half1.log")}" & cat "${join(dir, "half2.log")}" >&2; wait`]
    : ["cat", join(dir, "full.log")];
  const run = join(dir, extra ? "run-more" : "run-builtin");
  rmSync(run, { recursive: true, force: true });
  mkdirSync(run);
  makeWorkspace(run);
  const env = { resource_limits: { max_log_bytes: 1024 * MB } };
  if (extra) env.env_vars = ["BENCH_API_KEY=s3cr3t-value-1234"];
  const file = writeAssignments(run, "logs", [{ id: "log", command: cmd }], env);
  const envVars = {};
  if (extra) {
    const conf = join(dir, "config.json");
    writeFileSync(conf, JSON.stringify({ redact: ["(?i)password=\\S+"] }));
    envVars.TERMORCH_CONFIG = conf;
  }
  await termorchRun(file, uniqueSocket("logs"), [], envVars);
  const report = JSON.parse(readFileSync(join(run, "execution_report.json"), "utf8"));
  const t = report.tasks[0];
  return { wall: t.duration_ms / 1000, out: join(run, t.logs.stdout), err: join(run, t.logs.stderr) };
}

/** The tmux adapter alone, with no redaction pattern at all (termorch always has its built-ins). */
async function viaAdapter(dir, split) {
  const { TmuxServer } = await import(join(ROOT, "dist", "tmux", "server.js"));
  const { launch } = await import(join(ROOT, "dist", "tmux", "session.js"));
  const socket = trackSocket(uniqueSocket("logs-adapter"));
  const server = new TmuxServer({ socket });
  const attempt = join(dir, `adapter-${Date.now()}`);
  const argv = split
    ? ["sh", "-c", `cat "${join(dir, "half1.log")}" & cat "${join(dir, "half2.log")}" >&2; wait`]
    : ["cat", join(dir, "full.log")];
  // The server and its control client are started first: a run reuses them for every task.
  await server.connect();
  const t0 = performance.now();
  const task = await launch(server, {
    runId: "bench",
    taskId: "log",
    attempt: 1,
    session: `bench-log-${Date.now()}`,
    argv,
    env: { PATH: process.env.PATH ?? "/usr/bin:/bin" },
    cwd: dir,
    tty: false,
    stdoutLog: `${attempt}.out`,
    stderrLog: `${attempt}.err`,
    attemptDir: attempt,
    redact: [],
    maxLogBytes: 0,
  });
  const exit = await task.exited;
  const wall = (performance.now() - t0) / 1000;
  await server.kill();
  killServer(socket);
  if (exit.exit_code !== 0) throw new Error(`adapter run failed: ${JSON.stringify(exit)}`);
  return { wall, out: `${attempt}.out`, err: `${attempt}.err` };
}

export async function run(opts = {}) {
  const reps = opts.quick ? 1 : 3;
  const dir = tempDir("logs");
  const size = 200 * MB;
  writeLogFile(join(dir, "full.log"), size);
  writeLogFile(join(dir, "half1.log"), size / 2);
  writeLogFile(join(dir, "half2.log"), size / 2);
  const rows = [];
  const target = { value: 1.5, text: "≤ 1.5× direct" };
  let lostTotal = 0;
  let allEqual = true;
  for (const split of [false, true]) {
    const label = split ? "200 MB split stdout+stderr" : "200 MB stdout";
    const d = [];
    const plain = [];
    const builtIn = [];
    const more = [];
    for (let i = 0; i < reps; i++) {
      d.push(await direct(dir, split));
      const checks = [];
      const a = await viaAdapter(dir, split);
      plain.push(a.wall);
      checks.push(a);
      const t = await viaTermorch(dir, split, false);
      builtIn.push(t.wall);
      checks.push(t);
      const m = await viaTermorch(dir, split, true);
      more.push(m.wall);
      checks.push(m);
      for (const c of checks) {
        const pairs = split
          ? [
              [join(dir, "half1.log"), c.out],
              [join(dir, "half2.log"), c.err],
            ]
          : [[join(dir, "full.log"), c.out]];
        for (const [src, log] of pairs) {
          const s = await same(src, log);
          lostTotal += Math.abs(s.lost);
          allEqual &&= s.equal;
        }
      }
    }
    const D = median(d);
    rows.push(row(`logs ${label}: direct to files (cat > file)`, D, "s"));
    rows.push(row(`logs ${label}: tmux adapter, no pattern`, median(plain), "s", { baseline: D, target }));
    rows.push(
      row(`logs ${label}: termorch, 10 built-in patterns`, median(builtIn), "s", { baseline: D, target }),
    );
    rows.push(
      row(`logs ${label}: termorch, built-ins + secret + 1 configured`, median(more), "s", {
        baseline: D,
        target,
      }),
    );
  }
  rows.push(
    row("logs: bytes lost (all runs, size and SHA-256 compared)", lostTotal, "B", {
      met: lostTotal === 0 && allEqual,
      target: { value: 0, text: "0, checksums equal" },
    }),
  );
  removeTemp(dir);
  return {
    name: "logs",
    rows,
    notes: [
      `logs: median of ${reps}; termorch figures are the task's duration in the report (launch → status success); the adapter figure is launch() → exit record; direct is sh -c 'cat … > file' from spawn to exit. The producer is cat from the page cache (the worst case: it costs nothing itself).`,
    ],
  };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const { main } = await import("./run.js");
  await main(["logs", ...process.argv.slice(2)]);
}
