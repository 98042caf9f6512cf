// Shared helpers of the benchmarks: private tmux sockets, CPU accounting of whole process
// trees, temp workspaces, assignments files, and the result table. Plain Node ESM.
import { execFileSync, spawn, spawnSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { cpus, tmpdir, totalmem } from "node:os";
import { dirname, join, resolve } from "node:path";
import { performance } from "node:perf_hooks";
import { fileURLToPath } from "node:url";

export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..");
export const BIN = join(ROOT, "bin", "termorch.js");
const CLK_TCK = Number(spawnSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).stdout.trim()) || 100;

/** Environment for every tmux client the benchmarks start: never the caller's server. */
export const TMUX_ENV = { ...process.env, TMUX: "", TERMORCH_CONFIG: "" };

/** A socket name nothing else uses; only servers on such sockets are ever killed. */
export function uniqueSocket(tag) {
  return `termorch-bench-${tag}-${process.pid}-${randomBytes(3).toString("hex")}`;
}

const sockets = new Set();
const runIds = new Map();

/** The run id written into an assignments file by {@link writeAssignments}. */
export function runIdOf(file) {
  return runIds.get(file);
}
const temps = new Set();

/** Kills the server on one of our own sockets and removes its socket file. */
export function killServer(socket) {
  if (!socket.startsWith("termorch-bench-")) throw new Error(`refusing to kill tmux socket ${socket}`);
  spawnSync("tmux", ["-L", socket, "kill-server"], { stdio: "ignore", env: TMUX_ENV });
  const path = join(process.env.TMUX_TMPDIR || "/tmp", `tmux-${process.getuid()}`, socket);
  rmSync(path, { force: true });
  sockets.delete(socket);
}

/** Registers a socket for cleanup on exit (and on Ctrl-C). */
export function trackSocket(socket) {
  sockets.add(socket);
  return socket;
}

export function tempDir(tag) {
  const dir = mkdtempSync(join(tmpdir(), `termorch-bench-${tag}-`));
  temps.add(dir);
  return dir;
}

export function removeTemp(dir) {
  rmSync(dir, { recursive: true, force: true });
  temps.delete(dir);
}

/** Removes everything the benchmarks created; registered once by run.js. */
export function cleanupAll() {
  for (const s of [...sockets]) killServer(s);
  for (const d of [...temps]) removeTemp(d);
}

/** Pid of the server on a socket, or null. */
export function serverPid(socket) {
  const r = spawnSync("tmux", ["-L", socket, "display-message", "-p", "#{pid}"], {
    encoding: "utf8",
    env: TMUX_ENV,
  });
  const pid = Number(r.stdout.trim());
  return r.status === 0 && pid > 0 ? pid : null;
}

/** CPU seconds of a process and its reaped children (utime+stime+cutime+cstime). */
export function processCpu(pid) {
  const f = statFields(pid);
  // Fields 14-17 of stat(5); f[0] is field 3.
  return (Number(f[11]) + Number(f[12]) + Number(f[13]) + Number(f[14])) / CLK_TCK;
}

/** CPU seconds of a process itself (utime+stime), without its reaped children. */
export function processSelfCpu(pid) {
  const f = statFields(pid);
  return (Number(f[11]) + Number(f[12])) / CLK_TCK;
}

function statFields(pid) {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  return stat.slice(stat.lastIndexOf(")") + 2).split(" ");
}

/**
 * Starts the server of `socket` with one idle session, so its CPU can be read before it is
 * killed (termorch lets an idle server exit at the end of a run). `conf` as for `tmux -f`.
 */
export function holdServer(socket, conf) {
  trackSocket(socket);
  execFileSync(
    "tmux",
    ["-L", socket, "-f", conf, "new-session", "-d", "-s", "bench-hold", "sleep", "2147483647"],
    { env: TMUX_ENV },
  );
  const pid = serverPid(socket);
  if (!pid) throw new Error(`tmux server on ${socket} did not start`);
  return { pid, cpu0: processCpu(pid), self0: processSelfCpu(pid) };
}

/**
 * CPU of a held server since {@link holdServer}: its own (`server`) and that of the processes it
 * reaped, i.e. everything that ran in its panes (`panes`).
 */
export function serverCpu(hold) {
  const all = processCpu(hold.pid) - hold.cpu0;
  const server = processSelfCpu(hold.pid) - hold.self0;
  return { server, panes: all - server };
}

/**
 * Runs a command to its end and measures wall time and the CPU (user+sys) of its whole
 * process tree as far as it is reaped below it (bash's `times`, children line).
 */
export async function timed(cmd, args, opts = {}) {
  const script = '"$@"; rc=$?; times >&3; exit $rc';
  const t0 = performance.now();
  const child = spawn("bash", ["-c", script, "bench", cmd, ...args], {
    cwd: opts.cwd,
    env: opts.env ?? TMUX_ENV,
    stdio: ["ignore", opts.stdout ?? "ignore", opts.stderr ?? "pipe", "pipe"],
  });
  let times = "";
  let stderr = "";
  child.stdio[3].on("data", (d) => {
    times += d;
  });
  child.stderr?.on("data", (d) => {
    stderr += d;
  });
  const code = await new Promise((res) => child.on("close", (c) => res(c)));
  const wall = (performance.now() - t0) / 1000;
  const lines = times.trim().split("\n");
  const [u, s] = (lines[1] ?? "0m0s 0m0s").split(/\s+/).map(parseBashTime);
  return { code, wall, cpu: u + s, stderr };
}

function parseBashTime(text) {
  const m = /^(\d+)m([\d.]+)s$/.exec(text ?? "");
  return m ? Number(m[1]) * 60 + Number(m[2]) : 0;
}

/** A workspace folder with one context file; a git repository with one commit when asked. */
export function makeWorkspace(dir, { git = false } = {}) {
  const ws = join(dir, "ws");
  mkdirSync(join(ws, "ctx"), { recursive: true });
  writeFileSync(join(ws, "ctx", "task.md"), "# bench task\n");
  writeFileSync(join(ws, "README.md"), "bench\n");
  if (git) {
    const g = (...a) => execFileSync("git", ["-C", ws, ...a], { stdio: "ignore" });
    g("init", "-q", "-b", "main");
    g("add", "-A");
    g("-c", "user.name=bench", "-c", "user.email=bench@example.invalid", "commit", "-q", "-m", "init");
  }
  return ws;
}

/** A run id of its own per run, so worktrees a run keeps can be found and removed. */
export function uniqueRunId(tag) {
  return `bench-${tag}-${randomBytes(3).toString("hex")}`;
}

/** Writes an assignments file; each task is `{ id, command, dependencies? }`. Returns its path. */
export function writeAssignments(dir, tag, tasks, environment = {}) {
  const runId = uniqueRunId(tag);
  runIds.set(join(dir, "assignments.json"), runId);
  const body = {
    run_id: runId,
    tasks: tasks.map((t) => ({
      agent: "bench",
      context_path: "ctx/task.md",
      dependencies: [],
      // Most bench agents are trivial commands: whether they changed anything is not measured here.
      expect_changes: false,
      ...t,
    })),
    environment: { workspace_dir: "ws", ...environment },
  };
  const file = join(dir, "assignments.json");
  writeFileSync(file, JSON.stringify(body));
  return file;
}

/** `termorch run` on a file, its tmux server held so the server's CPU can be counted. */
export async function termorchRun(file, socket, extraArgs = [], env = {}, nodeArgs = []) {
  const hold = holdServer(socket, await termorchConf());
  const r = await timed(process.execPath, [...nodeArgs, BIN, "run", file, ...extraArgs], {
    env: { ...TMUX_ENV, TERMORCH_TMUX_SOCKET: socket, ...env },
  });
  const split = serverCpu(hold);
  const server = split.server + split.panes;
  killServer(socket);
  // Worktrees of tasks a run keeps for inspection (a failed merge) live outside the temp folder.
  const runId = runIds.get(file);
  if (runId)
    rmSync(join(tmpdir(), `termorch-${process.getuid()}`, "worktrees", runId), {
      recursive: true,
      force: true,
    });
  if (r.code !== 0) throw new Error(`termorch run exited ${r.code}: ${r.stderr.slice(-2000)}`);
  // clientCpu: termorch's process tree (Node and the tmux clients it spawns); serverCpu: the tmux
  // server with its panes, split into the server itself and the panes (supervisors and agents).
  return {
    wall: r.wall,
    cpu: r.cpu + server,
    clientCpu: r.cpu,
    serverCpu: server,
    serverSelfCpu: split.server,
    paneCpu: split.panes,
  };
}

let confCache = null;
/** The config file termorch's TmuxServer writes (the hold session must start the server with it). */
export async function termorchConf() {
  if (!confCache) {
    const { TmuxServer } = await import(join(ROOT, "dist", "tmux", "server.js"));
    const s = new TmuxServer({ socket: "termorch-bench-conf" });
    confCache = await s.config();
  }
  return confCache;
}

export function median(xs) {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}

export function percentile(xs, p) {
  const s = [...xs].sort((a, b) => a - b);
  const i = Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1));
  return s[i];
}

/** The machine, for the report header. */
export function machine() {
  const v = (cmd, args, re) => {
    try {
      const out = execFileSync(cmd, args, { encoding: "utf8" });
      return (re.exec(out)?.[1] ?? out).trim();
    } catch {
      return "absent";
    }
  };
  return {
    cores: cpus().length,
    cpu: cpus()[0]?.model ?? "?",
    memory_gib: Math.round(totalmem() / 2 ** 30),
    tmux: v("tmux", ["-V"], /tmux (\S+)/),
    git: v("git", ["--version"], /git version (\S+)/),
    node: process.version,
    perl: v("perl", ["-e", "print $^V"], /(.*)/),
    os: existsSync("/etc/debian_version")
      ? `Debian ${readFileSync("/etc/debian_version", "utf8").trim()}`
      : process.platform,
    date: new Date().toISOString(),
  };
}

/**
 * A result row: name, figure, baseline, ratio, target, met. `ratio` and `met` are computed
 * when a baseline and a target are given. `check`: the target is not one on a cost but whether
 * the benchmark's own work came out right (bytes intact, the conflict found, every task
 * succeeded); the figures beside a failed check mean nothing, so the smoke (test/bench/) fails on it.
 */
export function row(name, figure, unit, opts = {}) {
  const {
    baseline = null,
    target = null,
    lowerIsBetter = true,
    ratio = null,
    met = null,
    check = false,
  } = opts;
  const r = ratio ?? (baseline ? figure / baseline : null);
  let ok = met;
  if (ok === null && target !== null) {
    const v = r ?? figure;
    ok = lowerIsBetter ? v <= target.value : v >= target.value;
  }
  return {
    name,
    figure,
    unit,
    baseline,
    ratio: r,
    target: target?.text ?? null,
    met: ok,
    ...(check ? { check } : {}),
  };
}

function fmt(v, unit) {
  if (v === null || v === undefined) return "";
  if (typeof v === "string") return v;
  const digits = Math.abs(v) >= 100 ? 0 : Math.abs(v) >= 10 ? 1 : Math.abs(v) >= 1 ? 2 : 3;
  return `${v.toFixed(digits)}${unit ? ` ${unit}` : ""}`;
}

/** Prints rows as a Markdown table (readable on a terminal, pasteable into BENCHMARKS.md). */
export function table(rows) {
  const head = ["benchmark", "figure", "baseline", "ratio", "target", "met?"];
  const body = rows.map((r) => [
    r.name,
    fmt(r.figure, r.unit),
    fmt(r.baseline, r.unit),
    r.ratio === null ? "" : `${r.ratio.toFixed(2)}×`,
    r.target ?? "",
    r.met === null ? "" : r.met ? "yes" : "NO",
  ]);
  const width = head.map((h, i) => Math.max(h.length, ...body.map((b) => b[i].length)));
  const line = (cells) => `| ${cells.map((c, i) => c.padEnd(width[i])).join(" | ")} |`;
  return [line(head), `|${width.map((w) => "-".repeat(w + 2)).join("|")}|`, ...body.map(line)].join("\n");
}
