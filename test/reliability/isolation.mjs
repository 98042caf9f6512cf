// Campaign 5, isolation. Three questions about a real run, asked as another user would (uid 65534
// through `setpriv`; we run as root, so root's own access proves nothing):
//   1. modes: can another user read or write anything termorch keeps owner-only — its per-user
//      folder, the tmux socket, the run's logs, ledger, state and private folder (launch files),
//      the daemon's log, the registry? Checked by mode (every ancestor must let them through) and
//      by trying, during the run and after it.
//   2. tmux: can another user's process list, attach to, drive or kill termorch's server?
//   3. symlinks: one planted where termorch will write (the run directory or a file in it, the
//      per-user folder and its pool/locks/worktrees folders, the registry, a daemon run folder)
//      must be refused with an error naming it, and nothing may appear at its target.
// The sandbox is opened up like a shared /tmp (its folders 0755, its TMPDIR 1777) so that only
// termorch's own modes stand between the other user and its files.
import { spawnSync } from "node:child_process";
import {
  chmodSync,
  existsSync,
  lstatSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  renameSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { dirname, join } from "node:path";
import {
  finish,
  leftovers,
  makeRepo,
  prng,
  ROOT,
  runAsScript,
  sandbox,
  termorch,
  UID,
  waitFor,
} from "./lib.mjs";

const AGENT = join(ROOT, "test", "reliability", "agents", "iso-agent.sh");
const NOBODY = ["--reuid=65534", "--regid=65534", "--clear-groups"];

function haveSetpriv() {
  return spawnSync("setpriv", ["--version"], { stdio: "ignore" }).status === 0;
}

/** Runs argv as uid/gid 65534 with no groups; {status, out}. */
function asNobody(argv, { timeoutMs = 10_000, input } = {}) {
  const r = spawnSync("setpriv", [...NOBODY, ...argv], {
    encoding: "utf8",
    timeout: timeoutMs,
    env: { PATH: process.env.PATH, HOME: "/", TERM: "xterm", LANG: "C" },
    ...(input === undefined ? { stdio: ["ignore", "pipe", "pipe"] } : { input }),
  });
  return {
    status: r.status,
    timedOut: r.error?.code === "ETIMEDOUT",
    out: `${r.stdout ?? ""}${r.stderr ?? ""}`.trim(),
  };
}

function assignments(runId, tasks, repo, extra = {}) {
  return {
    run_id: runId,
    tasks: tasks.map((t) => ({
      agent: "iso",
      context_path: "ctx/task.md",
      command: ["bash", AGENT],
      dependencies: [],
      ...t,
    })),
    environment: { workspace_dir: repo },
    ...extra,
  };
}

async function main(opts) {
  const started = Date.now();
  const failures = [];
  const notes = [];
  const figures = {};
  if (!haveSetpriv()) {
    notes.push("setpriv is missing: the other-user checks cannot run here (install util-linux)");
    return finish(opts, {
      campaign: "isolation",
      trials: 0,
      figures: { skipped: 1 },
      mustBeZero: [],
      notes,
      started,
    });
  }
  if (UID !== 0)
    notes.push(`not root (uid ${UID}): setpriv cannot switch users, so only the mode checks count`);
  const rand = prng(opts.seed);
  const box = sandbox("iso");
  chmodSync(box.dir, 0o755);
  chmodSync(box.tmp, 0o1777);
  let trials = 0;

  // 1 and 2: a daemon run, looked at while its first task is running and after it finished.
  const home = join(box.dir, "home");
  const repo = makeRepo(box.dir);
  const gate = join(box.dir, "gate");
  const daemon = termorch(box, ["daemon", "--home", home], { timeoutMs: 10 * 60_000 });
  const logFile = join(home, "logs", "termorch.log");
  const exposedDuring = [];
  const exposedAfter = [];
  const attachResults = {};
  let socketPath = null;
  const blind = [];
  try {
    await waitFor(
      () => existsSync(logFile) && readFileSync(logFile, "utf8").includes("watching the inbox"),
      "the daemon",
      60_000,
    );
    const runId = `iso-${rand.int(1000, 9999)}`;
    const body = assignments(
      runId,
      [
        { id: "A", env: { GATE: gate } },
        { id: "B", dependencies: ["A"] },
      ],
      repo,
      {
        environment: { workspace_dir: repo, env_vars: ["ISO_SECRET_TOKEN=not-for-others"] },
      },
    );
    // Written owner-only, as a careful user would (it names a secret): termorch must keep it so.
    writeFileSync(join(home, "inbox", `.${runId}.tmp`), JSON.stringify(body), { mode: 0o600 });
    renameSync(join(home, "inbox", `.${runId}.tmp`), join(home, "inbox", `${runId}.json`));
    const runDir = join(home, "runs", runId);
    const running = join(runDir, "status", "A.running");
    await waitFor(() => existsSync(running), "task A to run", 60_000);
    const status = JSON.parse(readFileSync(running, "utf8"));
    socketPath = status.socket_path;

    // While A runs: the socket, the session, the launch files are live.
    exposedDuring.push(...exposed(ownerOnly(box, home, runDir, socketPath)));
    trials++;
    // Controls: the probes must be able to see what they look for, or their zeros prove nothing.
    const control = join(box.dir, "control");
    writeFileSync(control, "readable\n", { mode: 0o644 });
    if (!readableByNobody([control]).includes(control))
      blind.push("uid 65534 could not read a 0644 file: the read probe is blind");
    const own = spawnSync("tmux", ["-S", socketPath, "list-sessions"], { encoding: "utf8" });
    if (own.status !== 0 || !own.stdout.includes(status.session))
      blind.push(`the owner could not list sessions on ${socketPath}: the attach probe is aimed wrong`);
    Object.assign(attachResults, tryForeignTmux(socketPath, status.session, "daemon run, live"));
    trials += 6;
    if (!box.sessions().includes(status.session))
      failures.push("A's session is gone after the other user's attempts");

    writeFileSync(gate, "");
    await waitFor(() => existsSync(join(home, "outbox", `${runId}.json`)), "the run's answer", 120_000);
    const report = JSON.parse(readFileSync(join(home, "outbox", `${runId}.json`), "utf8"));
    if (!report.summary.completed)
      failures.push(`the isolation run did not complete: ${JSON.stringify(report.summary)}`);
    await waitFor(
      () => readFileSync(logFile, "utf8").includes('"msg":"run finished"'),
      "the run's clean-up",
      60_000,
    );
    exposedAfter.push(...exposed(ownerOnly(box, home, runDir, socketPath)));
    trials++;
  } catch (error) {
    failures.push(`daemon run: ${error.message}`);
  } finally {
    daemon.child.kill("SIGTERM");
    await daemon;
  }
  if (opts.mode === "long") {
    try {
      trials += await oneShotRun(box, repo, { exposedDuring, exposedAfter, attachResults, failures });
    } catch (error) {
      failures.push(`one-shot run: ${error.message}`);
    }
  }
  // The canary the runs passed to their agents is in no file another user can read.
  const readable = readableByNobody(
    allFiles([home, box.tmp, join(box.dir, "registry"), join(box.dir, "oneshot")]),
  );
  const leaked = readable.filter((f) => safeRead(f).includes("not-for-others"));
  figures.secret_readable_by_others = leaked.length;
  for (const f of leaked) failures.push(`secret readable by others in ${f}`);
  figures.owner_only_paths_checked = lastChecked;
  figures.blind_probes = blind.length;
  failures.push(...blind);
  figures.readable_by_others = new Set([...exposedDuring, ...exposedAfter].map((e) => e.path)).size;
  for (const e of [...exposedDuring, ...exposedAfter].slice(0, 10))
    failures.push(`readable by others: ${e.path} (${e.why})`);
  figures.foreign_attach_success = Object.values(attachResults).filter((r) => !r.refused).length;
  figures.foreign_attach_attempts = attachResults;
  for (const [k, r] of Object.entries(attachResults))
    if (!r.refused) failures.push(`other user's tmux ${k} got in`);

  // 3: symlinks planted where termorch will write.
  const cases = symlinkCases(opts.mode);
  const only = opts.only === null ? null : cases[opts.only]?.name;
  const results = {};
  let followed = 0;
  let notRefused = 0;
  for (const c of cases) {
    if (only !== null && c.name !== only) continue;
    trials++;
    const r = await symlinkCase(box, c);
    results[c.name] = r.summary;
    if (r.followed) {
      followed++;
      failures.push(`symlink ${c.name}: followed (${r.summary})`);
    }
    if (!r.refused) {
      notRefused++;
      failures.push(`symlink ${c.name}: not refused with an error naming it (${r.summary})`);
    }
  }
  figures.symlink_cases = Object.keys(results).length;
  figures.followed_symlinks = followed;
  figures.symlinks_not_refused = notRefused;
  figures.symlink_results = results;
  const lo = leftovers(box, repo);
  figures.leftover_processes = lo.processes.length;
  for (const p of lo.processes) failures.push(`leftover process ${p}`);
  box.dispose();
  return finish(opts, {
    campaign: "isolation",
    trials,
    figures,
    mustBeZero: [
      "blind_probes",
      "readable_by_others",
      "secret_readable_by_others",
      "foreign_attach_success",
      "followed_symlinks",
      "symlinks_not_refused",
      "leftover_processes",
    ],
    failures,
    notes,
    started,
  });
}

/** What uid 65534 gets from termorch's tmux server: list, attach (also read-only), type, create, kill. */
function tryForeignTmux(socketPath, session, label) {
  const results = {};
  for (const [name, argv, wantTty] of [
    ["list-sessions", ["tmux", "-S", socketPath, "list-sessions"], false],
    ["attach", ["tmux", "-S", socketPath, "attach", "-t", session], true],
    ["attach-read-only", ["tmux", "-S", socketPath, "attach", "-r", "-t", session], true],
    ["send-keys", ["tmux", "-S", socketPath, "send-keys", "-t", session, "echo hi", "Enter"], false],
    ["new-session", ["tmux", "-S", socketPath, "new-session", "-d", "-s", "intruder"], false],
    ["kill-server", ["tmux", "-S", socketPath, "kill-server"], false],
  ]) {
    // attach needs a terminal: `script` gives it one, and passes tmux's exit code on (-e).
    const cmd = wantTty ? ["script", "-qec", argv.map(shq).join(" "), "/dev/null"] : argv;
    const r = asNobody(cmd, { timeoutMs: 5000 });
    // A refusal exits non-zero; an attach that got in would sit there until the timeout.
    const gotIn = r.status === 0 || r.timedOut;
    results[`${label}: ${name}`] = { refused: !gotIn, said: r.out.split("\n")[0]?.slice(0, 120) ?? "" };
  }
  return results;
}

const shq = (w) => `'${String(w).replaceAll("'", `'\\''`)}'`;
let lastChecked = 0;

/**
 * Long only: a one-shot `termorch run` (no daemon) with an agent in a terminal (tty: the pane
 * logger's filter file) and a task that fails, whose session is kept for inspection after the
 * run: modes while it runs and after, and the other user against the live and the kept session.
 */
async function oneShotRun(box, repo, acc) {
  const cfg = join(box.dir, "config.json");
  writeFileSync(cfg, JSON.stringify({ agents: { "iso-tty": { command: ["bash", AGENT], tty: true } } }));
  const runDir = join(box.dir, "oneshot");
  const gate = join(box.dir, "gate-oneshot");
  const file = join(box.dir, "oneshot.json");
  const body = assignments("iso-oneshot", [{ id: "F", env: { FAIL: "3" } }], repo, {
    environment: { workspace_dir: repo, env_vars: ["ISO_SECRET_TOKEN=not-for-others"] },
  });
  body.tasks.push({
    id: "T",
    agent: "iso-tty",
    context_path: "ctx/task.md",
    dependencies: [],
    env: { GATE: gate },
  });
  writeFileSync(file, JSON.stringify(body), { mode: 0o600 });
  const run = termorch(box, ["run", file, "--config", cfg, "--out", runDir], { timeoutMs: 5 * 60_000 });
  const running = join(runDir, "status", "T.running");
  await waitFor(() => existsSync(running), "the one-shot run's tty task to run", 60_000);
  const live = JSON.parse(readFileSync(running, "utf8"));
  acc.exposedDuring.push(...exposed(ownerOnly(box, null, runDir, live.socket_path)));
  Object.assign(
    acc.attachResults,
    tryForeignTmux(live.socket_path, live.session, "one-shot run, live tty session"),
  );
  writeFileSync(gate, "");
  const r = await run;
  if (r.exitCode !== 1)
    acc.failures.push(
      `one-shot run: exit ${r.exitCode} where 1 (F fails) was expected: ${r.stderr.slice(0, 300)}`,
    );
  acc.exposedAfter.push(...exposed(ownerOnly(box, null, runDir, live.socket_path)));
  const failed = JSON.parse(readFileSync(join(runDir, "status", "F.failed"), "utf8"));
  if (!box.sessions().includes(failed.session))
    acc.failures.push(`one-shot run: F's session ${failed.session} was not kept after it failed`);
  Object.assign(
    acc.attachResults,
    tryForeignTmux(failed.socket_path, failed.session, "one-shot run, kept session"),
  );
  // What an operator does once they looked: `clean` ends the kept session (and so tmux's server).
  const cleaned = await termorch(box, ["clean", "iso-oneshot"], { timeoutMs: 120_000 });
  if (cleaned.exitCode !== 0)
    acc.failures.push(`one-shot run: clean exited ${cleaned.exitCode}: ${cleaned.stderr.slice(0, 300)}`);
  return 1 + 12;
}

/**
 * Everything the design keeps owner-only (DESIGN.md §10, src/fs/names.ts): the per-user folder
 * and all in it, the tmux socket, the run's logs/, events.jsonl, state.json and private folder
 * (.termorch: launch files, exit records), the daemon's log, the registry's entries.
 */
function ownerOnly(box, home, runDir, socketPath) {
  const paths = [box.userDir, ...allPaths(box.userDir)];
  if (socketPath) paths.push(socketPath);
  for (const name of ["events.jsonl", "state.json"]) paths.push(join(runDir, name));
  paths.push(...allPaths(join(runDir, "logs")).filter((p) => !isDir(p)));
  paths.push(join(runDir, ".termorch"), ...allPaths(join(runDir, ".termorch")));
  if (home) paths.push(...allPaths(join(home, "logs")).filter((p) => !isDir(p)));
  paths.push(...allPaths(join(box.dir, "registry")).filter((p) => !isDir(p)));
  const existing = paths.filter((p) => existsSync(p) || isLink(p));
  lastChecked = Math.max(lastChecked, existing.length);
  return existing;
}

/**
 * Which of `paths` another user can reach: by mode (readable or writable by group or others, with
 * every folder above traversable by them) and by trying as uid 65534.
 */
function exposed(paths) {
  const out = [];
  for (const p of paths) {
    // Listed a moment ago, gone now (a launch file the supervisor read, an atomic write's temp
    // copy): what no longer exists exposes nothing.
    const st = lstatSync(p, { throwIfNoEntry: false });
    if (!st || st.isSymbolicLink()) continue;
    const bits = st.mode & 0o077;
    if (bits & 0o066 && reachable(p)) out.push({ path: p, why: `mode ${(st.mode & 0o777).toString(8)}` });
  }
  const tried = new Set(out.map((e) => e.path));
  for (const p of readableByNobody(paths)) if (!tried.has(p)) out.push({ path: p, why: "read by uid 65534" });
  return out;
}

/** Every folder above `p` lets group or others through (the socket's folder, say, is 0700). */
function reachable(p) {
  for (let d = dirname(p); d !== "/"; d = dirname(d))
    if (((statSync(d, { throwIfNoEntry: false })?.mode ?? 0) & 0o011) === 0) return false;
  return true;
}

/** The paths uid 65534 could read (a file's bytes, a folder's names) or write. */
function readableByNobody(paths) {
  const list = paths.filter((p) => !isLink(p));
  if (!list.length) return [];
  const script =
    'for f in "$@"; do if [ -d "$f" ]; then ls -- "$f" >/dev/null 2>&1 && echo "$f"; ' +
    'elif [ -S "$f" ]; then [ -w "$f" ] && echo "$f"; ' +
    'else { head -c1 -- "$f" >/dev/null 2>&1 || [ -w "$f" ]; } && echo "$f"; fi; done; true';
  const found = [];
  for (let i = 0; i < list.length; i += 200) {
    const r = asNobody(["sh", "-c", script, "sh", ...list.slice(i, i + 200)], { timeoutMs: 60_000 });
    found.push(...r.out.split("\n").filter((l) => l && list.includes(l)));
  }
  return found;
}

function allPaths(dir) {
  const out = [];
  let names;
  try {
    names = readdirSync(dir);
  } catch {
    return out;
  }
  for (const n of names) {
    const p = join(dir, n);
    out.push(p);
    if (isDir(p) && !isLink(p)) out.push(...allPaths(p));
  }
  return out;
}
function allFiles(dirs) {
  return dirs.flatMap((d) => allPaths(d)).filter((p) => !isDir(p) && !isLink(p));
}
function isDir(p) {
  try {
    return lstatSync(p).isDirectory();
  } catch {
    return false;
  }
}
function isLink(p) {
  try {
    return lstatSync(p).isSymbolicLink();
  } catch {
    return false;
  }
}
function safeRead(p) {
  try {
    return readFileSync(p, "latin1");
  } catch {
    return "";
  }
}

/**
 * Where a symlink is planted, relative to one case's world: `userDir` (its own TMPDIR's per-user
 * folder), `runDir` (the one-shot run's --out folder), `registry` (the default registry, inside
 * the per-user folder), `daemonRun` (a daemon home's runs/<run_id>). `victim` is a folder or a
 * file the link points at; nothing may change there.
 */
function symlinkCases(mode) {
  const longOnly = [
    // The daemon checks the per-user folder when its first run needs it: a run it cannot start is answered.
    {
      name: "per-user folder (daemon)",
      at: (w) => w.userDir,
      victim: "dir",
      daemon: true,
      answeredError: true,
    },
    {
      name: "per-user pool folder (daemon)",
      at: (w) => join(w.userDir, "pool"),
      victim: "dir",
      userDir: true,
      daemon: true,
      answeredError: true,
    },
  ];
  return [
    ...(mode === "long" ? longOnly : []),
    { name: "per-user folder", at: (w) => w.userDir, victim: "dir" },
    { name: "per-user locks folder", at: (w) => join(w.userDir, "locks"), victim: "dir", userDir: true },
    { name: "per-user pool folder", at: (w) => join(w.userDir, "pool"), victim: "dir", userDir: true },
    {
      name: "per-user worktrees folder",
      at: (w) => join(w.userDir, "worktrees"),
      victim: "dir",
      userDir: true,
    },
    {
      name: "default registry",
      at: (w) => join(w.userDir, "runs"),
      victim: "dir",
      userDir: true,
      defaultRegistry: true,
    },
    { name: "run directory", at: (w) => w.runDir, victim: "dir" },
    { name: "run dir events.jsonl", at: (w) => join(w.runDir, "events.jsonl"), victim: "file", runDir: true },
    { name: "run dir state.json", at: (w) => join(w.runDir, "state.json"), victim: "file", runDir: true },
    {
      name: "run dir execution_report.json",
      at: (w) => join(w.runDir, "execution_report.json"),
      victim: "file",
      runDir: true,
    },
    { name: "run dir logs/", at: (w) => join(w.runDir, "logs"), victim: "dir", runDir: true },
    { name: "run dir status/", at: (w) => join(w.runDir, "status"), victim: "dir", runDir: true },
    { name: "run dir artifacts/", at: (w) => join(w.runDir, "artifacts"), victim: "dir", runDir: true },
    { name: "run dir .termorch/", at: (w) => join(w.runDir, ".termorch"), victim: "dir", runDir: true },
    { name: "daemon run folder", at: (w) => join(w.home, "runs", w.runId), victim: "dir", daemon: true },
  ];
}

const VICTIM_TEXT = "victim: must stay as it is\n";

async function symlinkCase(box, c) {
  const slug = c.name.replace(/[^a-z0-9]+/gi, "-").toLowerCase();
  const base = join(box.dir, `sym-${slug}`);
  const tmp = join(base, "tmp");
  mkdirSync(tmp, { recursive: true, mode: 0o1777 });
  const w = {
    userDir: join(tmp, `termorch-${UID}`),
    runDir: join(base, "run"),
    registry: join(base, "registry"),
    home: join(base, "home"),
    runId: `sym-${slug}`.slice(0, 60),
  };
  const repo = makeRepo(base);
  const victim = join(base, "victim");
  if (c.victim === "dir") mkdirSync(victim);
  else writeFileSync(victim, VICTIM_TEXT);
  if (c.userDir) mkdirSync(w.userDir, { mode: 0o700 });
  if (c.runDir) mkdirSync(w.runDir);
  const at = c.at(w);
  mkdirSync(dirname(at), { recursive: true });
  symlinkSync(victim, at);
  const env = {
    TMPDIR: tmp,
    TERMORCH_REGISTRY: c.defaultRegistry ? undefined : w.registry,
  };
  let r;
  if (c.daemon) {
    const d = termorch(box, ["daemon", "--home", w.home], { env, timeoutMs: 120_000 });
    const log = join(w.home, "logs", "termorch.log");
    try {
      await waitFor(
        () => existsSync(log) && readFileSync(log, "utf8").includes("watching the inbox"),
        "the daemon",
        60_000,
      );
      writeFileSync(
        join(w.home, "inbox", `.x.tmp`),
        JSON.stringify(assignments(w.runId, [{ id: "A" }], repo)),
      );
      renameSync(join(w.home, "inbox", ".x.tmp"), join(w.home, "inbox", "x.json"));
      await waitFor(() => readdirSync(join(w.home, "outbox")).length > 0, "an answer", 60_000);
    } catch (error) {
      d.child.kill("SIGTERM");
      r = await d;
      return { followed: changed(victim, c.victim), refused: false, summary: error.message };
    }
    d.child.kill("SIGTERM");
    r = await d;
    // The daemon names a run's folder itself (mkdir, never an existing one): a link there is
    // passed over for a fresh folder, and the run is answered under that folder's name.
    const answers = readdirSync(join(w.home, "outbox"));
    const followed = changed(victim, c.victim);
    const report = JSON.parse(readFileSync(join(w.home, "outbox", answers[0]), "utf8"));
    if (c.answeredError) {
      const said = JSON.stringify(report.error ?? null);
      return {
        followed,
        refused: report.summary.completed === false && said.includes(at) && /symbolic link/.test(said),
        summary: `answered ${report.error?.kind ?? "without error"}: ${report.error?.message?.slice(0, 200) ?? ""}${followed ? "; victim changed" : ""}`,
      };
    }
    const passedOver = answers[0] !== `${w.runId}.json` && report.summary.completed === true;
    return {
      followed,
      refused: passedOver,
      summary: `answered as ${answers[0]}, completed=${report.summary.completed}${followed ? ", victim changed" : ""}`,
    };
  }
  const file = join(base, "assignments.json");
  writeFileSync(file, JSON.stringify(assignments(`sym-${slug}`.slice(0, 60), [{ id: "A" }], repo)));
  r = await termorch(box, ["run", file, "--out", w.runDir], { env, timeoutMs: 120_000 });
  const followed = changed(victim, c.victim);
  const name = at.split("/").pop();
  const named = r.stderr.includes(at) || r.stderr.includes(name);
  const refused = r.exitCode !== 0 && r.exitCode !== null && /symbolic link|symlink/i.test(r.stderr) && named;
  return {
    followed,
    refused,
    summary: `exit ${r.exitCode}: ${(r.stderr.split("\n").find((l) => /symbolic link/.test(l)) ?? r.stderr.trim().split("\n")[0] ?? "").slice(0, 240)}${followed ? "; victim changed" : ""}`,
  };
}

/** Whether anything appeared in (a folder) or changed in (a file) the link's target. */
function changed(victim, kind) {
  if (kind === "dir") return readdirSync(victim).length > 0;
  return readFileSync(victim, "utf8") !== VICTIM_TEXT;
}

await runAsScript(main);
