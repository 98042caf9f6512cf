// Campaign 2 of issue 13: malformed input, generated with fast-check. Assignments files and configs
// wrong in every way (types, keys incl. __proto__, unicode, control characters and NUL, "..",
// absolute paths, symlinks and loops, cycles up to 10,000 long, 100,000-deep nesting, 1 MB strings,
// encodings, truncations, byte and structural mutations), odd run ids and paths for the operator
// commands, and malformed files dropped in a daemon's inbox. For every input: the documented exit
// code, a message naming the place, no stack trace, no hang, no side effect.
//
// Inputs go through a long-lived child that calls the built CLI's main(argv, io) in-process
// (input-worker.mjs; killed and replaced on a hang), and a seeded sample through the real binary
// to check that both agree. `--seed N` replays a campaign; a failure prints its category's
// fast-check seed and path, and the input fast-check shrank it to.
import { spawn, spawnSync } from "node:child_process";
import {
  chmodSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  realpathSync,
  renameSync,
  rmSync,
  symlinkSync,
  utimesSync,
  writeFileSync,
} from "node:fs";
import { join, resolve } from "node:path";
import fc from "fast-check";
import { CATEGORIES, OPERATOR_COMMANDS, refArb, WS_REL } from "./input-gen.mjs";
import {
  finish,
  git,
  makeRepo,
  ROOT,
  runAsScript,
  sandbox,
  termorch,
  trialSeed,
  UID,
  waitFor,
} from "./lib.mjs";

const WORKER = join(ROOT, "test", "reliability", "input-worker.mjs");
const ENTRY = join(ROOT, "bin", "load-cli.cjs");

/** Inputs per category: the long version makes > 10,000 files and configs. */
const SIZES = {
  long: {
    wrong_type: 800,
    keys: 800,
    strings: 900,
    ids: 900,
    paths: 1000,
    graph: 500,
    deep: 300,
    encoding: 700,
    truncation: 600,
    bytes: 1200,
    structure: 1000,
    config: 1300,
    files: 200,
    operator: 600,
    runEvery: 4,
    validRuns: 60,
    binary: 200,
    daemon: 150,
  },
  smoke: {
    wrong_type: 12,
    keys: 12,
    strings: 12,
    ids: 12,
    paths: 14,
    graph: 10,
    deep: 6,
    encoding: 10,
    truncation: 8,
    bytes: 14,
    structure: 12,
    config: 16,
    files: 14,
    operator: 30,
    runEvery: 3,
    validRuns: 4,
    binary: 20,
    daemon: 8,
  },
};

// biome-ignore lint/suspicious/noControlCharactersInRegex: finding them is the point
const RAW_CONTROL = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/;
const VALIDATE_TIMEOUT_MS = 30_000;
const RUN_TIMEOUT_MS = 120_000;
/** Largest valid run actually launched: a 10,000-task chain is planned, not run. */
const MAX_RUN_TASKS = 12;

/** Lines of a Node stack trace or an error dump: never in termorch's output. */
const STACK =
  /^\s+at .+(:\d+:\d+\)?|\(native\)|<anonymous>\)?)$|^(\w*Error|Error \[\w+\]):|node:internal|\n\s{4}at /m;

async function main(opts) {
  const started = Date.now();
  const size = { ...SIZES[opts.mode] };
  const box = sandbox("input");
  const env = { ...box.env, HOME: join(box.dir, "home") };
  mkdirSync(env.HOME);
  box.env = env;
  const ws = makeWorkspace(box.dir);
  const inDir = join(box.dir, "in", "cur");
  const cfgFile = join(box.dir, "cfg", "ok.json");
  mkdirSync(join(box.dir, "cfg"));
  writeFileSync(
    cfgFile,
    `${JSON.stringify({ agents: { ok: { command: ["true"], expect_changes: false } } })}\n`,
  );

  const figures = {
    inputs: 0,
    by_category: {},
    by_command: {
      validate: 0,
      run: 0,
      run_launched: 0,
      run_not_launched_valid: 0,
      config_flag: 0,
      config_env: 0,
      daemon: 0,
      real_binary: 0,
    },
    validate_exit: {},
    run_exit: {},
    wrong_exit_code: 0,
    no_place_named: 0,
    raw_control_chars: 0,
    stack_traces: 0,
    hangs: 0,
    side_effect_sessions: 0,
    side_effect_branches: 0,
    side_effect_worktrees: 0,
    side_effect_workspace_files: 0,
    side_effect_run_dirs: 0,
    binary_mismatch: 0,
    daemon_unanswered: 0,
    daemon_stopped: 0,
  };
  const failures = [];
  const notes = [];
  const worker = new Worker(env, box.dir);
  await worker.start();

  const ctx = { box, env, ws, inDir, cfgFile, worker, figures, failures, size, opts, validRuns: 0, n: 0 };

  // One finished run kept in the registry, so that the operator commands also meet a real run.
  await keptRun(ctx);

  const categories = Object.keys(CATEGORIES);
  const daemonPool = [];
  for (const [ci, cat] of categories.entries()) {
    const seed = trialSeed(opts.seed, ci) | 0;
    const arb = CATEGORIES[cat];
    let index = -1;
    const firstFailure = { index: null };
    const t0 = Date.now();
    await fc.check(
      fc.asyncProperty(arb, async (input) => {
        index++;
        const problems = await evaluate(ctx, input, { count: true, index, seed, cat });
        if (problems.length && firstFailure.index === null) firstFailure.index = index;
        if (
          !problems.length &&
          daemonPool.length < size.daemon * 4 &&
          ctx.lastValidateCode === 2 &&
          !input.assignments.special
        )
          daemonPool.push(input);
        return true;
      }),
      { seed, numRuns: size[cat] },
    );
    console.log(
      `  ${cat}: ${index + 1} inputs in ${((Date.now() - t0) / 1000).toFixed(1)} s (fast-check seed ${seed})`,
    );
    if (firstFailure.index !== null) await shrink(ctx, cat, arb, seed, firstFailure.index, notes);
    sweep(ctx, `after ${cat}`);
  }

  let t0 = Date.now();
  await operatorCommands(ctx);
  console.log(`  operator commands: ${((Date.now() - t0) / 1000).toFixed(1)} s`);
  sweep(ctx, "after operator commands");
  t0 = Date.now();
  await daemonInbox(ctx, daemonPool);
  console.log(`  daemon: ${figures.by_command.daemon} files in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
  sweep(ctx, "after the daemon");

  worker.stop();
  notes.push(
    `in-process calls of main() in one child (replaced after a hang); ${figures.by_command.real_binary} through bin/termorch.js, compared`,
  );
  return finish(opts, {
    campaign: "input",
    trials: figures.inputs,
    figures,
    mustBeZero: [
      "wrong_exit_code",
      "no_place_named",
      "raw_control_chars",
      "stack_traces",
      "hangs",
      "side_effect_sessions",
      "side_effect_branches",
      "side_effect_worktrees",
      "side_effect_workspace_files",
      "side_effect_run_dirs",
      "binary_mismatch",
      "daemon_unanswered",
      "daemon_stopped",
    ],
    failures,
    notes,
    started,
  });
}

// ---------------------------------------------------------------------------------------------
// The workspace

/** The workspace repository, with committed symlinks that lead inside, outside, nowhere and in loops. */
function makeWorkspace(dir) {
  const ws = makeRepo(dir, "ws");
  writeFileSync(join(dir, "outside.md"), "outside\n");
  mkdirSync(join(ws, "sub"));
  writeFileSync(join(ws, "sub", "x.md"), "x\n");
  const links = {
    "link-etc": "/etc",
    "loop-a": "loop-b",
    "loop-b": "loop-a",
    "self-loop": "self-loop",
    up: "..",
    "ctx-link": "ctx",
    "task-link.md": "ctx/task.md",
    "out-file": "../outside.md",
    dangling: "nowhere",
  };
  for (const [name, target] of Object.entries(links)) symlinkSync(target, join(ws, name));
  git(ws, "add", "-A");
  git(ws, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "links");
  return ws;
}

// ---------------------------------------------------------------------------------------------
// The in-process CLI

class Worker {
  constructor(env, cwd) {
    this.env = env;
    this.cwd = cwd;
    this.child = null;
    this.seq = 0;
    this.pending = null;
    this.noise = "";
  }

  start() {
    this.child = spawn(process.execPath, [WORKER, ENTRY], {
      env: this.env,
      cwd: this.cwd,
      stdio: ["ignore", "pipe", "pipe", "ipc"],
    });
    // Whatever the CLI writes past its io (console.*, Node's own warnings) is the input's output too.
    this.child.stdout.on("data", (d) => {
      this.noise += d;
    });
    this.child.stderr.on("data", (d) => {
      this.noise += d;
    });
    this.child.on("message", (m) => {
      if (m.type === "done" && this.pending?.id === m.id) this.pending.resolve(m);
      else if (m.type === "stray") this.noise += m.text;
      else if (m.type === "ready") this.ready?.();
    });
    this.child.on("exit", (code, signal) => {
      this.pending?.resolve({
        exited: true,
        code: null,
        signal,
        exitCode: code,
        stdout: "",
        stderr: "",
        escapes: [],
      });
    });
    return new Promise((r) => {
      this.ready = r;
    });
  }

  /** main(argv) in the child; a hang kills the child (and whatever it started) and starts another. */
  async call(argv, { env = {}, cwd = this.cwd, timeoutMs }) {
    const id = ++this.seq;
    this.noise = "";
    let timer;
    const result = await new Promise((resolveCall) => {
      this.pending = { id, resolve: resolveCall };
      timer = setTimeout(() => resolveCall({ hang: true }), timeoutMs);
      this.child.send({ type: "call", id, argv, env, cwd });
    });
    clearTimeout(timer);
    this.pending = null;
    if (result.hang || result.exited) {
      this.child.kill("SIGKILL");
      await new Promise((r) =>
        this.child.exitCode !== null || this.child.signalCode !== null ? r() : this.child.once("exit", r),
      );
      await this.start();
    }
    return { ...result, noise: this.noise };
  }

  stop() {
    this.child?.kill("SIGKILL");
  }
}

// ---------------------------------------------------------------------------------------------
// One input

const FILE = "a.json";
const CONFIG = "c.json";

/** Writes an input's files into a fresh in/cur/ and returns the paths to pass. */
function writeInput(ctx, input) {
  rmSync(ctx.inDir, { recursive: true, force: true });
  mkdirSync(ctx.inDir, { recursive: true });
  const a = place(ctx.inDir, FILE, input.assignments);
  const c = input.config === null ? null : place(ctx.inDir, CONFIG, input.config);
  return { a, c };
}

/** Writes one file (or makes the special thing) and returns the path to give termorch. */
function place(dir, name, content) {
  const path = join(dir, name);
  if (!content?.special) {
    writeFileSync(path, content);
    return path;
  }
  const { special, target } = content;
  switch (special) {
    case "missing":
      return path;
    case "dir":
      mkdirSync(path);
      return path;
    case "loop":
      symlinkSync(`${name}.b`, path);
      symlinkSync(name, `${path}.b`);
      return path;
    case "self-loop":
      symlinkSync(name, path);
      return path;
    case "dangling":
      symlinkSync("nowhere.json", path);
      return path;
    case "fifo":
      spawnSync("mkfifo", [path]);
      return path;
    case "dev-zero":
      symlinkSync("/dev/zero", path);
      return path;
    case "dev-null":
      symlinkSync("/dev/null", path);
      return path;
    case "symlink-to-valid":
      writeFileSync(`${path}.real`, target);
      symlinkSync(`${name}.real`, path);
      return path;
    case "long-name": {
      const long = join(dir, `${"n".repeat(240)}-${name}`);
      writeFileSync(long, target);
      return long;
    }
    case "too-long-name":
      return join(dir, `${"n".repeat(300)}-${name}`);
    case "ctrl-name": {
      const odd = join(dir, `\u0001\u001b[31m${name}`);
      writeFileSync(odd, target);
      return odd;
    }
    case "unreadable":
      writeFileSync(path, target);
      chmodSync(path, 0);
      return path;
    case "dotdot":
      return join(dir, "..");
    case "empty":
      writeFileSync(path, "");
      return path;
    default:
      throw new Error(`unknown special ${special}`);
  }
}

function expectedFor(input) {
  // root reads an unreadable file anyway
  if (input.assignments?.special === "unreadable" || input.config?.special === "unreadable")
    return UID === 0 ? "any" : "invalid";
  return input.expect;
}

/**
 * Runs one input through validate (and, for every runEvery-th, through run), checks everything
 * and returns the problems found. `count`: add to the figures (not while shrinking).
 */
async function evaluate(ctx, input, { count, index, seed, cat }) {
  const { figures } = ctx;
  const problems = [];
  const fail = (figure, what, extra = {}) => {
    problems.push(what);
    if (!count) return;
    figures[figure]++;
    ctx.failures.push({ figure, cat, seed, path: String(index), input: input.desc, what, ...extra });
  };
  const { a, c } = writeInput(ctx, input);
  const configArgs = c && input.configVia === "flag" ? ["--config", c] : [];
  const configEnv = c && input.configVia === "env" ? { TERMORCH_CONFIG: c } : {};
  const places = [a, c].filter(Boolean);
  if (count) {
    ctx.n++;
    figures.inputs++;
    figures.by_category[cat] = (figures.by_category[cat] ?? 0) + 1;
    figures.by_command.validate++;
    if (c && input.configVia === "flag") figures.by_command.config_flag++;
    if (c && input.configVia === "env") figures.by_command.config_env++;
  }
  const before = snapshot(ctx);
  const argv = ["validate", a, ...configArgs];
  const r = await ctx.worker.call(argv, { env: configEnv, timeoutMs: VALIDATE_TIMEOUT_MS });
  ctx.lastValidateCode = r.code;
  if (count)
    figures.validate_exit[r.code ?? (r.hang ? "hang" : "none")] =
      (figures.validate_exit[r.code ?? (r.hang ? "hang" : "none")] ?? 0) + 1;
  const expect = expectedFor(input);
  checkResult(r, {
    fail,
    allowed: expect === "invalid" ? [2] : [0, 2],
    places,
    command: "validate",
  });
  const refuse = input.pathCheck ? mustRefuse(ctx, input.pathCheck) : null;
  if (refuse && r.code === 0)
    fail(
      "wrong_exit_code",
      `validate accepted ${input.pathCheck.field} ${JSON.stringify(input.pathCheck.path.slice(0, 80))}: ${refuse}`,
    );
  if (r.code === 0 && !/: valid, /.test(r.stdout))
    fail("wrong_exit_code", `validate exit 0 without "valid": ${r.stdout.slice(0, 200)}`);
  if (r.code === 2 && r.stdout !== "")
    fail("wrong_exit_code", `validate exit 2 printed on stdout: ${r.stdout.slice(0, 200)}`);
  diffSnapshots(ctx, before, snapshot(ctx), { fail, allowReport: false, validRun: false });

  if (
    count &&
    ctx.size.binary > figures.by_command.real_binary &&
    ctx.n % Math.max(1, Math.floor(totalInputs(ctx) / ctx.size.binary)) === 0 &&
    !r.hang
  ) {
    figures.by_command.real_binary++;
    const b = await termorch(ctx.box, argv, {
      cwd: ctx.box.dir,
      env: configEnv,
      timeoutMs: VALIDATE_TIMEOUT_MS * 2,
    });
    if (b.exitCode !== r.code || b.stderr !== r.stderr || b.stdout !== r.stdout)
      fail("binary_mismatch", `bin/termorch.js: exit ${b.exitCode}, in-process: exit ${r.code}`, {
        binary_stderr: b.stderr.slice(0, 300),
        in_process_stderr: r.stderr.slice(0, 300),
      });
  }

  const runThis = index % ctx.size.runEvery === 0 && !r.hang;
  if (runThis) {
    const valid = r.code === 0;
    const tasks = input.tasks ?? 1;
    if (valid && (ctx.validRuns >= ctx.size.validRuns || tasks > MAX_RUN_TASKS)) {
      if (count) figures.by_command.run_not_launched_valid++;
    } else {
      if (valid) ctx.validRuns++;
      problems.push(...(await runInput(ctx, input, { fail, count, valid, places, configArgs, configEnv })));
    }
  }
  return problems;
}

/**
 * Why a path in the paths category must be refused, or null when it may be accepted: a path
 * that must exist (context_path, worktree_include, worktree_copy) has to be there and stay
 * inside the workspace, symlinks followed; a glob may not be absolute nor climb with "..".
 */
function mustRefuse(ctx, { field, path }) {
  if (path.includes("\0")) return "a NUL byte";
  if (field === "workspace_dir") return path === "" ? "empty" : null;
  if (["allowed_paths", "required_artifacts", "run_required_artifacts", "done_when"].includes(field)) {
    if (path === "") return "empty";
    const prefix = field === "done_when" ? path : path.split(/[*?[{]/)[0];
    if (path.startsWith("/")) return "absolute";
    // Only done_when's rule counts a backslash as a separator; in a glob it escapes a character.
    if (prefix.split(field === "done_when" ? /[\\/]/ : "/").includes("..")) return 'climbs with ".."';
    return null;
  }
  if (path === "") return "empty";
  const abs = resolve(ctx.ws, path);
  if (abs !== ctx.ws && !abs.startsWith(`${ctx.ws}/`)) return "outside the workspace";
  try {
    const real = realpathSync(abs);
    const realWs = realpathSync(ctx.ws);
    if (real !== realWs && !real.startsWith(`${realWs}/`)) return "escapes through a symlink";
  } catch {
    return "does not exist";
  }
  return null;
}

function totalInputs(ctx) {
  return Object.keys(CATEGORIES).reduce((s, k) => s + ctx.size[k], 0);
}

/** `termorch run` of the same input: exit 2 where validate said 2; a valid one runs its harmless agent. */
async function runInput(ctx, input, { fail, count, valid, places, configArgs, configEnv }) {
  const { figures } = ctx;
  const { a } = writeInput(ctx, input);
  const before = snapshot(ctx);
  const beforeSessions = ctx.box.sessions();
  if (count) figures.by_command.run++;
  const r = await ctx.worker.call(["run", a, "--json", "--clean", ...configArgs], {
    env: configEnv,
    timeoutMs: RUN_TIMEOUT_MS,
  });
  if (count) figures.run_exit[r.code ?? "none"] = (figures.run_exit[r.code ?? "none"] ?? 0) + 1;
  checkResult(r, { fail, allowed: valid ? [0, 1] : [2], places, command: "run", json: true });
  if (valid && count) figures.by_command.run_launched++;
  // A run that ran: clean what it kept (failed tasks keep their branches), then nothing may be left.
  if (r.code === 0 || r.code === 1) {
    let runId = null;
    try {
      runId = JSON.parse(r.stdout).run_id;
    } catch {}
    if (runId) {
      const c = await ctx.worker.call(["clean", runId, "--force"], { timeoutMs: RUN_TIMEOUT_MS });
      if (c.code !== 0)
        fail(
          "side_effect_run_dirs",
          `clean ${runId} after the run: exit ${c.code}: ${c.stderr.slice(0, 200)}`,
        );
    }
  }
  if (r.code === 2) {
    // The error report, where one was written, says the same.
    const report = join(ctx.inDir, "execution_report.json");
    if (existsSync(report)) {
      const rep = JSON.parse(readFileSync(report, "utf8"));
      if (rep.exit_code !== 2 || rep.summary?.completed !== false)
        fail("wrong_exit_code", `run's error report: exit_code ${rep.exit_code}`);
    }
  }
  const after = snapshot(ctx);
  diffSnapshots(ctx, before, after, { fail, allowReport: true, validRun: r.code === 0 || r.code === 1 });
  const sessions = ctx.box.sessions().filter((s) => !beforeSessions.includes(s));
  if (sessions.length) fail("side_effect_sessions", `run left tmux sessions: ${sessions.join(", ")}`);
  return [];
}

/** Exit code, place, stack traces, escapes and hangs of one call. */
function checkResult(r, { fail, allowed, places, command, json = false }) {
  if (r.hang) {
    fail("hangs", `${command}: no answer within the time limit`);
    return;
  }
  if (r.exited) {
    fail(
      "stack_traces",
      `${command}: the process died (exit ${r.exitCode}, signal ${r.signal}): ${r.noise.slice(0, 300)}`,
    );
    return;
  }
  const all = `${r.stderr}\n${json ? "" : r.stdout}\n${r.noise}`;
  if (r.escapes.length || STACK.test(all))
    fail("stack_traces", `${command}: ${r.escapes[0] ?? all.match(STACK)?.[0]}`, {
      output: all.slice(0, 600),
    });
  // Control characters quoted from the input must reach the terminal as escapes, not raw.
  const raw = r.stderr.match(RAW_CONTROL);
  if (raw)
    fail("raw_control_chars", `${command}: stderr holds ${JSON.stringify(raw[0])} raw`, {
      stderr: r.stderr.slice(0, 300),
    });
  if (!allowed.includes(r.code))
    fail("wrong_exit_code", `${command}: exit ${r.code}, expected ${allowed.join(" or ")}`, {
      stderr: r.stderr.slice(0, 600),
    });
  if (r.code === 2) {
    const text = json ? `${r.stderr}${r.stdout}` : r.stderr;
    if (!places.some((p) => text.includes(p) || text.includes(JSON.stringify(p).slice(1, -1))))
      fail("no_place_named", `${command}: exit 2 without naming ${places.join(" or ")}`, {
        stderr: r.stderr.slice(0, 600),
      });
  }
}

// ---------------------------------------------------------------------------------------------
// Side effects: cheap file-system snapshots before and after each input

function listTree(root, { skip = () => false, maxDepth = 8 } = {}) {
  const out = [];
  const walk = (dir, rel, depth) => {
    let entries;
    try {
      entries = readdirSync(dir, { withFileTypes: true });
    } catch {
      return;
    }
    for (const e of entries) {
      const r = rel ? `${rel}/${e.name}` : e.name;
      if (skip(r)) continue;
      out.push(e.isDirectory() ? `${r}/` : r);
      if (e.isDirectory() && depth < maxDepth) walk(join(dir, e.name), r, depth + 1);
    }
  };
  walk(root, "", 0);
  return out;
}

function snapshot(ctx) {
  const { ws, box } = ctx;
  return {
    workspace: listTree(ws, { skip: (r) => r === ".git" }),
    branches: listTree(join(ws, ".git", "refs", "heads")).filter((r) => !r.endsWith("/")),
    packed: existsSync(join(ws, ".git", "packed-refs"))
      ? readFileSync(join(ws, ".git", "packed-refs"), "utf8")
      : "",
    worktrees: listTree(join(ws, ".git", "worktrees"), { maxDepth: 0 }),
    user: listTree(box.userDir, { skip: (r) => /^pool\/[^/]+\/[^/]+\/./.test(r) }),
    registry: listTree(join(box.dir, "registry")),
    input: listTree(ctx.inDir),
  };
}

function diffSnapshots(ctx, before, after, { fail, allowReport, validRun }) {
  const added = (k) => after[k].filter((x) => !before[k].includes(x));
  const ws = added("workspace");
  if (ws.length) fail("side_effect_workspace_files", `new in the workspace: ${ws.slice(0, 5).join(", ")}`);
  const br = added("branches");
  const packed = after.packed
    .split("\n")
    .filter((l) => l.includes("refs/heads/termorch/") && !before.packed.includes(l));
  if (br.length || packed.length)
    fail("side_effect_branches", `new branches: ${[...br, ...packed].slice(0, 5).join(", ")}`);
  // A valid run may add worktrees to the warm pool (and clean empties none of it): only those.
  const wt = added("worktrees").filter((w) => !validRun || !isPooled(ctx, w));
  if (wt.length) fail("side_effect_worktrees", `new worktrees: ${wt.join(", ")}`);
  // A run that ran may also leave its tmux server's config file (one per server, reused), and, once
  // cleaned, the record of its folder that sandboxes hide (past-runs/, issue 35).
  const user = added("user").filter(
    (u) =>
      !(
        validRun &&
        (u.startsWith("pool/") ||
          u.endsWith("/") ||
          /^tmux-[0-9a-f]+\.conf$/.test(u) ||
          /^past-runs\/[0-9a-f]{32}\.json$/.test(u))
      ),
  );
  const reg = added("registry").filter((u) => !(validRun && u.endsWith("/")));
  // A run that did not start may leave its error report next to the file; a run that ran, its run directory.
  const input = added("input").filter((u) => !(validRun || (allowReport && u === "execution_report.json")));
  if (user.length || reg.length || input.length)
    fail(
      "side_effect_run_dirs",
      `left: ${[...user.map((u) => `userDir/${u}`), ...reg.map((u) => `registry/${u}`), ...input.map((u) => `in/cur/${u}`)].slice(0, 6).join(", ")}`,
    );
}

/** Whether `.git/worktrees/<name>` is a pooled worktree (its gitdir lies in the per-user pool). */
function isPooled(ctx, name) {
  try {
    const gitdir = readFileSync(join(ctx.ws, ".git", "worktrees", name.replace(/\/$/, ""), "gitdir"), "utf8");
    return gitdir.startsWith(join(ctx.box.userDir, "pool"));
  } catch {
    return false;
  }
}

/** The slower, complete checks (tmux, git status, worktree list), after each category. */
function sweep(ctx, when) {
  const { figures, failures, ws, box } = ctx;
  const sessions = box.sessions().filter((s) => !ctx.keptSessions?.includes(s));
  if (sessions.length) {
    figures.side_effect_sessions++;
    failures.push({ figure: "side_effect_sessions", when, what: sessions.join(", ") });
  }
  const status = git(ws, "status", "--porcelain", "--ignored");
  if (status.trim()) {
    figures.side_effect_workspace_files++;
    failures.push({ figure: "side_effect_workspace_files", when, what: status.slice(0, 300) });
  }
  const branches = git(ws, "for-each-ref", "--format=%(refname)", "refs/heads/termorch/").trim();
  if (branches) {
    figures.side_effect_branches++;
    failures.push({ figure: "side_effect_branches", when, what: branches.slice(0, 300) });
  }
  const worktrees = git(ws, "worktree", "list", "--porcelain")
    .split("\n")
    .filter((l) => l.startsWith("worktree "))
    .slice(1)
    .filter((l) => !l.slice(9).startsWith(join(box.userDir, "pool")));
  if (worktrees.length) {
    figures.side_effect_worktrees++;
    failures.push({ figure: "side_effect_worktrees", when, what: worktrees.join(", ") });
  }
}

/** Replays the failing input and lets fast-check shrink it; prints seed, path and the minimal input. */
async function shrink(ctx, cat, arb, seed, index, notes) {
  const out = await fc.check(
    fc.asyncProperty(
      arb,
      async (input) => (await evaluate(ctx, input, { count: false, index: 0, seed, cat })).length === 0,
    ),
    { seed, path: String(index), interruptAfterTimeLimit: 120_000, markInterruptAsFailure: false },
  );
  if (!out.failed) {
    notes.push(`${cat}: the failure at path ${index} did not replay (seed ${seed})`);
    return;
  }
  const input = out.counterexample[0];
  const shown = {
    desc: input.desc,
    assignments: showContent(input.assignments),
    config: showContent(input.config),
    configVia: input.configVia,
  };
  const line = `${cat}: fast-check seed ${seed} path ${out.counterexamplePath}: shrunk to ${JSON.stringify(shown)}`;
  console.log(`  FAILURE ${line}`);
  notes.push(line);
}

function showContent(c) {
  if (c === null) return null;
  if (c.special) return c;
  const s = Buffer.isBuffer(c) ? `base64:${c.toString("base64")}` : c;
  return s.length > 2000 ? `${s.slice(0, 2000)}…(${s.length})` : s;
}

// ---------------------------------------------------------------------------------------------
// A run kept in the registry

async function keptRun(ctx) {
  const dir = join(ctx.box.dir, "kept", "cur");
  mkdirSync(dir, { recursive: true });
  const file = join(dir, "a.json");
  writeFileSync(
    file,
    JSON.stringify({
      run_id: "r1",
      tasks: [
        {
          id: "a",
          agent: "ok",
          context_path: "ctx/task.md",
          command: ["sh", "-c", "echo hi"],
          expect_changes: false,
        },
      ],
      environment: { workspace_dir: WS_REL },
    }),
  );
  const r = await ctx.worker.call(["run", file, "--config", ctx.cfgFile, "--clean"], {
    timeoutMs: RUN_TIMEOUT_MS,
  });
  if (r.code !== 0) throw new Error(`the kept run failed (exit ${r.code}): ${r.stderr}`);
  ctx.keptDir = dir;
}

// ---------------------------------------------------------------------------------------------
// Operator commands with odd run ids and paths

async function operatorCommands(ctx) {
  const { figures, size } = ctx;
  const seed = trialSeed(ctx.opts.seed, 100) | 0;
  let index = -1;
  figures.by_command.operator = {};
  const arb = fc.tuple(fc.constantFrom(...OPERATOR_COMMANDS), refArb);
  await fc
    .check(
      fc.asyncProperty(arb, async ([cmd, ref]) => {
        index++;
        const names = ref === "r1" || resolve(ctx.box.dir, ref) === ctx.keptDir;
        // clean, cancel and resume of the kept run would act on it: that is not malformed input.
        if (names && ["clean", "cancel", "resume"].includes(cmd)) return true;
        const argv = {
          resume: ["resume", ref],
          status: ["status", ref],
          clean: ["clean", ref],
          cancel: ["cancel", ref],
          logs: ["logs", "a", "--run", ref],
          attach: ["attach", "a", "--run", ref],
          "verify-ledger": ["verify-ledger", ref],
          "logs-task": ["logs", ref, "--run", "r1"],
        }[cmd];
        const failuresBefore = ctx.failures.length;
        const fail = (figure, what, extra = {}) => {
          figures[figure]++;
          ctx.failures.push({
            figure,
            cat: "operator",
            seed,
            path: String(index),
            input: JSON.stringify(argv),
            what,
            ...extra,
          });
        };
        figures.inputs++;
        figures.by_category.operator = (figures.by_category.operator ?? 0) + 1;
        figures.by_command.operator[cmd] = (figures.by_command.operator[cmd] ?? 0) + 1;
        const before = snapshot(ctx);
        const r = await ctx.worker.call(argv, { timeoutMs: VALIDATE_TIMEOUT_MS });
        // A run id or directory that names the kept run is found: status and logs answer 0.
        const ok = names && ["status", "logs"].includes(cmd);
        const printable = /^[\x20-\x7e]+$/.test(ref) && ref.length < 200;
        const places = printable ? [ref, resolve(ctx.box.dir, ref)] : [];
        const isOption = ref.startsWith("-");
        checkResult(r, {
          fail,
          allowed: ok ? [0, 2] : [2],
          // commander's own usage errors name the option; control characters cannot be matched as typed.
          places: places.length && !isOption ? places : [""],
          command: cmd,
        });
        diffSnapshots(ctx, before, snapshot(ctx), { fail, allowReport: false, validRun: false });
        return ctx.failures.length === failuresBefore;
      }),
      { seed, numRuns: size.operator, endOnFailure: false },
    )
    .then((out) => {
      if (out.failed)
        console.log(`  operator: first failure at fast-check seed ${seed} path ${out.counterexamplePath}`);
    });
  console.log(`  operator: ${index + 1} commands (fast-check seed ${seed})`);
}

// ---------------------------------------------------------------------------------------------
// The daemon's inbox

async function daemonInbox(ctx, pool) {
  const { figures, box, size } = ctx;
  const home = join(box.dir, "d");
  const inbox = join(home, "inbox");
  const outbox = join(home, "outbox");
  const d = termorch(box, ["daemon", "--home", home, "--config", ctx.cfgFile], {
    cwd: box.dir,
    timeoutMs: 600_000,
  });
  let stderr = "";
  d.child.stderr.on("data", (x) => {
    stderr += x;
  });
  await waitFor(() => stderr.includes("watching"), "the daemon to start", 30_000);
  // A seeded pick of the invalid files found above, and one valid file last: still run.
  const picked = [];
  const rng = fc.sample(fc.nat(), { seed: trialSeed(ctx.opts.seed, 200) | 0, numRuns: size.daemon });
  for (const k of rng) if (pool.length) picked.push(pool.splice(k % pool.length, 1)[0]);
  const dropped = [];
  for (const [i, input] of picked.entries()) {
    const name = `f${i}.json`;
    const tmp = join(inbox, `.${name}.tmp`);
    writeFileSync(tmp, input.assignments);
    // Untouched for longer than the daemon waits for a slow writer: taken as it is.
    const old = new Date(Date.now() - 60_000);
    utimesSync(tmp, old, old);
    renameSync(tmp, join(inbox, name));
    dropped.push({ name, input });
  }
  // Files that are not files: each is answered (exit 2) or left alone, and the daemon goes on.
  const specials = ["fifo", "loop", "self-loop", "dangling", "dev-zero", "dev-null", "empty", "unreadable"];
  for (const special of specials) {
    const name = `s-${special}.json`;
    const staging = join(box.dir, "staging");
    rmSync(staging, { recursive: true, force: true });
    mkdirSync(staging);
    if (special === "loop") {
      symlinkSync(name, join(inbox, `.${name}.b`));
      symlinkSync(`.${name}.b`, join(inbox, name));
    } else renameSync(place(staging, name, { special, target: "{}" }), join(inbox, name));
    dropped.push({ name, input: { desc: `inbox file is ${special}` } });
  }
  const valid = JSON.stringify({
    run_id: "daemon-ok",
    tasks: [{ id: "a", agent: "ok", context_path: "ctx/task.md" }],
    environment: { workspace_dir: WS_REL },
  });
  figures.by_command.daemon = dropped.length + 1;
  figures.inputs += dropped.length;
  const answered = () => (existsSync(outbox) ? readdirSync(outbox).filter((f) => f.endsWith(".json")) : []);
  try {
    await waitFor(() => answered().length >= dropped.length, "an answer to every file", 180_000, 200);
  } catch {}
  const answers = answered();
  if (answers.length < dropped.length) {
    figures.daemon_unanswered += dropped.length - answers.length;
    ctx.failures.push({
      figure: "daemon_unanswered",
      what: `${answers.length} answers to ${dropped.length} files; inbox: ${readdirSync(inbox).join(", ")}`,
    });
  }
  for (const f of answers) {
    const rep = JSON.parse(readFileSync(join(outbox, f), "utf8"));
    const named = (rep.error?.problems ?? []).some((p) => typeof p.file === "string" && p.file.length > 0);
    if (rep.exit_code !== 2 || rep.summary?.completed !== false) {
      figures.wrong_exit_code++;
      ctx.failures.push({
        figure: "wrong_exit_code",
        cat: "daemon",
        what: `outbox ${f}: exit_code ${rep.exit_code}`,
      });
    } else if (!named) {
      figures.no_place_named++;
      ctx.failures.push({
        figure: "no_place_named",
        cat: "daemon",
        what: `outbox ${f}: ${rep.error?.message?.slice(0, 200)}`,
      });
    }
  }
  // Still taking files: a valid one runs.
  writeFileSync(join(inbox, "ok.json"), valid);
  try {
    await waitFor(() => existsSync(join(outbox, "daemon-ok.json")), "the valid file's answer", 60_000, 100);
    const rep = JSON.parse(readFileSync(join(outbox, "daemon-ok.json"), "utf8"));
    if (rep.exit_code !== 0) throw new Error(`exit_code ${rep.exit_code}`);
  } catch (error) {
    figures.daemon_stopped++;
    ctx.failures.push({ figure: "daemon_stopped", what: `after the malformed files: ${error.message}` });
  }
  if (d.child.exitCode !== null) {
    figures.daemon_stopped++;
    ctx.failures.push({ figure: "daemon_stopped", what: `the daemon exited (${d.child.exitCode})` });
  }
  d.child.kill("SIGTERM");
  const end = await d;
  const log = readFileSync(join(home, "logs", "termorch.log"), "utf8");
  if (STACK.test(`${end.stderr}\n${log}`)) {
    figures.stack_traces++;
    ctx.failures.push({
      figure: "stack_traces",
      cat: "daemon",
      what: `${end.stderr}\n${log}`.match(STACK)[0],
    });
  }
  if (end.exitCode !== 0) {
    figures.daemon_stopped++;
    ctx.failures.push({
      figure: "daemon_stopped",
      what: `SIGTERM: exit ${end.exitCode}: ${end.stderr.slice(-300)}`,
    });
  }
}

await runAsScript(main);
