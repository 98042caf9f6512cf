// Shared parts of the reliability campaigns (test/reliability/*.mjs): arguments and seeds, a
// private sandbox per campaign (TMPDIR, run registry, tmux socket), the built CLI as a child
// process, leftover checks, and the result every campaign prints and returns. Plain Node ESM so
// that a campaign runs as `node test/reliability/<name>.mjs` after `npm run build`.
import { execFileSync, spawn, spawnSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..", "..");
export const BIN = join(ROOT, "bin", "termorch.js");
/** The CLI with `$TERMORCH_FAULT` injected (test/fixtures/cli-with-fault.mjs); the real one ignores it. */
export const FAULTY_BIN = join(ROOT, "test", "fixtures", "cli-with-fault.mjs");
export const UID = process.getuid?.() ?? 0;

/**
 * `node <campaign>.mjs [--smoke | --long] [--seed N] [--trials N] [--only K] [--json FILE]`.
 * `--smoke` is the short version CI runs; `--long` (the default) the one RELIABILITY.md records.
 * Without `--seed` a random one is drawn and printed, so any failure can be replayed with it;
 * `--only K` replays the single trial K of that seed.
 */
export function parseArgs(argv = process.argv.slice(2)) {
  const opts = { mode: "long", seed: null, trials: null, only: null, json: null, extra: {} };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === "--smoke") opts.mode = "smoke";
    else if (a === "--long") opts.mode = "long";
    else if (a === "--seed" || a === "--trials" || a === "--only") {
      const v = Number(argv[++i]);
      if (!Number.isSafeInteger(v) || v < 0) throw new UsageError(`${a} needs a whole number ≥ 0`);
      opts[a.slice(2)] = v;
    } else if (a === "--json") opts.json = argv[++i];
    else if (a.startsWith("--")) opts.extra[a.slice(2)] = argv[i + 1]?.startsWith("--") ? true : argv[++i];
    else throw new UsageError(`unexpected argument "${a}"`);
  }
  if (opts.seed === null) opts.seed = randomBytes(4).readUInt32BE(0);
  return opts;
}

export class UsageError extends Error {}

/** mulberry32: a small, fast PRNG whose whole state is the seed, so a trial replays exactly. */
export function prng(seed) {
  let a = seed >>> 0;
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  return {
    next,
    int: (lo, hi) => lo + Math.floor(next() * (hi - lo + 1)),
    pick: (xs) => xs[Math.floor(next() * xs.length)],
  };
}

/** The seed of trial `k` of a campaign run with `seed`: independent of the other trials. */
export function trialSeed(seed, k) {
  return (Math.imul(seed ^ 0x9e3779b9, 2654435761) + Math.imul(k + 1, 0x85ebca6b)) >>> 0;
}

/**
 * A private world for one campaign: its own TMPDIR (termorch's per-user folder, worktrees, pool,
 * locks), run registry and tmux socket, so it never sees nor touches the user's runs or server.
 * `dispose()` kills only that socket's server and removes the folder.
 */
export function sandbox(tag) {
  const dir = mkdtempSync(join(tmpdir(), `termorch-rel-${tag}-`));
  const tmp = join(dir, "tmp");
  mkdirSync(tmp);
  const socket = `termorch-rel-${tag}-${process.pid}-${randomBytes(3).toString("hex")}`;
  const env = {
    ...process.env,
    TMUX: "",
    TERMORCH_CONFIG: "",
    TERMORCH_TMUX_SOCKET: socket,
    TERMORCH_REGISTRY: join(dir, "registry"),
    TMPDIR: tmp,
  };
  delete env.TERMORCH_FAULT;
  const box = {
    dir,
    tmp,
    socket,
    env,
    /** termorch's per-user folder inside this sandbox. */
    userDir: join(tmp, `termorch-${UID}`),
    sessions: () => tmuxSessions(socket),
    killServer: () => killServer(socket),
    dispose() {
      killServer(socket);
      rmSync(dir, { recursive: true, force: true });
    },
  };
  disposers.add(box);
  return box;
}

const disposers = new Set();
let exiting = false;
function disposeAll() {
  if (exiting) return;
  exiting = true;
  for (const b of disposers) {
    try {
      b.dispose();
    } catch {}
  }
}
process.once("exit", disposeAll);
for (const sig of ["SIGINT", "SIGTERM"])
  process.once(sig, () => {
    disposeAll();
    process.exit(130);
  });

export function killServer(socket) {
  if (!socket.startsWith("termorch-rel-")) throw new Error(`refusing to kill tmux socket ${socket}`);
  spawnSync("tmux", ["-L", socket, "kill-server"], { stdio: "ignore", env: { ...process.env, TMUX: "" } });
  rmSync(join(process.env.TMUX_TMPDIR || "/tmp", `tmux-${UID}`, socket), { force: true });
}

export function tmuxSessions(socket) {
  const r = spawnSync("tmux", ["-L", socket, "list-sessions", "-F", "#{session_name}"], {
    encoding: "utf8",
    env: { ...process.env, TMUX: "" },
  });
  return r.status === 0 ? r.stdout.split("\n").filter(Boolean) : [];
}

/** The pid of the tmux server on `socket`, or null. */
export function serverPid(socket) {
  const r = spawnSync("tmux", ["-L", socket, "display-message", "-p", "#{pid}"], {
    encoding: "utf8",
    env: { ...process.env, TMUX: "" },
  });
  const pid = Number(r.stdout.trim());
  return r.status === 0 && pid > 0 ? pid : null;
}

export function git(repo, ...args) {
  return execFileSync("git", ["-C", repo, ...args], { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });
}

/** A git repository `<dir>/repo` with one commit on `main` (README.md, ctx/task.md). */
export function makeRepo(dir, name = "repo") {
  const repo = join(dir, name);
  mkdirSync(join(repo, "ctx"), { recursive: true });
  writeFileSync(join(repo, "README.md"), "hello\n");
  writeFileSync(join(repo, "ctx", "task.md"), "# do the thing\n");
  git(repo, "init", "-q", "-b", "main");
  git(repo, "add", "-A");
  git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "init");
  return repo;
}

/**
 * Starts the built CLI (or, with `fault`, the fault-injecting one) in `box`. Resolves with
 * {exitCode, signal, stdout, stderr, pid}; `child` is there for a caller that kills it.
 */
export function termorch(box, args, { cwd = ROOT, fault = null, env = {}, timeoutMs = 120_000, stdin } = {}) {
  const entry = fault ? FAULTY_BIN : BIN;
  const child = spawn(process.execPath, [entry, ...args], {
    cwd,
    env: { ...box.env, ...env, ...(fault ? { TERMORCH_FAULT: fault } : {}) },
    stdio: [stdin === undefined ? "ignore" : "pipe", "pipe", "pipe"],
  });
  if (stdin !== undefined) child.stdin.end(stdin);
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (d) => {
    stdout += d;
  });
  child.stderr.on("data", (d) => {
    stderr += d;
  });
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    child.kill("SIGKILL");
  }, timeoutMs);
  const done = new Promise((resolveDone) => {
    child.on("close", (code, signal) => {
      clearTimeout(timer);
      resolveDone({ exitCode: code, signal, stdout, stderr, pid: child.pid, timedOut });
    });
  });
  done.child = child;
  return done;
}

/** Polls `check` until it returns a truthy value or `timeoutMs` passes (then throws `what`). */
export async function waitFor(check, what, timeoutMs = 30_000, everyMs = 20) {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const v = await check();
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}

/**
 * What termorch left behind in `repo` and `box`: tmux sessions, linked worktrees outside the warm
 * pool, `termorch/*` branches, and live processes whose command line or working folder lies in
 * the sandbox (agents, supervisors, gates).
 */
export function leftovers(box, repo) {
  const pool = join(box.userDir, "pool");
  const out = { sessions: box.sessions(), worktrees: [], branches: [], processes: processesUnder(box.dir) };
  if (repo && existsSync(join(repo, ".git"))) {
    out.worktrees = git(repo, "worktree", "list", "--porcelain")
      .split("\n")
      .filter((l) => l.startsWith("worktree "))
      .map((l) => l.slice(9))
      .slice(1)
      .filter((p) => !p.startsWith(`${pool}/`));
    out.branches = git(repo, "for-each-ref", "--format=%(refname)", "refs/heads/termorch/")
      .split("\n")
      .filter(Boolean);
  }
  return out;
}

/** Live processes (not this one) whose argv or cwd mentions `dir`. */
export function processesUnder(dir) {
  const found = [];
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name) || Number(name) === process.pid) continue;
    try {
      const cmd = readFileSync(`/proc/${name}/cmdline`, "utf8").replaceAll("\0", " ").trim();
      let cwd = "";
      try {
        cwd = execFileSync("readlink", [`/proc/${name}/cwd`], { encoding: "utf8" }).trim();
      } catch {}
      const stat = readFileSync(`/proc/${name}/stat`, "utf8");
      if (stat.slice(stat.lastIndexOf(")") + 2).startsWith("Z")) continue;
      if (cmd.includes(dir) || cwd.startsWith(dir)) found.push(`${name} ${cmd.slice(0, 160)}`);
    } catch {}
  }
  return found;
}

/**
 * The campaign's result: prints the figures and, with `--json FILE`, writes them. `mustBeZero`
 * names the figures that fail the campaign when not 0. Returns the process exit code (0/1).
 */
export function finish(opts, { campaign, trials, figures, mustBeZero, failures = [], notes = [], started }) {
  const bad = mustBeZero.filter((k) => figures[k] !== 0);
  const result = {
    campaign,
    mode: opts.mode,
    seed: opts.seed,
    trials,
    duration_s: Math.round((Date.now() - started) / 100) / 10,
    figures,
    must_be_zero: mustBeZero,
    failed: bad,
    failures: failures.slice(0, 50),
    notes,
  };
  console.log(`\n${campaign} (${opts.mode}, seed ${opts.seed}, ${trials} trials, ${result.duration_s} s)`);
  for (const [k, v] of Object.entries(figures)) {
    const mark = mustBeZero.includes(k) ? (v === 0 ? "  ok" : "  FAIL (must be 0)") : "";
    console.log(`  ${k}: ${typeof v === "object" ? JSON.stringify(v) : v}${mark}`);
  }
  for (const f of failures.slice(0, 20))
    console.log(`  failure: ${typeof f === "string" ? f : JSON.stringify(f)}`);
  if (bad.length)
    console.log(
      `  replay: node test/reliability/${campaign}.mjs --${opts.mode} --seed ${opts.seed} (add --only K for trial K)`,
    );
  if (opts.json) writeFileSync(opts.json, `${JSON.stringify(result, null, 2)}\n`);
  return bad.length ? 1 : 0;
}

/** Runs a campaign's `main(opts)` as the script's entry point, with usage errors as exit 2. */
export async function runAsScript(main) {
  let opts;
  try {
    opts = parseArgs();
  } catch (e) {
    if (!(e instanceof UsageError)) throw e;
    console.error(e.message);
    process.exitCode = 2;
    return;
  }
  console.log(`seed ${opts.seed} (${opts.mode})`);
  process.exitCode = await main(opts);
}
