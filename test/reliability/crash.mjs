// Campaign 1 of RELIABILITY.md: crash injection. `termorch run` and `termorch daemon` are
// SIGKILLed at each named lifecycle point (src/task/faults.ts, through the fault-injecting CLI)
// and at seeded random moments, and the tmux server is SIGKILLed mid-run; then the run is
// recovered (`termorch resume`, or the daemon started again on its home) and checked:
// nothing ran beyond its attempts, the report is there, whole and in agreement with state.json,
// the user's branch is either untouched or fully merged, the ledger verifies, no gate outlived
// its run, and `termorch clean` leaves nothing behind.
//
//   node test/reliability/crash.mjs [--smoke | --long] [--seed N] [--trials N] [--only K] [--json F]
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import {
  BIN,
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
  trialSeed,
  waitFor,
} from "./lib.mjs";

const AGENT = join(ROOT, "test", "reliability", "agents", "crash-agent.sh");
const GATE = join(ROOT, "test", "reliability", "agents", "crash-gate.sh");
const { Report } = await import(join(ROOT, "dist", "contract", "report.js"));

/**
 * The lifecycle points, in the order a run meets them, each with the task it is armed for
 * (null: a run point). The DAG (see assignmentsOf) reaches every one: B fails its first attempt
 * and is retried, C and D have a tests_cmd gate, every task succeeds in the end and is merged.
 */
const POINTS = [
  ["kill-after-accepted", null],
  ["after-branch-created", "B"],
  ["after-worktree-added", "C"],
  ["kill-after-attempt-recorded", "B"],
  ["kill-after-retry-recorded", "B"],
  ["kill-while-running", "A"],
  ["kill-after-exit", "B"],
  ["kill-in-gate", "C"],
  ["kill-after-status", "A"],
  ["kill-after-status", "D"],
  ["kill-after-integration-commit", null],
  ["kill-after-ref-update", null],
  ["kill-after-worktree-update", null],
  ["kill-after-merge", null],
  ["kill-before-report", null],
  ["kill-after-report", null],
  ["kill-in-clean-up", null],
];
const TASK_IDS = ["A", "B", "C", "D"];

/** The trial plan of a campaign run: every point by the CLI and by the daemon, then random kills and tmux kills. */
function planTrials(opts) {
  const smoke = opts.mode === "smoke";
  const plan = [];
  const pointIds = POINTS.map(([p, t]) => (t ? `${p}:${t}` : p));
  if (smoke) {
    // A handful covering a task point, a gate, the merge and the report, by both drivers.
    for (const f of ["kill-after-exit:B", "kill-in-gate:C", "kill-after-ref-update", "kill-after-report"])
      plan.push({ kind: "point", driver: "run", fault: f });
    plan.push({ kind: "point", driver: "daemon", fault: "kill-after-merge" });
    plan.push({ kind: "random", driver: "run" });
    plan.push({ kind: "tmux", driver: "run", alsoDriver: true });
  } else {
    for (const f of pointIds) plan.push({ kind: "point", driver: "run", fault: f });
    for (const f of pointIds) plan.push({ kind: "point", driver: "daemon", fault: f });
    for (let i = 0; i < 52; i++) plan.push({ kind: "random", driver: i % 3 === 2 ? "daemon" : "run" });
    for (let i = 0; i < 16; i++) plan.push({ kind: "tmux", driver: "run", alsoDriver: i % 2 === 1 });
  }
  const n = opts.trials ?? plan.length;
  return Array.from({ length: n }, (_, k) => plan[k % plan.length]);
}

/** The diamond A → (B, C) → D; B fails its first attempt (retries 1); C and D are gated by tests_cmd. */
function assignmentsOf(runId, trialDir, repo, rnd) {
  const counterDir = join(trialDir, "counter");
  mkdirSync(counterDir, { recursive: true });
  const sleep = () => (0.05 + rnd.next() * 0.25).toFixed(2);
  const task = (id, deps, extra = {}, env = {}) => ({
    id,
    agent: "crash",
    context_path: "ctx/task.md",
    command: ["bash", AGENT],
    dependencies: deps,
    env: { COUNTER_DIR: counterDir, SLEEP: sleep(), ...env },
    ...extra,
  });
  const gate = { success_criteria: { tests_cmd: `bash ${GATE}` } };
  return {
    run_id: runId,
    tasks: [
      task("A", []),
      task("B", ["A"], { retries: 1 }, { FAIL_ATTEMPTS: "1" }),
      task("C", ["A"], gate, { GATE_SLEEP: sleep() }),
      task("D", ["B", "C"], { ...gate, retries: 1 }, { GATE_SLEEP: sleep() }),
    ],
    environment: { workspace_dir: repo, resource_limits: { max_parallel: 2 } },
  };
}

/** Max attempts per task (retries + 1), as the assignments say. */
function maxAttemptsOf(body) {
  return Object.fromEntries(body.tasks.map((t) => [t.id, (t.retries ?? 0) + 1]));
}

const counts = (dir) =>
  Object.fromEntries(
    TASK_IDS.map((id) => {
      const f = join(dir, "counter", id);
      return [id, existsSync(f) ? readFileSync(f, "utf8").split("\n").filter(Boolean).length : 0];
    }),
  );

/** Gate processes (crash-gate.sh or its `crashgate-sleep`) still alive in the sandbox. */
const gateProcesses = (box) =>
  processesUnder(box.dir).filter((p) => /crash-gate\.sh|crashgate-sleep/.test(p));

const readJson = (file) => {
  try {
    return { ok: true, value: JSON.parse(readFileSync(file, "utf8")) };
  } catch (error) {
    return { ok: false, problem: existsSync(file) ? `not JSON: ${error.message}` : "missing" };
  }
};

/** Polls `check` every 20 ms until it holds (`found` resolves) or `stop()`. */
function polling(check) {
  let timer;
  const found = new Promise((resolveFound) => {
    timer = setInterval(() => {
      if (check()) {
        clearInterval(timer);
        resolveFound();
      }
    }, 20);
  });
  return { found, stop: () => clearInterval(timer) };
}

/** termorch(...) whose `settled` says whether the process has ended. */
function started(box, args, o = {}) {
  const p = termorch(box, args, o);
  p.settled = false;
  void p.then(() => {
    p.settled = true;
  });
  return p;
}

async function startDaemon(box, home, fault) {
  const log = join(home, "logs", "termorch.log");
  // The home's log is shared with the daemons before this one: ready once a new line says so.
  const readyLines = () =>
    existsSync(log) ? readFileSync(log, "utf8").split("watching the inbox").length - 1 : 0;
  const before = readyLines();
  const d = started(box, ["daemon", "--home", home], { fault, timeoutMs: 180_000 });
  await waitFor(() => readyLines() > before || d.settled, "the daemon to watch its inbox", 60_000);
  // In an object: an async function returning the process's promise would wait for its end.
  return { d };
}

/** Runs one trial; returns what the figures are made of. */
async function trial(k, spec, seed) {
  const rnd = prng(seed);
  const box = sandbox(`crash${k}`);
  const notes = [];
  const exits = [];
  try {
    const repo = makeRepo(box.dir);
    const base = git(repo, "rev-parse", "HEAD").trim();
    const runId = `crash${k}`;
    const body = assignmentsOf(runId, box.dir, repo, rnd);
    let runDir;
    let recovered;
    if (spec.driver === "run") {
      runDir = join(box.dir, "run");
      mkdirSync(runDir);
      const file = join(runDir, "assignments.json");
      writeFileSync(file, JSON.stringify(body, null, 2));
      const args = ["run", file, "--max-parallel", "2"];
      let first;
      if (spec.kind === "point") {
        first = await termorch(box, args, { fault: spec.fault });
      } else if (spec.kind === "random") {
        const child = started(box, args);
        const delay = rnd.int(200, 6000);
        const timer = setTimeout(() => child.child.kill("SIGKILL"), delay);
        first = await child;
        clearTimeout(timer);
        notes.push(`delay ${delay} ms`);
      } else {
        // tmux: once an agent runs, its server dies (and, in the variant, the driver with it).
        const child = started(box, args);
        const counterDir = join(box.dir, "counter");
        await waitFor(
          () => readdirSync(counterDir).length > 0 || child.settled,
          "an agent to start",
          60_000,
          10,
        );
        await new Promise((r) => setTimeout(r, rnd.int(0, 400)));
        const pid = serverPid(box.socket);
        if (pid) process.kill(pid, "SIGKILL");
        notes.push(pid ? "tmux server killed" : "no tmux server to kill");
        if (spec.alsoDriver) child.child.kill("SIGKILL");
        first = await child;
      }
      exits.push(first.signal ?? first.exitCode);
      const state = readJson(join(runDir, "state.json"));
      if (!state.ok) {
        // Killed before the run had a state.json: nothing to resume and nothing may have run
        // yet; the user's recovery is to run the file again.
        if (Object.values(counts(box.dir)).some((n) => n > 0))
          notes.push(`agents ran without a state.json: ${JSON.stringify(counts(box.dir))}`);
        const r = await termorch(box, args);
        exits.push(r.exitCode);
        recovered = `not started; run again (exit ${r.exitCode})`;
      } else if (state.value.phase === "reported") {
        recovered = first.signal ? "reported before the kill" : `ran to its end (exit ${first.exitCode})`;
      } else {
        const r = await termorch(box, ["resume", runDir]);
        exits.push(r.exitCode);
        recovered = `resumed (exit ${r.exitCode})`;
        if (r.exitCode === 70 || /internal|\n\s+at /.test(r.stderr))
          notes.push(`resume: ${r.stderr.trim().slice(0, 300)}`);
      }
    } else {
      const home = join(box.dir, "home");
      runDir = join(home, "runs", runId);
      const outbox = join(home, "outbox", `${runId}.json`);
      const fault = spec.kind === "point" ? spec.fault : null;
      const { d } = await startDaemon(box, home, fault);
      writeFileSync(join(home, "inbox", `${runId}.json`), JSON.stringify(body));
      // Until the daemon dies (the fault, or the random kill), or answers (then it is killed).
      const answerSeen = polling(() => existsSync(outbox));
      const delay = spec.kind === "random" ? rnd.int(300, 7000) : null;
      if (delay !== null) notes.push(`delay ${delay} ms`);
      // Some fault points come after the answer (the clean-up): waited for.
      const timer = setTimeout(() => d.child.kill("SIGKILL"), delay ?? 120_000);
      await Promise.race([d, ...(spec.kind === "random" ? [answerSeen.found] : [])]);
      answerSeen.stop();
      clearTimeout(timer);
      // Whatever happened, this daemon goes (SIGKILL if the fault did not), then one starts again.
      d.child.kill("SIGKILL");
      const first = await d;
      exits.push(first.signal ?? first.exitCode);
      const { d: again } = await startDaemon(box, home, null);
      // A daemon killed between reserving runs/<id> and moving the file in leaves that folder
      // empty: the next one claims the file as <id>-2 (by design), and answers under that name.
      const answer = await waitFor(
        () => readdirSync(join(home, "outbox")).find((f) => f.startsWith(runId)),
        "the restarted daemon's answer",
        120_000,
      ).catch(() => null);
      const answered = answer !== null;
      if (answered && answer !== `${runId}.json`) {
        notes.push(`answered as ${answer}`);
        runDir = join(home, "runs", answer.replace(/\.json$/, ""));
      }
      // Then it is stopped the way a user does.
      await waitFor(
        () => {
          const s = readJson(join(runDir, "state.json"));
          return !s.ok || s.value.phase === "reported";
        },
        "the run to be reported",
        60_000,
      ).catch(() => {});
      // Stopping detaches: a run still in its clean-up finishes it first.
      again.child.kill("SIGTERM");
      const second = await again;
      exits.push(second.signal ?? second.exitCode);
      recovered = answered ? "answered after restart" : "NOT answered after restart";
      if (!answered) {
        const ls = (d) => (existsSync(d) ? readdirSync(d).join(",") : "-");
        notes.push(
          `inbox [${ls(join(home, "inbox"))}] runs [${ls(join(home, "runs"))}] run dir [${ls(runDir)}] outbox [${ls(join(home, "outbox"))}]`,
        );
        const log = join(home, "logs", "termorch.log");
        if (existsSync(log))
          notes.push(
            `daemon log, last lines:\n${readFileSync(log, "utf8").trim().split("\n").slice(-8).join("\n")}`,
          );
      }
    }
    return { ...(await check(box, repo, base, runDir, body, recovered, spec)), notes, exits };
  } finally {
    box.dispose();
  }
}

/** The figures of one trial, once its run has been recovered. */
async function check(box, repo, base, runDir, body, recovered, spec) {
  const problems = [];
  const f = {
    beyondAttempts: 0,
    reportBad: 0,
    branchBad: 0,
    ledgerBad: 0,
    gatesLeft: 0,
    leftovers: 0,
    notSucceeded: 0,
    outcome: recovered,
    merge: null,
  };
  const max = maxAttemptsOf(body);
  const runs = counts(box.dir);
  const gates = gateProcesses(box);
  f.gatesLeft = gates.length;
  if (gates.length) problems.push(`gate processes left: ${gates.join("; ")}`);

  const started = existsSync(join(runDir, "state.json"));
  const reportFile = join(runDir, "execution_report.json");
  let report = null;
  if (!started) {
    // Nothing started: nothing may have run, nor changed.
    if (Object.values(runs).some((n) => n > 0)) {
      f.beyondAttempts += 1;
      problems.push(`agents ran without a state.json: ${JSON.stringify(runs)}`);
    }
  } else {
    const r = readJson(reportFile);
    const state = readJson(join(runDir, "state.json"));
    const parsed = r.ok ? Report.safeParse(r.value) : null;
    if (!r.ok) problems.push(`report ${r.problem}`);
    else if (!parsed.success)
      problems.push(`report does not match its schema: ${parsed.error.message.slice(0, 300)}`);
    else report = parsed.data;
    if (report && state.ok) {
      const s = state.value;
      if (s.phase !== "reported") problems.push(`state.json phase ${s.phase} beside a report`);
      if (s.exit_code !== report.exit_code)
        problems.push(`state exit_code ${s.exit_code} vs report ${report.exit_code}`);
      for (const t of report.tasks) {
        const st = s.tasks.find((x) => x.id === t.id);
        if (!st || st.state !== t.status || st.attempts !== t.attempts)
          problems.push(`task ${t.id}: report ${t.status}/${t.attempts}, state ${st?.state}/${st?.attempts}`);
      }
    } else if (report) problems.push("state.json unreadable beside a report");
    if (problems.some((p) => /report|state/.test(p))) f.reportBad = 1;
    for (const id of TASK_IDS) {
      const reported = report?.tasks.find((t) => t.id === id)?.attempts ?? max[id];
      if (runs[id] > max[id] || runs[id] > reported) {
        f.beyondAttempts += 1;
        problems.push(`task ${id} ran ${runs[id]} times (max attempts ${max[id]}, reported ${reported})`);
      }
    }
    const ledger = spawnSync(process.execPath, [BIN, "verify-ledger", runDir], {
      env: box.env,
      encoding: "utf8",
    });
    if (ledger.status !== 0) {
      f.ledgerBad = 1;
      problems.push(
        `verify-ledger exit ${ledger.status}: ${(ledger.stdout + ledger.stderr).trim().slice(0, 300)}`,
      );
    }
  }
  f.merge = report?.merge.result ?? null;
  const notDone = report?.tasks.filter((t) => t.status !== "success") ?? [];
  if (notDone.length)
    f.notDone = notDone.map((t) => `${t.id} ${t.status} (${t.reason}): ${String(t.detail).slice(0, 200)}`);
  // Only the driver died: the agents ran on in tmux and every task ends as it would have
  // (DESIGN: a restart finalises tasks from their exit records and continues; a gate cut off
  // is run again). Killing the tmux server loses the agents: tasks may fail there.
  if (spec.kind !== "tmux" && notDone.length) {
    f.notSucceeded = 1;
    problems.push(`tasks did not succeed after the driver was killed: ${f.notDone.join("; ")}`);
  }

  // The user's branch: untouched at the old commit, or at the merged commit; clean either way.
  const head = git(repo, "rev-parse", "refs/heads/main").trim();
  const porcelain = git(repo, "status", "--porcelain").trim();
  const indexTree = git(repo, "write-tree").trim();
  const headTree = git(repo, "rev-parse", "HEAD^{tree}").trim();
  const merged = report?.merge.result === "success" && head === report.merge.result_commit;
  const untouched = head === base && report?.merge.result !== "success";
  if (porcelain !== "" || indexTree !== headTree || !(merged || untouched)) {
    f.branchBad = 1;
    problems.push(
      `branch main at ${head.slice(0, 10)} (base ${base.slice(0, 10)}, report ${report?.merge.result}/${report?.merge.result_commit?.slice(0, 10)}), status "${porcelain}", index ${indexTree === headTree ? "=" : "≠"} HEAD`,
    );
  }
  if (merged) {
    const files = git(repo, "ls-tree", "--name-only", "HEAD").split("\n");
    const missing = TASK_IDS.filter((id) => !files.includes(`out-${id}.txt`));
    if (missing.length) {
      f.branchBad = 1;
      problems.push(`merged without ${missing.join(", ")}`);
    }
  }

  // A task branch holding commits no other ref holds: plain `clean` keeps it by design (README:
  // never a branch with unmerged commits unless --force), that of a task that did not succeed,
  // and, when the run merged nothing, that of any task. Those are excused from plain `clean`,
  // and `clean --force` must then remove them: nothing may be left that clean cannot remove.
  const keptByDesign = new Set();
  const clean = (...flags) => {
    const c = spawnSync(process.execPath, [BIN, "clean", ...flags, runDir], {
      env: box.env,
      encoding: "utf8",
    });
    if (c.status !== 0)
      problems.push(
        `clean ${flags.join(" ")} exit ${c.status}: ${(c.stdout + c.stderr).trim().slice(0, 300)}`,
      );
    return `${c.stdout}\n${c.stderr}`;
  };
  if (started) {
    const failedBranches = new Set(notDone.map((t) => t.branch).filter(Boolean));
    const mergedNothing = report?.merge.result !== "success";
    for (const m of clean().matchAll(/kept branch (\S+): .*no other ref contains/g))
      if (mergedNothing || failedBranches.has(m[1])) keptByDesign.add(`refs/heads/${m[1]}`);
  }
  const left = leftovers(box, repo);
  left.branches = left.branches.filter((b) => !keptByDesign.has(b));
  if (keptByDesign.size > 0) {
    clean("--force");
    const forced = leftovers(box, repo);
    left.branches.push(
      ...forced.branches.filter((b) => keptByDesign.has(b)).map((b) => `${b} (after clean --force)`),
    );
  }
  const n = left.sessions.length + left.worktrees.length + left.branches.length + left.processes.length;
  f.leftovers = n;
  if (n) problems.push(`left after clean: ${JSON.stringify(left)}`);
  return { ...f, problems };
}

async function main(opts) {
  const started = Date.now();
  const plan = planTrials(opts);
  const figures = {
    runs_beyond_attempts: 0,
    reports_missing_or_torn: 0,
    user_branch_not_clean_or_merged: 0,
    ledger_verification_failures: 0,
    gate_processes_left: 0,
    leftovers_after_clean: 0,
    tasks_not_succeeded_after_driver_kill: 0,
    trials_by_point: {},
    outcomes: {},
    merge_results: {},
    exit_codes_seen: {},
  };
  const failures = [];
  const bump = (o, key) => {
    o[key] = (o[key] ?? 0) + 1;
  };
  const ks = opts.only !== null ? [opts.only] : plan.map((_, k) => k);
  for (const k of ks) {
    const spec = plan[k % plan.length];
    const label = `${spec.driver}:${spec.kind === "point" ? spec.fault : spec.kind === "tmux" ? `tmux${spec.alsoDriver ? "+driver" : ""}` : "random"}`;
    const t0 = Date.now();
    let r;
    try {
      r = await trial(k, spec, trialSeed(opts.seed, k));
    } catch (error) {
      r = {
        problems: [`trial crashed: ${error.stack ?? error}`],
        outcome: "harness error",
        exits: [],
        notes: [],
      };
      figures.reports_missing_or_torn += 1;
    }
    bump(figures.trials_by_point, label);
    bump(figures.outcomes, r.outcome);
    bump(figures.merge_results, String(r.merge ?? "none"));
    for (const e of r.exits) bump(figures.exit_codes_seen, String(e));
    figures.runs_beyond_attempts += r.beyondAttempts ?? 0;
    figures.reports_missing_or_torn += r.reportBad ?? 0;
    figures.user_branch_not_clean_or_merged += r.branchBad ?? 0;
    figures.ledger_verification_failures += r.ledgerBad ?? 0;
    figures.gate_processes_left += r.gatesLeft ?? 0;
    figures.leftovers_after_clean += r.leftovers ?? 0;
    figures.tasks_not_succeeded_after_driver_kill += r.notSucceeded ?? 0;
    const line = `trial ${k} ${label}: ${r.outcome}, merge ${r.merge ?? "none"}, exits ${r.exits.join("/")}${r.notes.length ? ` (${r.notes.join("; ")})` : ""} ${((Date.now() - t0) / 1000).toFixed(1)} s${r.notDone?.length ? `\n    not done: ${r.notDone.join("\n    not done: ")}` : ""}`;
    console.log(r.problems.length ? `${line}\n  ${r.problems.join("\n  ")}` : line);
    if (r.problems.length) failures.push({ trial: k, point: label, problems: r.problems });
  }
  return finish(opts, {
    campaign: "crash",
    trials: ks.length,
    figures,
    mustBeZero: [
      "runs_beyond_attempts",
      "reports_missing_or_torn",
      "user_branch_not_clean_or_merged",
      "ledger_verification_failures",
      "gate_processes_left",
      "leftovers_after_clean",
      "tasks_not_succeeded_after_driver_kill",
    ],
    failures,
    notes: [
      "DAG per trial: A → (B, C) → D; B fails its first attempt (retries 1), C and D run a tests_cmd gate",
      "point trials: SIGKILL at a named point (src/task/faults.ts) by `termorch run` then `termorch resume`, or by the daemon then a restarted daemon",
      "random trials: SIGKILL of `termorch run` or the daemon after a seeded delay; tmux trials: SIGKILL of the tmux server once an agent runs (+driver: and of the driver, then resume)",
    ],
    started,
  });
}

await runAsScript(main);
