// Campaign 4, load and soak: one daemon (`termorch daemon --home H --max-parallel 8`) gets a burst
// of assignment files dropped into its inbox at once (long: 50 files of ~20 tasks, ~1,000 tasks;
// smoke: 5 x 10), then a drip of further files every few seconds (long: `--minutes N`, default
// 10; smoke: a few seconds), some of them invalid. Its RSS and open descriptors are sampled from
// /proc all along. At the end: every file answered (outbox == the run's report), every ledger
// intact with contiguous seq, the daemon log consistent, and nothing left behind (sessions,
// worktrees outside the warm pool, branches, processes, temp files).
//
// "Flat" is judged where the daemon holds no run: the drip comes in segments, and after the burst
// and after each segment the campaign waits until every run finished (a quiet point). A leak grows
// with the number of runs, so: the descriptors open at the last quiet point may exceed those after
// the burst by at most FD_SLACK; RSS at the last quiet point may exceed RSS after the first drip
// segment (warm-up: V8 sizes its heap over the first runs) by at most max(RSS_SLACK_MB,
// RSS_SLACK_FRACTION of it): quiet-point RSS moves by up to ~20 MB with when V8 last collected, so
// the floor is above that noise, and a leak of 40 KB a task shows over the long drip's ~800 tasks.
// Neither depends on the machine's speed. The samples taken while runs
// are in flight are reported (first, last, min, max; medians of the drip's first and last quarters;
// slope per 100 runs answered) but not judged: they move with how many runs are in flight.
import {
  existsSync,
  lstatSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  renameSync,
  writeFileSync,
} from "node:fs";
import { join, relative } from "node:path";
import {
  finish,
  git,
  leftovers,
  makeRepo,
  prng,
  processesUnder,
  ROOT,
  runAsScript,
  sandbox,
  serverPid,
  termorch,
  waitFor,
} from "./lib.mjs";

const AGENT = join(ROOT, "test", "reliability", "agents", "soak-agent.sh");
const FD_SLACK = 2;
// The smoke version's drip is seconds long: too short for a leak to show above V8's own swings
// (up to ~60 MB between collections on a loaded machine), so CI judges it loosely and the long
// version, where a leak adds up over hundreds of runs, is the measure.
const RSS_SLACK_MB = { smoke: 64, long: 32 };
const RSS_SLACK_FRACTION = 0.15;

function plan(opts) {
  const minutes = opts.extra.minutes === undefined ? null : Number(opts.extra.minutes);
  if (minutes !== null && !(minutes >= 0)) throw new Error("--minutes needs a number ≥ 0");
  return opts.mode === "smoke"
    ? {
        burst: opts.trials ?? 5,
        burstTasks: 10,
        dripMs: (minutes ?? 0.2) * 60_000,
        segments: 3,
        every: [400, 1200],
        dripTasks: [3, 8],
        workspaces: 3,
      }
    : {
        burst: opts.trials ?? 50,
        burstTasks: 20,
        dripMs: (minutes ?? 10) * 60_000,
        segments: 4,
        every: [4000, 10_000],
        dripTasks: [2, 10],
        workspaces: 10,
      };
}

/** A small random DAG: each task depends on up to two earlier ones. */
function tasksFor(rand, n) {
  const tasks = [];
  for (let i = 0; i < n; i++) {
    const deps = new Set();
    const k = i === 0 ? 0 : rand.int(0, Math.min(2, i));
    while (deps.size < k) deps.add(`t${rand.int(0, i - 1)}`);
    tasks.push({
      id: `t${i}`,
      agent: "soak",
      context_path: "ctx/task.md",
      command: ["bash", AGENT],
      dependencies: [...deps].sort(),
    });
  }
  return tasks;
}

async function main(opts) {
  const started = Date.now();
  const p = plan(opts);
  const rand = prng(opts.seed);
  const box = sandbox("soak");
  const home = join(box.dir, "home");
  const inbox = join(home, "inbox");
  const outbox = join(home, "outbox");
  const repos = Array.from({ length: p.workspaces }, (_, i) => makeRepo(box.dir, `ws${i}`));
  /** run id -> what was dropped and what its answer must say. */
  const dropped = new Map();
  const failures = [];
  const notes = [];

  const drop = (runId, body, valid, repo) => {
    mkdirSync(inbox, { recursive: true });
    // Written beside the inbox's view (a dotfile is never taken), then renamed in: one complete add.
    const tmp = join(inbox, `.${runId}.json.tmp`);
    writeFileSync(tmp, JSON.stringify(body));
    renameSync(tmp, join(inbox, `${runId}.json`));
    dropped.set(runId, { valid, tasks: body.tasks.length, repo, at: Date.now() });
  };
  let serial = 0;
  const dropOne = (nTasks, valid = true) => {
    const runId = `soak-${String(serial++).padStart(4, "0")}`;
    const repo = rand.pick(repos);
    const tasks = tasksFor(rand, nTasks);
    // An invalid file: a dependency on a task that does not exist (answered, never run).
    if (!valid) tasks[tasks.length - 1].dependencies = ["no-such-task"];
    drop(
      runId,
      {
        run_id: runId,
        tasks,
        environment: { workspace_dir: repo, resource_limits: { max_parallel: 8 } },
      },
      valid,
      repo,
    );
  };

  const daemon = termorch(box, ["daemon", "--home", home, "--max-parallel", "8"], {
    timeoutMs: p.dripMs + 45 * 60_000,
  });
  const pid = daemon.child.pid;
  const logFile = join(home, "logs", "termorch.log");
  const logText = () => (existsSync(logFile) ? readFileSync(logFile, "utf8") : "");
  const finishedRuns = () => (logText().match(/"msg":"run finished"/g) ?? []).length;
  const answeredCount = () =>
    existsSync(outbox) ? readdirSync(outbox).filter((n) => n.endsWith(".json")).length : 0;

  const samples = [];
  const sample = () => {
    try {
      const status = readFileSync(`/proc/${pid}/status`, "utf8");
      const rssKb = Number(/VmRSS:\s+(\d+)/.exec(status)?.[1]);
      const fds = readdirSync(`/proc/${pid}/fd`).length;
      const s = { t: Date.now() - started, answered: answeredCount(), rss_kb: rssKb, fds };
      samples.push(s);
      return s;
    } catch {
      return null;
    }
  };
  const sampler = setInterval(
    () => {
      const s = sample();
      if (s && opts.mode !== "smoke" && samples.length % 30 === 0)
        console.log(
          `${Math.round(s.t / 1000)} s: ${s.answered}/${dropped.size} answered, RSS ${mb(s.rss_kb)} MB, ${s.fds} fds`,
        );
    },
    opts.mode === "smoke" ? 200 : 1000,
  );

  /** The daemon with no run in flight: medians over a short window, as the quiet figure. */
  const quiet = async (what) => {
    await waitFor(
      () => answeredCount() >= dropped.size,
      `answers to all ${dropped.size} files (${what})`,
      30 * 60_000,
      200,
    );
    // A run logs "run finished" after its clean-up, which comes after its answer.
    await waitFor(() => finishedRuns() >= dropped.size, `every run to finish (${what})`, 10 * 60_000, 200);
    const window = [];
    for (let i = 0; i < 10; i++) {
      const s = sample();
      if (s) window.push(s);
      await new Promise((r) => setTimeout(r, 200));
    }
    return {
      rss_mb: mb(median(window.map((s) => s.rss_kb))),
      fds: Math.min(...window.map((s) => s.fds)),
      after_runs: dropped.size,
    };
  };

  /** The quiet points: after the burst, then after each segment of the drip. */
  const quietPoints = [];
  let daemonExit = null;
  let dripStartSample = 0;
  try {
    await waitFor(() => logText().includes("watching the inbox"), "the daemon to watch its inbox", 60_000);
    sample();
    // The burst: every file at once.
    for (let i = 0; i < p.burst; i++) dropOne(p.burstTasks);
    quietPoints.push(await quiet("after the burst"));
    console.log(
      `burst: ${p.burst} files answered at ${Math.round((Date.now() - started) / 1000)} s`,
      quietPoints[0],
    );
    // The drip: a file every few seconds, one in ten invalid; in segments, each followed by a
    // quiet point (the drip waits there until every run finished).
    dripStartSample = samples.length;
    let k = 0;
    for (let seg = 1; seg <= p.segments; seg++) {
      const segEnd = Date.now() + p.dripMs / p.segments;
      while (Date.now() < segEnd) {
        dropOne(rand.int(...p.dripTasks), ++k % 10 !== 0);
        await new Promise((r) => setTimeout(r, rand.int(...p.every)));
      }
      quietPoints.push(await quiet(`after drip segment ${seg}`));
      console.log(
        `drip segment ${seg}: all answered at ${Math.round((Date.now() - started) / 1000)} s`,
        quietPoints.at(-1),
      );
    }
  } catch (error) {
    failures.push(`campaign: ${error.message}`);
  } finally {
    clearInterval(sampler);
    daemon.child.kill("SIGTERM");
    daemonExit = await daemon;
  }
  if (daemonExit.exitCode !== 0)
    failures.push(`daemon exited ${daemonExit.exitCode ?? daemonExit.signal} on SIGTERM`);

  // Every file answered, and the answer is the run's report.
  let unanswered = 0;
  let wrongAnswers = 0;
  let lostTaskFiles = 0;
  for (const [runId, d] of dropped) {
    const answer = join(outbox, `${runId}.json`);
    if (!existsSync(answer)) {
      unanswered++;
      failures.push(`${runId}: no answer`);
      continue;
    }
    const bad = (why) => {
      wrongAnswers++;
      failures.push(`${runId}: ${why}`);
    };
    try {
      const a = JSON.parse(readFileSync(answer, "utf8"));
      const r = JSON.parse(readFileSync(join(home, "runs", runId, "execution_report.json"), "utf8"));
      if (JSON.stringify(a) !== JSON.stringify(r)) bad("the outbox answer differs from the run's report");
      else if (a.run_id !== runId) bad(`answer for run ${a.run_id}`);
      else if (d.valid) {
        const ok = a.tasks.filter((t) => t.status === "success").length;
        if (!a.summary.completed || a.merge.result !== "success" || ok !== d.tasks)
          bad(`completed=${a.summary.completed} merge=${a.merge.result} success=${ok}/${d.tasks}`);
      } else if (a.summary.completed || a.error?.kind !== "invalid_input")
        bad(`an invalid file answered completed=${a.summary.completed} error=${a.error?.kind}`);
    } catch (error) {
      bad(`unreadable answer or report: ${error.message}`);
    }
  }
  // What every valid run's tasks wrote reached its workspace's branch.
  for (const repo of repos) {
    const files = new Set(
      git(repo, "ls-tree", "-r", "--name-only", "HEAD", "soak").split("\n").filter(Boolean),
    );
    for (const [runId, d] of dropped)
      if (d.valid && d.repo === repo)
        for (let i = 0; i < d.tasks; i++)
          if (!files.has(`soak/${runId}/t${i}.txt`)) {
            lostTaskFiles++;
            if (lostTaskFiles <= 5) failures.push(`${runId}: t${i}'s file is not on ${repo}'s main`);
          }
  }

  // Ledgers: verify-ledger ok, seq 0..n-1 contiguous.
  let ledgerGaps = 0;
  const runDirs = [...dropped].filter(([, d]) => d.valid).map(([id]) => join(home, "runs", id));
  await pool(runDirs, 2, async (dir) => {
    const v = await termorch(box, ["verify-ledger", dir], { timeoutMs: 60_000 });
    let contiguous = false;
    try {
      const seqs = readFileSync(join(dir, "events.jsonl"), "utf8")
        .split("\n")
        .filter(Boolean)
        .map((l) => JSON.parse(l).seq);
      contiguous = seqs.length > 0 && seqs.every((s, i) => s === i);
    } catch {}
    if (v.exitCode !== 0 || !contiguous) {
      ledgerGaps++;
      failures.push(
        `${relative(home, dir)}: ledger ${v.exitCode === 0 ? "seq not contiguous" : v.stderr.trim()}`,
      );
    }
  });

  // The daemon log: JSON lines of this daemon, no error, one claim and one finish per valid run.
  let logProblems = 0;
  const claimed = new Map();
  const finished = new Map();
  for (const line of logText().split("\n").filter(Boolean)) {
    let e;
    try {
      e = JSON.parse(line);
    } catch {
      logProblems++;
      failures.push(`daemon log: not JSON: ${line.slice(0, 120)}`);
      continue;
    }
    if (e.pid !== pid || e.level >= 50) {
      logProblems++;
      failures.push(`daemon log: ${line.slice(0, 200)}`);
    }
    if (e.msg === "claimed") claimed.set(e.run, (claimed.get(e.run) ?? 0) + 1);
    if (e.msg === "run finished") {
      finished.set(e.run, (finished.get(e.run) ?? 0) + 1);
      // An invalid file is a run too: answered with exit 2 (invalid input), never started.
      const valid = dropped.get(e.run)?.valid;
      if (valid ? e.exit_code !== 0 || e.completed !== true : e.exit_code !== 2 || e.completed !== false) {
        logProblems++;
        failures.push(`daemon log: ${e.run} finished with exit ${e.exit_code}`);
      }
    }
  }
  for (const runId of dropped.keys()) {
    const c = claimed.get(runId) ?? 0;
    const f = finished.get(runId) ?? 0;
    if (c !== 1 || f !== 1) {
      logProblems++;
      failures.push(`daemon log: ${runId} claimed ${c}x, finished ${f}x`);
    }
  }
  if (!logText().includes('"msg":"daemon stopped"')) {
    logProblems++;
    failures.push("daemon log: no 'daemon stopped' after SIGTERM");
  }

  // Leftovers. tmux's server (if still up) is not a leak; its sessions would be.
  const server = serverPid(box.socket);
  const lo = repos.map((r) => leftovers(box, r));
  const sessions = box.sessions();
  const worktrees = lo.flatMap((l) => l.worktrees);
  const branches = lo.flatMap((l) => l.branches);
  const processes = processesUnder(box.dir).filter((l) => Number(l.split(" ")[0]) !== server);
  const inboxLeft = existsSync(inbox) ? readdirSync(inbox) : [];
  const tempFiles = strayTempFiles(box);
  for (const [what, list] of Object.entries({
    sessions,
    worktrees,
    branches,
    processes,
    inboxLeft,
    tempFiles,
  }))
    for (const x of list.slice(0, 5)) failures.push(`leftover ${what}: ${x}`);

  const drip = samples.slice(dripStartSample);
  const q = Math.max(1, Math.floor(drip.length / 4));
  // RSS is judged from the first quiet point after warm-up (the burst and one drip segment: V8
  // sizes its heap over the first runs) to the last; descriptors need no warm-up.
  const complete = quietPoints.length === p.segments + 1;
  const warm = quietPoints[1];
  const last = quietPoints.at(-1);
  const rssGrowth = complete ? round(last.rss_mb - warm.rss_mb) : null;
  const fdGrowth = complete ? last.fds - quietPoints[0].fds : null;
  const rssAllowed = complete
    ? round(Math.max(RSS_SLACK_MB[opts.mode], RSS_SLACK_FRACTION * warm.rss_mb))
    : null;
  const valid = [...dropped.values()].filter((d) => d.valid);
  const figures = {
    files_dropped: dropped.size,
    burst_files: p.burst,
    drip_files: dropped.size - p.burst,
    invalid_files: dropped.size - valid.length,
    tasks: valid.reduce((n, d) => n + d.tasks, 0),
    unanswered_runs: unanswered,
    wrong_answers: wrongAnswers,
    lost_task_results: lostTaskFiles,
    ledger_gaps: ledgerGaps,
    daemon_log_problems: logProblems,
    leaked_sessions: sessions.length,
    leaked_worktrees: worktrees.length,
    leaked_branches: branches.length,
    leaked_processes: processes.length,
    leaked_temp_files: tempFiles.length,
    inbox_files_left: inboxLeft.length,
    rss_mb: stats(samples.map((s) => s.rss_kb / 1024)),
    fds: stats(samples.map((s) => s.fds)),
    drip_quarters: drip.length
      ? {
          rss_mb_first_q_median: mb(median(drip.slice(0, q).map((s) => s.rss_kb))),
          rss_mb_last_q_median: mb(median(drip.slice(-q).map((s) => s.rss_kb))),
          fds_first_q_median: median(drip.slice(0, q).map((s) => s.fds)),
          fds_last_q_median: median(drip.slice(-q).map((s) => s.fds)),
          rss_kb_per_100_runs: round(100 * slope(drip.map((s) => [s.answered, s.rss_kb]))),
          fds_per_100_runs: round(100 * slope(drip.map((s) => [s.answered, s.fds]))),
        }
      : null,
    quiet_points: quietPoints,
    rss_growth_mb: rssGrowth,
    rss_growth_allowed_mb: rssAllowed,
    fd_growth: fdGrowth,
    fd_growth_allowed: FD_SLACK,
    rss_growth_beyond_rule: rssGrowth === null ? 1 : rssGrowth > rssAllowed ? 1 : 0,
    fd_growth_beyond_rule: fdGrowth === null ? 1 : fdGrowth > FD_SLACK ? 1 : 0,
    samples: samples.length,
  };
  notes.push(
    `flat rule, at the quiet points (no run in flight; after the burst and after each drip segment): open fds at the end at most ${FD_SLACK} above those after the burst; RSS at the end at most max(${RSS_SLACK_MB[opts.mode]} MB, ${RSS_SLACK_FRACTION * 100}%) above the RSS after the first drip segment (warm-up: the burst and that segment)`,
    `drip: ${round(p.dripMs / 60_000)} min in ${p.segments} segments, a file every ${p.every[0] / 1000}-${p.every[1] / 1000} s of ${p.dripTasks[0]}-${p.dripTasks[1]} tasks, one in ten invalid`,
  );
  box.dispose();
  return finish(opts, {
    campaign: "soak",
    trials: dropped.size,
    figures,
    mustBeZero: [
      "unanswered_runs",
      "wrong_answers",
      "lost_task_results",
      "ledger_gaps",
      "daemon_log_problems",
      "leaked_sessions",
      "leaked_worktrees",
      "leaked_branches",
      "leaked_processes",
      "leaked_temp_files",
      "inbox_files_left",
      "rss_growth_beyond_rule",
      "fd_growth_beyond_rule",
    ],
    failures,
    notes,
    started,
  });
}

/**
 * Files under the sandbox's TMPDIR that termorch keeps by design are its tmux config, the warm
 * worktree pool, and the (empty) folders of worktrees and locks; anything else is a leak.
 */
function strayTempFiles(box) {
  const out = [];
  const walk = (dir) => {
    for (const name of readdirSync(dir)) {
      const path = join(dir, name);
      const rel = relative(box.tmp, path);
      const inUserDir = relative(box.userDir, path);
      if (!inUserDir.startsWith("..")) {
        if (inUserDir === "pool" || /^tmux-[0-9a-f]+\.conf$/.test(inUserDir)) continue;
        if (inUserDir === "worktrees" || inUserDir === "locks") {
          walk(path);
          continue;
        }
      }
      if (rel === relative(box.tmp, box.userDir)) {
        walk(path);
        continue;
      }
      out.push(`${rel}${lstatSync(path).isDirectory() ? "/" : ""}`);
    }
  };
  if (existsSync(box.tmp)) walk(box.tmp);
  return out;
}

async function pool(items, n, fn) {
  const queue = [...items];
  await Promise.all(
    Array.from({ length: n }, async () => {
      while (queue.length) await fn(queue.shift());
    }),
  );
}

const round = (x) => Math.round(x * 10) / 10;
const mb = (kb) => round(kb / 1024);
function median(xs) {
  if (!xs.length) return null;
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}
function stats(xs) {
  if (!xs.length) return null;
  return {
    first: round(xs[0]),
    last: round(xs.at(-1)),
    min: round(Math.min(...xs)),
    max: round(Math.max(...xs)),
  };
}
/** Least-squares slope of y over x. */
function slope(points) {
  const n = points.length;
  if (n < 2) return 0;
  const mx = points.reduce((a, [x]) => a + x, 0) / n;
  const my = points.reduce((a, [, y]) => a + y, 0) / n;
  let num = 0;
  let den = 0;
  for (const [x, y] of points) {
    num += (x - mx) * (y - my);
    den += (x - mx) ** 2;
  }
  return den === 0 ? 0 : num / den;
}

await runAsScript(main);
