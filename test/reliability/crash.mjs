// Campaign 1 of RELIABILITY.md: crash injection. `termorch run` and `termorch daemon` are
// SIGKILLed at each named lifecycle point (src/task/faults.ts, through the fault-injecting CLI)
// and at seeded random moments, and the tmux server is SIGKILLed mid-run, also inside the redo of
// a task whose result conflicts in the merge (merge.on_conflict "redo") and, in the "bisect"
// flavour, inside the bisect of a red run-level gate and the fix of its culprit
// (merge.on_gate_failure "bisect_and_fix"); then the run is
// recovered (`termorch resume`, or the daemon started again on its home) and checked:
// nothing ran beyond its attempts nor any attempt twice, the report is there, whole and in
// agreement with state.json, the user's branch is either untouched or fully merged (with the
// redo's resolution), a failed redo put its task's earlier result back, the ledger verifies, no
// gate outlived its run, and `termorch clean` leaves nothing behind.
//
//   node test/reliability/crash.mjs [--smoke | --long] [--seed N] [--trials N] [--from K] [--only K] [--json F]
//
// `--from K` starts at trial K (`--trials N` then counts from there), so that a part of the plan
// (the random kills, the redo flavour) can be run alone with the trial numbers of the whole.
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
const { readRunStateFile } = await import(join(ROOT, "dist", "fs", "run-state-file.js"));

/**
 * The lifecycle points, in the order a run meets them, each with the task it is armed for
 * (null: a run point; `E@2`: only in E's attempt 2, its redo). The DAG (see assignmentsOf)
 * reaches every one: B fails its first attempt and is retried, C and D have a tests_cmd gate, E
 * conflicts with A and is redone in the merge stage, every task succeeds in the end and is merged.
 */
const POINTS = [
  ["kill-after-accepted", null],
  ["after-branch-created", "B"],
  ["after-worktree-added", "C"],
  ["kill-after-attempt-recorded", "B"],
  ["kill-after-retry-recorded", "B"],
  ["kill-while-running", "A"],
  ["kill-after-exit", "B"],
  ["kill-after-feedback", "B"],
  ["kill-after-next-chosen", "B"],
  ["kill-in-gate", "C"],
  ["kill-after-status", "A"],
  ["kill-after-status", "D"],
  ["kill-after-redo-recorded", "E"],
  ["kill-after-redo-prepared", "E"],
  ["kill-after-attempt-recorded", "E@2"],
  ["kill-while-running", "E@2"],
  ["kill-after-exit", "E@2"],
  ["kill-after-status", "E@2"],
  ["kill-after-integration-commit", null],
  ["kill-after-ref-update", null],
  ["kill-after-worktree-update", null],
  ["kill-after-merge", null],
  ["kill-before-report", null],
  ["kill-after-report", null],
  ["kill-in-clean-up", null],
];
/**
 * The points of the "redo-halt" flavour, where E's redo resolves wrongly, its gate says so, and
 * the merge halts once E's earlier result is put back: the putting back, and a redo cut off.
 */
const HALT_POINTS = [
  ["kill-while-running", "E@2"],
  ["kill-after-redo-restoring", "E"],
];
/**
 * The points of the "bisect" flavour, where C's result turns the run-level gate red: the bisect
 * finds it and C is fixed on the integration before it. A probe cut off, the fix chosen, its
 * branch moved, its attempt, the gate on the merge with it.
 */
const BISECT_POINTS = [
  ["kill-in-probe", null],
  ["kill-after-fix-recorded", "C"],
  ["kill-after-redo-prepared", "C"],
  ["kill-while-running", "C@2"],
  ["kill-in-probe", "fix"],
];
const TASK_IDS = ["A", "B", "C", "D", "E"];

/**
 * The trial plan of a campaign run: every point by the CLI and by the daemon (and those of the
 * "redo-halt" flavour), then random kills (from the start, then near the merge; a quarter of them
 * in that flavour) and tmux kills.
 */
function planTrials(opts) {
  const smoke = opts.mode === "smoke";
  const plan = [];
  const ids = (points) => points.map(([p, t]) => (t ? `${p}:${t}` : p));
  const halt = "redo-halt";
  const bisect = "bisect";
  if (smoke) {
    // A handful covering a task point, a gate, a redo, the merge and the report, by both drivers.
    for (const f of [
      "kill-after-exit:B",
      "kill-after-next-chosen:B",
      "kill-in-gate:C",
      "kill-while-running:E@2",
      "kill-after-ref-update",
      "kill-after-report",
    ])
      plan.push({ kind: "point", driver: "run", fault: f });
    plan.push({ kind: "point", driver: "daemon", fault: "kill-after-merge" });
    plan.push({ kind: "point", driver: "run", fault: "kill-after-fix-recorded:C", flavour: bisect });
    plan.push({ kind: "random", driver: "run" });
    plan.push({ kind: "tmux", driver: "run", alsoDriver: true });
  } else {
    for (const f of ids(POINTS)) plan.push({ kind: "point", driver: "run", fault: f });
    for (const f of ids(POINTS)) plan.push({ kind: "point", driver: "daemon", fault: f });
    for (const driver of ["run", "daemon"])
      for (const f of ids(HALT_POINTS)) plan.push({ kind: "point", driver, fault: f, flavour: halt });
    for (const driver of ["run", "daemon"])
      for (const f of ids(BISECT_POINTS)) plan.push({ kind: "point", driver, fault: f, flavour: bisect });
    for (let i = 0; i < 60; i++)
      plan.push({
        kind: "random",
        driver: i % 3 === 2 ? "daemon" : "run",
        ...(i % 4 === 3 ? { flavour: halt } : {}),
      });
    for (let i = 0; i < 24; i++)
      plan.push({
        kind: "random",
        at: "merge",
        driver: i % 3 === 2 ? "daemon" : "run",
        ...(i % 4 === 3 ? { flavour: halt } : {}),
      });
    for (let i = 0; i < 16; i++) plan.push({ kind: "tmux", driver: "run", alsoDriver: i % 2 === 1 });
    // The tmux server killed once E's redo runs: that attempt is lost, and its result put back.
    for (let i = 0; i < 4; i++)
      plan.push({ kind: "tmux", driver: "run", alsoDriver: i % 2 === 1, at: "redo" });
    // Random kills near the merge of the "bisect" flavour: in a probe, the fix, the merge after it.
    for (let i = 0; i < 8; i++)
      plan.push({ kind: "random", at: "merge", driver: i % 3 === 2 ? "daemon" : "run", flavour: bisect });
  }
  return plan;
}

/**
 * The diamond A → (B, C) → D, and E alone; B fails its first attempt (retries 1); C and D are
 * gated by tests_cmd. A and E write line 2 of shared.txt: E, merged after A (dependency order,
 * ids breaking ties), conflicts and is redone (merge.on_conflict "redo"); the run's tests_cmd
 * wants both lines. Flavour "redo-halt": E's redo overwrites A's line and its own gate, from its
 * second attempt on, wants A's line: the redo fails and the merge halts. Flavour "bisect": C
 * writes BROKEN, the run's tests_cmd refuses it (and checks nothing else, so that a probe of the
 * first k tasks is red only once C is in), the bisect finds C, and C's fix (on_gate_failure
 * "bisect_and_fix") writes its file right: merged.
 */
function assignmentsOf(runId, trialDir, repo, rnd, flavour) {
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
  const halt = flavour === "redo-halt";
  const bisect = flavour === "bisect";
  const eGate = halt
    ? { success_criteria: { tests_cmd: '{ [ "$TERMORCH_ATTEMPT" = 1 ] || grep -qx A shared.txt; }' } }
    : {};
  return {
    run_id: runId,
    tasks: [
      task("A", [], {}, { SHARED: "1" }),
      task("B", ["A"], { retries: 1 }, { FAIL_ATTEMPTS: "1" }),
      task("C", ["A"], gate, { GATE_SLEEP: sleep(), ...(bisect ? { BREAK: "1" } : {}) }),
      task("D", ["B", "C"], { ...gate, retries: 1 }, { GATE_SLEEP: sleep() }),
      task("E", [], eGate, { SHARED: "1", ...(halt ? { RESOLVE: "wrong" } : {}) }),
    ],
    environment: { workspace_dir: repo, resource_limits: { max_parallel: 2 } },
    success_criteria: {
      tests_cmd: bisect
        ? "if grep -qx BROKEN out-*.txt 2>/dev/null; then echo 'gate failed: a task wrote BROKEN'; exit 1; fi"
        : "grep -qx A shared.txt && grep -qx E shared.txt",
    },
    mode: { merge: { on_conflict: "redo", ...(bisect ? { on_gate_failure: "bisect_and_fix" } : {}) } },
  };
}

/**
 * Max attempts per task, as the assignments say: retries + 1, and with on_conflict "redo" the
 * redo_attempts (default 1) a conflict may add in the merge stage, and with on_gate_failure
 * "bisect_and_fix" the gate_fix_attempts (default 2) of a culprit.
 */
function maxAttemptsOf(body) {
  const merge = body.mode?.merge ?? {};
  const redos = merge.on_conflict === "redo" ? (merge.redo_attempts ?? 1) : 0;
  const fixes = merge.on_gate_failure === "bisect_and_fix" ? (merge.gate_fix_attempts ?? 2) : 0;
  return Object.fromEntries(body.tasks.map((t) => [t.id, (t.retries ?? 0) + 1 + redos + fixes]));
}

/** The starts each task's agent counted: [{attempt, redo}] in the order they began (a fix is a redo too). */
const starts = (dir) =>
  Object.fromEntries(
    TASK_IDS.map((id) => {
      const f = join(dir, "counter", id);
      const lines = existsSync(f) ? readFileSync(f, "utf8").split("\n").filter(Boolean) : [];
      return [
        id,
        lines.map((l) => {
          const [attempt, , kind] = l.split(" ");
          return { attempt: Number(attempt), redo: kind === "redo" || kind === "fix", fix: kind === "fix" };
        }),
      ];
    }),
  );
const counts = (dir) => Object.fromEntries(Object.entries(starts(dir)).map(([id, s]) => [id, s.length]));

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

/**
 * The step of a redo under way in the run's state (journal included) once its driver died, or
 * null: the figures say how many kills landed inside a redo.
 */
function redoStep(runDir) {
  const read = existsSync(join(runDir, "state.json")) ? readRunStateFile(runDir) : null;
  if (!read?.ok || read.state.phase !== "running") return null;
  const t = read.state.tasks.find((x) => x.redo.progress);
  if (!t) return null;
  const redo = t.redo.progress;
  const launched = redo.step === "prepared" && t.current.dir !== null ? ", its attempt recorded" : "";
  return `${t.id}'s redo ${redo.n} ${redo.step}${launched}`;
}

/**
 * Waits for D, the last task before the merge stage, to start (or `over()`): a random kill
 * counted from there lands in the merge, and in E's redo, far more often than one counted from
 * the run's start, whose few hundred milliseconds of redo a delay of seconds seldom hits.
 */
const mergeNear = (box, over) => waitFor(() => counts(box.dir).D > 0 || over(), "D to start", 60_000, 10);

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
    writeFileSync(join(repo, "shared.txt"), "one\ntwo\nthree\n");
    git(repo, "add", "shared.txt");
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "shared");
    const base = git(repo, "rev-parse", "HEAD").trim();
    const runId = `crash${k}`;
    const body = assignmentsOf(runId, box.dir, repo, rnd, spec.flavour);
    let runDir;
    let recovered;
    let killedIn = null;
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
        if (spec.at === "merge") await mergeNear(box, () => child.settled);
        const delay = spec.at === "merge" ? rnd.int(0, 1200) : rnd.int(200, 6000);
        const timer = setTimeout(() => child.child.kill("SIGKILL"), delay);
        first = await child;
        clearTimeout(timer);
        notes.push(`delay ${delay} ms${spec.at === "merge" ? " after D started" : ""}`);
      } else {
        // tmux: once an agent runs (or E's redo), its server dies (and, in the variant, the driver with it).
        const child = started(box, args);
        const counterDir = join(box.dir, "counter");
        const running =
          spec.at === "redo"
            ? () => starts(box.dir).E.some((s) => s.redo)
            : () => readdirSync(counterDir).length > 0;
        await waitFor(() => running() || child.settled, "an agent to start", 60_000, 10);
        await new Promise((r) => setTimeout(r, rnd.int(0, 400)));
        const pid = serverPid(box.socket);
        if (pid) process.kill(pid, "SIGKILL");
        notes.push(pid ? "tmux server killed" : "no tmux server to kill");
        if (spec.alsoDriver) child.child.kill("SIGKILL");
        first = await child;
      }
      exits.push(first.signal ?? first.exitCode);
      killedIn = redoStep(runDir);
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
      if (spec.at === "merge") await mergeNear(box, () => d.settled || existsSync(outbox));
      const delay =
        spec.kind === "random" ? (spec.at === "merge" ? rnd.int(0, 1200) : rnd.int(300, 7000)) : null;
      if (delay !== null) notes.push(`delay ${delay} ms${spec.at === "merge" ? " after D started" : ""}`);
      // Some fault points come after the answer (the clean-up): waited for.
      const timer = setTimeout(() => d.child.kill("SIGKILL"), delay ?? 120_000);
      await Promise.race([d, ...(spec.kind === "random" ? [answerSeen.found] : [])]);
      answerSeen.stop();
      clearTimeout(timer);
      // Whatever happened, this daemon goes (SIGKILL if the fault did not), then one starts again.
      d.child.kill("SIGKILL");
      const first = await d;
      exits.push(first.signal ?? first.exitCode);
      killedIn = redoStep(runDir);
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
    if (killedIn) notes.push(`killed in ${killedIn}`);
    return { ...(await check(box, repo, base, runDir, body, recovered, spec)), notes, exits, killedIn };
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
    mergeBad: 0,
    outcome: recovered,
    merge: null,
  };
  const max = maxAttemptsOf(body);
  const runs = counts(box.dir);
  const seen = starts(box.dir);
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
    const firstOnly = Object.fromEntries(body.tasks.map((t) => [t.id, (t.retries ?? 0) + 1]));
    for (const id of TASK_IDS) {
      const reported = report?.tasks.find((t) => t.id === id)?.attempts ?? max[id];
      const numbers = seen[id].map((s) => s.attempt);
      const twice = numbers.filter((a, i) => numbers.indexOf(a) !== i);
      // The count alone would pass an attempt run twice in place of a later one never run.
      const why = [];
      if (runs[id] > max[id] || runs[id] > reported) why.push(`ran ${runs[id]} times`);
      if (twice.length) why.push(`attempt ${[...new Set(twice)].join(", ")} ran more than once`);
      for (const s of seen[id]) {
        if (s.attempt > reported) why.push(`attempt ${s.attempt} ran, beyond the ${reported} reported`);
        // Beyond retries + 1, only a redo (or a fix) may run, and the report must know it (merge.redone).
        if (!s.redo && s.attempt > firstOnly[id])
          why.push(`attempt ${s.attempt} ran without a conflict or fix section`);
        if (s.redo && report && !report.merge.redone.some((r) => r.task === id && r.attempt === s.attempt))
          why.push(`attempt ${s.attempt} ran as a redo the report's merge.redone lacks`);
      }
      if (why.length) {
        f.beyondAttempts += 1;
        problems.push(
          `task ${id}: ${why.join("; ")} (starts ${numbers.join(",")}, max attempts ${max[id]}, reported ${reported})`,
        );
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

  // The redo: E, merged after A, conflicts with it. Merged, E's redo resolved it and both lines
  // are there; in "redo-halt", E's redo failed, its earlier result is back and nothing merged.
  const mergeProblems = [];
  const allRedone = report?.merge.redone ?? [];
  const redone = allRedone.filter((r) => r.cause !== "gate");
  const fixes = allRedone.filter((r) => r.cause === "gate");
  const e = report?.tasks.find((t) => t.id === "E");
  if (merged) {
    const lines = git(repo, "show", "HEAD:shared.txt").split("\n");
    if (!lines.includes("A") || !lines.includes("E"))
      mergeProblems.push(`merged shared.txt lacks A's or E's line: ${JSON.stringify(lines.join("|"))}`);
    const r = redone[0];
    if (
      redone.length !== 1 ||
      r.task !== "E" ||
      r.outcome !== "resolved" ||
      r.attempt !== 2 ||
      !r.conflicted_with.includes("A") ||
      r.commit !== e?.commit
    )
      mergeProblems.push(`merged, but merge.redone is ${JSON.stringify(redone).slice(0, 400)}`);
  }
  // Only the driver died: the run ends as it would have, merged or, in "redo-halt", halted. The
  // tmux server's death may fail tasks and E's redo (a lost attempt): then the merge may end
  // either way, and a halt on the conflict is checked as any other.
  const halt = spec.flavour === "redo-halt";
  if (report && spec.kind !== "tmux" && !halt && !merged)
    mergeProblems.push(
      `the merge did not succeed: ${report.merge.result} (exit ${report.exit_code}): ${report.merge.reason}`,
    );
  if (report && (report.merge.result === "conflict" || (halt && spec.kind !== "tmux"))) {
    const r = redone[0];
    if (report.merge.result !== "conflict" || report.exit_code !== 3)
      mergeProblems.push(`merge ${report.merge.result} (exit ${report.exit_code}), not a conflict (exit 3)`);
    if (redone.length !== 1 || r.task !== "E" || r.outcome !== "failed")
      mergeProblems.push(`merge.redone is ${JSON.stringify(redone).slice(0, 400)}, not E's failed redo`);
    if (e?.status !== "success" || !e.commit || e.commit !== r?.before_commit)
      mergeProblems.push(
        `E ${e?.status} at ${e?.commit?.slice(0, 10)}, not its earlier result ${r?.before_commit?.slice(0, 10)}`,
      );
    else if (e.branch && git(repo, "rev-parse", `refs/heads/${e.branch}`).trim() !== e.commit)
      mergeProblems.push(`E's branch ${e.branch} is not back at its earlier result`);
    // Its first attempt replaced the base's line; its redo replaced A's.
    const patch = join(runDir, "artifacts", "E", "changes.patch");
    if (!existsSync(patch) || !/^-two$/m.test(readFileSync(patch, "utf8")))
      mergeProblems.push("E's changes.patch is not that of its earlier result");
    if (
      !existsSync(join(runDir, "artifacts", "redo", "E.json")) ||
      !report.merge.redo_assignments.includes("artifacts/redo/E.json")
    )
      mergeProblems.push(`artifacts/redo/E.json missing (redo_assignments ${report.merge.redo_assignments})`);
  }
  // The bisect: C's BROKEN turns the run's gate red; found, fixed once, merged with its fix. The
  // tmux server's death may cost C's fix (a lost attempt): then its earlier result is back and
  // the run halts naming it, which is checked too.
  const bisect = spec.flavour === "bisect";
  if (report && bisect) {
    const culprit = report.merge.culprit;
    if (culprit?.task !== "C") mergeProblems.push(`the culprit is ${culprit?.task ?? "none"}, not C`);
    if (merged) {
      if (git(repo, "show", "HEAD:out-C.txt").trim() !== "C") mergeProblems.push("merged with C's BROKEN");
      const fixed = fixes.at(-1);
      if (fixed?.task !== "C" || fixed.outcome !== "resolved" || culprit?.fixed !== true)
        mergeProblems.push(`merged, but the fixes are ${JSON.stringify(fixes).slice(0, 400)}`);
    } else if (spec.kind === "tmux" && report.summary.validation === "failed" && culprit?.fixed !== false)
      mergeProblems.push(`halted on the gate, but the culprit's fixed is ${culprit?.fixed}`);
  } else if (fixes.length)
    mergeProblems.push(`fixes without a bisect: ${JSON.stringify(fixes).slice(0, 200)}`);
  if (mergeProblems.length) {
    f.mergeBad = 1;
    problems.push(...mergeProblems);
  }
  f.redone = allRedone.map((r) => `${r.task}@${r.attempt} ${r.cause} ${r.outcome}`).join(",") || "none";

  // A task branch holding commits no other ref holds: plain `clean` keeps it by design (docs/guides/operators.md:
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
    merge_or_redo_not_as_expected: 0,
    trials_by_point: {},
    outcomes: {},
    merge_results: {},
    redos: {},
    killed_inside_a_redo: {},
    exit_codes_seen: {},
  };
  const failures = [];
  const bump = (o, key) => {
    o[key] = (o[key] ?? 0) + 1;
  };
  const from = Number(opts.extra.from ?? 0);
  if (!Number.isSafeInteger(from) || from < 0) throw new Error("--from needs a whole number ≥ 0");
  const n = opts.trials ?? Math.max(plan.length - from, 0);
  const ks = opts.only !== null ? [opts.only] : Array.from({ length: n }, (_, i) => from + i);
  for (const k of ks) {
    const spec = plan[k % plan.length];
    const what =
      spec.kind === "point"
        ? spec.fault
        : spec.kind === "tmux"
          ? `tmux${spec.at === "redo" ? "@redo" : ""}${spec.alsoDriver ? "+driver" : ""}`
          : `random${spec.at === "merge" ? "@merge" : ""}`;
    const label = `${spec.driver}:${what}${spec.flavour ? ` (${spec.flavour})` : ""}`;
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
    bump(figures.redos, r.redone ?? "none");
    if (r.killedIn)
      bump(figures.killed_inside_a_redo, `${spec.kind}: ${r.killedIn.replace(/^E's redo 1 /, "")}`);
    for (const e of r.exits) bump(figures.exit_codes_seen, String(e));
    figures.runs_beyond_attempts += r.beyondAttempts ?? 0;
    figures.reports_missing_or_torn += r.reportBad ?? 0;
    figures.user_branch_not_clean_or_merged += r.branchBad ?? 0;
    figures.ledger_verification_failures += r.ledgerBad ?? 0;
    figures.gate_processes_left += r.gatesLeft ?? 0;
    figures.leftovers_after_clean += r.leftovers ?? 0;
    figures.tasks_not_succeeded_after_driver_kill += r.notSucceeded ?? 0;
    figures.merge_or_redo_not_as_expected += r.mergeBad ?? 0;
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
      "merge_or_redo_not_as_expected",
    ],
    failures,
    notes: [
      "DAG per trial: A → (B, C) → D, and E; B fails its first attempt (retries 1), C and D run a tests_cmd gate; E conflicts with A and is redone in the merge (on_conflict redo), the run's tests_cmd wants both lines",
      "flavour redo-halt: E's redo drops A's line and its gate stops it; the merge halts (conflict, exit 3) with E's earlier result put back",
      "flavour bisect: C writes BROKEN, the run's tests_cmd refuses it; the bisect (on_gate_failure bisect_and_fix) finds C, C is fixed on the integration before it, and the run merges",
      "point trials: SIGKILL at a named point (src/task/faults.ts) by `termorch run` then `termorch resume`, or by the daemon then a restarted daemon",
      "random trials: SIGKILL of `termorch run` or the daemon after a seeded delay (@merge: counted from D's start, so as to land in the merge stage and E's redo); tmux trials: SIGKILL of the tmux server once an agent runs (@redo: once E's redo runs; +driver: and of the driver, then resume)",
    ],
    started,
  });
}

await runAsScript(main);
