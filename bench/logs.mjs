// 3. Log throughput: an agent writing 200 MB (realistic log lines, from the page cache) to
// stdout — and a variant split 100 MB / 100 MB across stdout and stderr — under termorch vs the
// same command redirecting to files directly. Two producers: `cat` (coreutils 9 copies a file
// to a file inside the kernel with copy_file_range, so its direct baseline does no
// user-space copy at all: the worst case) and `dd bs=256K` (read and write, as an agent that
// prints does). termorch always applies its 10 built-in token patterns; a second run adds a
// secret literal and a configured pattern; the tmux adapter run directly with no pattern shows
// the cost of the pipeline alone. Bytes lost must be 0 (sizes and SHA-256 compared).
// Then, to tell which part costs what, CPU rather than wall: the pane supervisor alone (outside
// tmux, its pane output to /dev/null, dd as the agent) with 0, 1, 5 and 10 of the built-in
// patterns and with a secret and a configured pattern added, against dd writing the file itself.
import { spawnSync } from "node:child_process";
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

/** Flushes dirty pages, so no measurement pays for an earlier one's writeback. */
function settle() {
  spawnSync("sync");
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

/** The agent's argv for one producer: the whole file to stdout, or the halves to stdout and stderr. */
function producer(kind, dir, split) {
  const one = (f) => (kind === "dd" ? `dd if="${f}" bs=256K status=none` : `cat "${f}"`);
  if (!split)
    return kind === "dd"
      ? ["dd", `if=${join(dir, "full.log")}`, "bs=256K", "status=none"]
      : ["cat", join(dir, "full.log")];
  return ["sh", "-c", `${one(join(dir, "half1.log"))} & ${one(join(dir, "half2.log"))} >&2; wait`];
}

async function direct(dir, split, kind) {
  const out = join(dir, "direct.out");
  const err = join(dir, "direct.err");
  rmSync(out, { force: true });
  rmSync(err, { force: true });
  const one = (f) => (kind === "dd" ? `dd if="${f}" bs=256K status=none` : `cat "${f}"`);
  const cmd = split
    ? `${one(join(dir, "half1.log"))} > "${out}" & ${one(join(dir, "half2.log"))} > "${err}"; wait`
    : `${one(join(dir, "full.log"))} > "${out}"`;
  const r = await timed("sh", ["-c", cmd]);
  return r.wall;
}

/** One `termorch run` of one task; returns the task's duration (launch → status success) and the logs. */
async function viaTermorch(dir, split, extra, kind) {
  const cmd = producer(kind, dir, split);
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

const enc = (v) => v.replace(/[%\n\r\0]/g, (c) => `%${c.charCodeAt(0).toString(16).padStart(2, "0")}`);

/**
 * The supervisor alone on a launch file of its contract (tty=0, no cgroup), outside tmux: CPU of
 * the supervisor and its agent (dd of the 200 MB file), and the log it wrote.
 */
async function supervisorAlone(dir, patterns) {
  const { findPerl } = await import(join(ROOT, "dist", "fs", "executable.js"));
  const attempt = join(dir, "supervisor-alone");
  rmSync(attempt, { recursive: true, force: true });
  mkdirSync(attempt, { mode: 0o700 });
  const lines = [
    "version=2",
    `stdout_log=${enc(join(attempt, "out.log"))}`,
    `stderr_log=${enc(join(attempt, "err.log"))}`,
    "tty=0",
    "max_log_bytes=0",
    "token=0123456789abcdef",
    `cwd=${enc(dir)}`,
    "cgroup=0",
    ...producer("dd", dir, false).map((a) => `arg=${enc(a)}`),
    `env=${enc(`PATH=${process.env.PATH ?? "/usr/bin:/bin"}`)}`,
    ...patterns.map((p) => `redact=${enc(p)}`),
  ];
  writeFileSync(join(attempt, "launch"), `${lines.join("\n")}\n`, { mode: 0o600 });
  const r = await timed(findPerl(), [join(ROOT, "dist", "tmux", "supervisor.pl"), attempt]);
  if (r.code !== 0) throw new Error(`supervisor alone exited ${r.code}: ${r.stderr}`);
  return { cpu: r.cpu, out: join(attempt, "out.log"), err: join(attempt, "err.log") };
}

/** The tmux adapter alone, with no redaction pattern at all (termorch always has its built-ins). */
async function viaAdapter(dir, split, kind) {
  const { TmuxServer } = await import(join(ROOT, "dist", "tmux", "server.js"));
  const { TmuxRunner } = await import(join(ROOT, "dist", "tmux", "runner.js"));
  const socket = trackSocket(uniqueSocket("logs-adapter"));
  const server = new TmuxServer({ socket });
  const attempt = join(dir, `adapter-${Date.now()}`);
  const argv = producer(kind, dir, split);
  const t0 = performance.now();
  const task = await new TmuxRunner(server).launch({
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
  const reps = opts.smoke || opts.quick ? 1 : 3;
  const dir = tempDir("logs");
  const mb = opts.smoke ? 4 : 200;
  const size = mb * MB;
  writeLogFile(join(dir, "full.log"), size);
  writeLogFile(join(dir, "half1.log"), size / 2);
  writeLogFile(join(dir, "half2.log"), size / 2);
  const rows = [];
  const target = { value: 1.5, text: "≤ 1.5× direct" };
  let lostTotal = 0;
  let allEqual = true;
  const variants = [
    { split: false, kind: "cat" },
    { split: false, kind: "dd" },
    { split: true, kind: "cat" },
    { split: true, kind: "dd" },
  ];
  for (const { split, kind } of variants) {
    const label = `${mb} MB ${split ? "split stdout+stderr" : "stdout"}, ${kind}`;
    const d = [];
    const plain = [];
    const builtIn = [];
    const more = [];
    // Checks a run's logs against the sources, then drops them: 200 MB files left dirty in the
    // page cache are written back during the next measurement and slow it down at random.
    const check = async (c) => {
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
      for (const f of [c.out, c.err]) rmSync(f, { force: true });
      settle();
    };
    for (let i = 0; i < reps; i++) {
      settle();
      d.push(await direct(dir, split, kind));
      settle();
      const a = await viaAdapter(dir, split, kind);
      plain.push(a.wall);
      await check(a);
      const t = await viaTermorch(dir, split, false, kind);
      builtIn.push(t.wall);
      await check(t);
      const m = await viaTermorch(dir, split, true, kind);
      more.push(m.wall);
      await check(m);
    }
    const D = median(d);
    rows.push(row(`logs ${label}: direct to files (> file)`, D, "s"));
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
  // Which part costs what (CPU of the whole tree, dd included; median of the repetitions).
  const { TOKEN_PATTERNS } = await import(join(ROOT, "dist", "redact", "redactor.js"));
  const sets = [
    ["no pattern", []],
    ["1 built-in pattern", TOKEN_PATTERNS.slice(0, 1)],
    ["5 built-in patterns", TOKEN_PATTERNS.slice(0, 5)],
    ["10 built-in patterns", TOKEN_PATTERNS],
    ["built-ins + secret + 1 configured", [...TOKEN_PATTERNS, "s3cr3t-value-1234", "(?i)password=\\S+"]],
  ];
  const directCpu = [];
  const aloneCpu = sets.map(() => []);
  for (let i = 0; i < reps; i++) {
    settle();
    rmSync(join(dir, "direct.out"), { force: true });
    const d = await timed("sh", [
      "-c",
      `dd if="${join(dir, "full.log")}" bs=256K status=none > "${join(dir, "direct.out")}"`,
    ]);
    directCpu.push(d.cpu);
    for (const [k, [, patterns]] of sets.entries()) {
      settle();
      const r = await supervisorAlone(dir, patterns);
      aloneCpu[k].push(r.cpu);
      const s = await same(join(dir, "full.log"), r.out);
      lostTotal += Math.abs(s.lost);
      allEqual &&= s.equal;
      rmSync(r.out, { force: true });
    }
  }
  const DC = median(directCpu);
  rows.push(row(`logs ${mb} MB stdout, dd, CPU: direct to a file`, DC, "s"));
  for (const [k, [label]] of sets.entries()) {
    rows.push(
      row(`logs ${mb} MB stdout, dd, CPU: supervisor alone, ${label}`, median(aloneCpu[k]), "s", {
        baseline: DC,
      }),
    );
  }
  rows.push(
    row("logs: bytes lost (all runs, size and SHA-256 compared)", lostTotal, "B", {
      met: lostTotal === 0 && allEqual,
      target: { value: 0, text: "0, checksums equal" },
      check: true,
    }),
  );
  removeTemp(dir);
  return {
    name: "logs",
    rows,
    notes: [
      `logs: median of ${reps}; termorch figures are the task's duration in the report (launch → status success); the adapter figure is launch() → exit record; direct is sh -c '<producer> > file' from spawn to exit. Producers read from the page cache: cat (its direct baseline is an in-kernel copy_file_range, no user-space copy: the worst case) and dd bs=256K (read/write, like an agent that prints). The CPU rows: user+sys of the whole tree (dd included), the supervisor run outside tmux on a launch file (tty=0, no cgroup) with its pane output to /dev/null; the secret is a plain literal, the configured pattern (?i)password=\\S+. Files are under $TMPDIR: on this VM's journal-less ext4, wall times of writes there vary several-fold from hour to hour (BENCHMARKS.md, issue 12).`,
    ],
  };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const { main } = await import("./run.js");
  await main(["logs", ...process.argv.slice(2)]);
}
