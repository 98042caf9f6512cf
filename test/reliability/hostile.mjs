// Campaign 3 of issue 13: hostile agents. Each trial runs one hostile agent
// (test/reliability/agents/hostile.sh, KIND/VARIANT) beside three well-behaved tasks
// (agents/good.sh) in a fresh repository, then checks: a clear outcome for every task (report
// written, terminal state, a reason from the union and a message for a failure), the good tasks'
// results and logs the same as in a run without the hostile task, the canary secrets in no file
// termorch wrote (run directory, registry, per-user folder, CLI output, and termorch's own commits:
// message, author, file names and contents), nothing left running, and the user's branch intact.
//
//   node test/reliability/hostile.mjs [--smoke | --long] [--seed N] [--only K] [--json FILE]
import { execFileSync } from "node:child_process";
import {
  closeSync,
  existsSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  readSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { join, relative } from "node:path";
import {
  finish,
  git,
  leftovers,
  makeRepo,
  prng,
  ROOT,
  runAsScript,
  sandbox,
  serverPid,
  termorch,
  trialSeed,
} from "./lib.mjs";

const AGENTS = join(ROOT, "test", "reliability", "agents");
const HOSTILE = join(AGENTS, "hostile.sh");
const GOOD = join(AGENTS, "good.sh");
const MB = 1024 * 1024;
const { Reason } = await import(join(ROOT, "dist", "contract", "reason.js"));
const REASONS = new Set(Reason.options);

/**
 * The cases. `expect`: the hostile task's acceptable outcomes as "status" or "status/reason".
 * `sizes`: bytes of output for long and smoke (`SIZE`); `timeout`: the task's timeout_s.
 * `mainDirty`: the agent itself writes into the user's work tree (that change must survive).
 * `branchMoved`: the agent itself moves or deletes the user's branch.
 */
const CASES = [
  {
    kind: "output",
    variants: ["a", "b"],
    sizes: [200 * MB, 24 * MB],
    expect: ["success"],
    // The log holds at most max_log_bytes (100 MiB by default), then says it was cut.
    check: (h, runDir, c, size) => {
      const log = join(runDir, c.variant === "a" ? h.logs.stdout : h.logs.stderr);
      const bytes = statSync(log).size;
      const cap = 100 * MB;
      const marker = `\n[termorch: log truncated at ${cap} bytes]\n`;
      if (size <= cap) return bytes === size ? null : `log holds ${bytes} bytes, not ${size}`;
      if (bytes !== cap + marker.length) return `log holds ${bytes} bytes, not ${cap} and the marker`;
      const fd = openSync(log, "r");
      const tail = Buffer.alloc(marker.length);
      readSync(fd, tail, 0, marker.length, bytes - marker.length);
      closeSync(fd);
      return tail.toString() === marker ? null : `log ends with ${JSON.stringify(tail.toString())}`;
    },
  },
  { kind: "binary", variants: ["a"], sizes: [32 * MB, 4 * MB], expect: ["success"] },
  { kind: "longline", variants: ["a", "b"], sizes: [20 * MB, 20 * MB], repeat: 2, expect: ["success"] },
  { kind: "escapes", variants: ["a"], expect: ["success"] },
  { kind: "sigterm", variants: ["a", "b"], timeout: 2, expect: ["failed/timeout"] },
  { kind: "setsid", variants: ["a", "b", "c"], expect: ["success"] },
  { kind: "killsup", variants: ["a", "b"], expect: ["failed/lost", "failed/signal"] },
  { kind: "rmworktree", variants: ["a", "b"], expect: ["failed/lost"] },
  { kind: "gitfile", variants: ["a", "b", "c"], expect: ["failed/validation", "failed/lost"] },
  { kind: "gitcommon", variants: ["a", "b", "c", "d", "e", "f"], expect: ["success", "failed/validation"] },
  {
    kind: "movebranch",
    variants: ["a", "b", "c"],
    branchMoved: true,
    // Deleted, or moved to unrelated history: termorch refuses the merge and puts the branch back.
    putBack: ["b", "c"],
    expect: ["success", "failed/validation"],
  },
  { kind: "branches", variants: ["a", "b", "c"], count: 5, expect: ["success", "failed/validation"] },
  { kind: "outside-allowed", variants: ["a"], allowed: ["src/**"], expect: ["failed/validation"] },
  {
    kind: "outside-worktree",
    variants: ["a", "b", "c"],
    mainDirty: ["a", "b"],
    expect: ["success", "failed/validation"],
  },
  { kind: "stdin", variants: ["a", "b", "c"], timeout: 5, expect: ["success", "failed/timeout"] },
  { kind: "segv", variants: ["a", "b"], expect: ["failed/signal"] },
  { kind: "forks", variants: ["a", "b", "c"], count: 60, timeout: 4, expect: ["success", "failed/timeout"] },
  {
    kind: "canary",
    variants: ["raw", "split", "nonl", "stderr", "json", "url", "failing"],
    repeat: 2,
    expect: ["success", "failed/exit_code"],
  },
  // A secret in what the task hands over: redacted in the run directory (contents and names).
  { kind: "canary", variants: ["artifact", "filename"], expect: ["success", "failed/validation"] },
  // A branch named after a secret, beside its work: reported (redacted), never recorded raw.
  { kind: "canary", variants: ["branchonly"], expect: ["success"] },
  {
    kind: "canary",
    variants: ["bigartifact"],
    sizes: [40 * MB, 40 * MB],
    expect: ["success"],
  },
  // A secret in what the task would commit: refused before termorch commits it.
  {
    kind: "canary",
    variants: ["file", "symlink", "commitmsg", "branchname"],
    expect: ["failed/validation"],
  },
  { kind: "canary", variants: ["bigfile"], sizes: [70 * MB, 70 * MB], expect: ["failed/validation"] },
];

/** Smoke: one variant of the cases that cover each mechanism, with small sizes. */
const SMOKE = new Set([
  "output/a",
  "longline/a",
  "sigterm/a",
  "setsid/c",
  "killsup/a",
  "gitfile/c",
  "movebranch/a",
  "segv/a",
  "forks/b",
  "canary/split",
  "canary/file",
  "canary/filename",
]);

function trialsOf(opts) {
  const out = [];
  for (const c of CASES)
    for (const v of c.variants) {
      if (opts.mode === "smoke" && !SMOKE.has(`${c.kind}/${v}`)) continue;
      // --kind K: only the cases whose "kind/variant" starts with K (numbering changes: for a look, not a replay).
      if (typeof opts.extra.kind === "string" && !`${c.kind}/${v}`.startsWith(opts.extra.kind)) continue;
      // Long: `repeat` trials of the variant, each with its own seed (sizes, split points, canaries).
      const n = opts.mode === "smoke" ? 1 : (c.repeat ?? 1);
      for (let i = 0; i < n; i++) out.push({ ...c, variant: v });
    }
  return out;
}

const GOOD_TASKS = [
  { id: "good1", dependencies: [] },
  { id: "good2", dependencies: [] },
  { id: "good3", dependencies: ["good1"] },
];

function assignments(runId, hostile) {
  const tasks = GOOD_TASKS.map((g) => ({
    ...g,
    agent: "good",
    context_path: "ctx/task.md",
    command: ["bash", GOOD],
  }));
  if (hostile) tasks.push(hostile);
  return {
    run_id: runId,
    tasks,
    environment: {
      workspace_dir: "../repo",
      env_vars: ["API_TOKEN", "DB_PASSWORD"],
      resource_limits: { max_parallel: 4 },
    },
  };
}

/** The forms in which a canary may reach a file: raw and in the encodings redaction covers. */
function forms(secret) {
  const out = new Set([secret, JSON.stringify(secret).slice(1, -1), encodeURIComponent(secret)]);
  out.add(encodeURIComponent(secret).replace(/%[0-9A-F]{2}/g, (m) => m.toLowerCase()));
  out.add(new URLSearchParams({ s: secret }).toString().slice(2));
  out.add(
    JSON.stringify(secret)
      .slice(1, -1)
      .replace(/[^\x20-\x7e]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`),
  );
  return [...out].map((f) => Buffer.from(f));
}

/** Files (and names) under `dir` that hold a canary form; `skip(rel)` leaves a path out. */
function scan(dir, needles, skip = () => false, hits = [], base = dir) {
  let entries;
  try {
    entries = readdirSync(dir, { withFileTypes: true });
  } catch {
    return hits;
  }
  for (const e of entries) {
    const path = join(dir, e.name);
    const rel = relative(base, path);
    if (skip(rel)) continue;
    if (needles.some((n) => e.name.includes(n.toString()))) hits.push(`${path} (name)`);
    if (e.isDirectory()) scan(path, needles, skip, hits, base);
    else if (e.isFile()) {
      try {
        const data = readFileSync(path);
        if (needles.some((n) => data.includes(n))) hits.push(path);
      } catch {}
    }
  }
  return hits;
}

/** termorch's own commits (those with its trailers) that hold a canary: message, identity, names, contents. */
function gitLeaks(repo, needles) {
  const hits = [];
  let log = "";
  try {
    log = git(repo, "log", "--all", "--format=%H%x01%an %ae %cn %ce%x01%B%x02");
  } catch {
    return hits;
  }
  for (const entry of log.split("\x02")) {
    const [hash, who, body] = entry.trim().split("\x01");
    if (!hash || !body?.includes("Termorch-Run:")) continue;
    const text = `${who}\n${body}`;
    if (needles.some((n) => text.includes(n.toString()))) hits.push(`${hash} message/identity`);
    const names = git(repo, "ls-tree", "-r", "--name-only", "-z", hash);
    if (needles.some((n) => names.includes(n.toString()))) hits.push(`${hash} file name`);
    for (const n of needles) {
      try {
        execFileSync("git", ["-C", repo, "grep", "-q", "-a", "-F", "-e", n.toString(), hash], {
          stdio: "ignore",
        });
        hits.push(`${hash} file content`);
        break;
      } catch {}
    }
  }
  return hits;
}

function alive(pid) {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return !/^\S+ \(.*\) [ZX] /s.test(stat);
  } catch {
    return false;
  }
}

/** What a good task's result and logs look like, without what differs from run to run. */
function goodView(runDir, report, repo) {
  const view = {};
  for (const t of report.tasks.filter((t) => t.id.startsWith("good"))) {
    // A dependent's prompt names its dependency's branch, which holds the run id.
    const read = (rel) =>
      rel && existsSync(join(runDir, rel))
        ? readFileSync(join(runDir, rel), "utf8").replaceAll(report.run_id, "<run>")
        : null;
    let tree = null;
    try {
      if (t.commit) tree = git(repo, "rev-parse", `${t.commit}^{tree}`).trim();
    } catch {}
    view[t.id] = {
      status: t.status,
      reason: t.reason ?? null,
      exit_code: t.exit_code ?? null,
      attempts: t.attempts,
      gates: (t.gates ?? []).map((g) => `${g.name}:${g.passed}`),
      tree,
      stdout: read(t.logs?.stdout),
      stderr: read(t.logs?.stderr),
      artifacts: (t.artifacts ?? []).map((a) => [a, a.endsWith("/") ? null : read(a)]),
    };
  }
  return view;
}

async function oneRun(box, dir, runId, hostile, secrets, config) {
  const repo = makeRepo(dir);
  const runDir = join(dir, "run");
  mkdirSync(runDir);
  const file = join(runDir, "assignments.json");
  writeFileSync(file, JSON.stringify(assignments(runId, hostile), null, 2));
  const before = git(repo, "rev-parse", "HEAD").trim();
  const r = await termorch(box, ["run", file, "--config", config], {
    env: { API_TOKEN: secrets.token, DB_PASSWORD: secrets.password },
    timeoutMs: 300_000,
  });
  let report = null;
  try {
    report = JSON.parse(readFileSync(join(runDir, "execution_report.json"), "utf8"));
  } catch {}
  return { repo, runDir, before, r, report };
}

function differences(a, b, path = "") {
  if (JSON.stringify(a) === JSON.stringify(b)) return [];
  if (a && b && typeof a === "object" && typeof b === "object") {
    const keys = new Set([...Object.keys(a), ...Object.keys(b)]);
    return [...keys].flatMap((k) => differences(a[k], b[k], `${path}.${k}`));
  }
  const show = (v) => (typeof v === "string" && v.length > 80 ? `${v.slice(0, 80)}…(${v.length})` : v);
  return [`${path}: ${JSON.stringify(show(a))} vs ${JSON.stringify(show(b))}`];
}

async function main(opts) {
  const started = Date.now();
  const box = sandbox("hostile");
  // HOSTILE_KEEP=1: the sandbox stays for a look after the campaign (its tmux server too).
  if (process.env.HOSTILE_KEEP) box.dispose = () => {};
  const config = join(box.dir, "config.json");
  // A short grace: the agents that ignore TERM wait for it (smoke: for CI's time).
  writeFileSync(config, JSON.stringify({ defaults: { kill_grace_s: opts.mode === "smoke" ? 1 : 2 } }));
  const figures = {
    canaryInTermorchFiles: 0,
    canaryInTermorchCommits: 0,
    canaryInCliOutput: 0,
    terminalControlInOutput: 0,
    ledgerOrStatusWrong: 0,
    goodTasksDamaged: 0,
    runsWithoutClearOutcome: 0,
    unexpectedOutcomes: 0,
    processesLeft: 0,
    userBranchDamage: 0,
    leftoversAfterClean: 0,
    agentCommandsRunByTermorch: 0,
    outcomes: {},
  };
  const failures = [];
  const fail = (k, c, what) => failures.push(`trial ${k} ${c.kind}/${c.variant}: ${what}`);

  // The reference: the good tasks alone.
  const refSecrets = { token: "tokREFERENCE0000", password: 'p@ss w/REF+"é&=' };
  const ref = await oneRun(box, join(box.dir, "reference"), "reference", null, refSecrets, config);
  if (!ref.report || ref.r.exitCode !== 0)
    throw new Error(`the reference run failed (exit ${ref.r.exitCode}): ${ref.r.stderr}`);
  const refView = goodView(ref.runDir, ref.report, ref.repo);

  const all = trialsOf(opts);
  let trials = 0;
  for (let k = 0; k < all.length; k++) {
    if (opts.only !== null && opts.only !== k) continue;
    const c = all[k];
    const rng = prng(trialSeed(opts.seed, k));
    const hex = () => Array.from({ length: 16 }, () => "0123456789abcdef"[rng.int(0, 15)]).join("");
    const secrets = { token: `tok${hex()}`, password: `p@ss w/${hex()}+"é&=` };
    const dir = join(box.dir, `t${k}`);
    const scratch = join(dir, "scratch");
    mkdirSync(scratch, { recursive: true });
    const size = c.sizes ? c.sizes[opts.mode === "smoke" ? 1 : 0] + rng.int(0, 4096) : 0;
    const hostile = {
      id: "hostile",
      agent: "hostile",
      context_path: "ctx/task.md",
      command: ["bash", HOSTILE],
      dependencies: [],
      // Most kinds do harm, not work: success for them is to change nothing of the repository's.
      expect_changes: false,
      timeout_s: c.timeout ?? 90,
      env: {
        KIND: c.kind,
        VARIANT: c.variant,
        SIZE: String(size),
        SPLIT: String(rng.int(1, 15)),
        COUNT: String(c.count ?? 5),
        SCRATCH: scratch,
      },
      ...(c.allowed ? { allowed_paths: c.allowed } : {}),
    };
    const runId = `h${k}-${c.kind}-${c.variant}`;
    const t0 = Date.now();
    const run = await oneRun(box, dir, runId, hostile, secrets, config);
    trials++;
    const { repo, runDir, before, r, report } = run;
    const needles = [...forms(secrets.token), ...forms(secrets.password)];

    // A clear outcome for every task.
    const h = report?.tasks.find((t) => t.id === "hostile");
    let outcome = "no report";
    let merge = null;
    if (!report || !h) {
      figures.runsWithoutClearOutcome++;
      fail(
        k,
        c,
        `no report (exit ${r.exitCode}${r.timedOut ? ", timed out" : ""}): ${r.stderr.slice(0, 300)}`,
      );
    } else {
      outcome = h.status === "failed" ? `failed/${h.reason}` : h.status;
      merge = report.merge?.result;
      for (const t of report.tasks) {
        const terminal = ["success", "failed", "skipped"].includes(t.status);
        const clear =
          t.status === "success" || (REASONS.has(t.reason) && typeof t.detail === "string" && t.detail);
        if (!terminal || !clear) {
          figures.runsWithoutClearOutcome++;
          fail(
            k,
            c,
            `task ${t.id} has no clear outcome: ${JSON.stringify({ s: t.status, r: t.reason, d: t.detail })}`,
          );
          break;
        }
      }
      if (!c.expect.includes(outcome) && !c.expect.includes(h.status)) {
        figures.unexpectedOutcomes++;
        fail(k, c, `outcome ${outcome} (expected ${c.expect.join(" or ")}): ${h.detail}`);
      }
      const checked = c.check?.(h, runDir, c, size);
      if (checked) {
        figures.unexpectedOutcomes++;
        fail(k, c, checked);
      }
      // The good tasks: as in the run without the hostile task.
      const diff = differences(goodView(runDir, report, repo), refView);
      if (diff.length) {
        figures.goodTasksDamaged++;
        fail(k, c, `good tasks differ: ${diff.slice(0, 4).join("; ")}`);
      }
    }
    let key = `${c.kind}/${c.variant}`;
    for (let n = 2; key in figures.outcomes; n++) key = `${c.kind}/${c.variant}#${n}`;
    const mergeWhy = report?.merge?.reason ? ` (${String(report.merge.reason).slice(0, 200)})` : "";
    figures.outcomes[key] =
      `${outcome}${h?.detail ? `: ${h.detail.slice(0, 160)}` : ""}; merge ${merge}${merge === "skipped" ? "" : mergeWhy}`;

    // The canary in nothing termorch wrote.
    const userDir = box.userDir;
    const leaks = [
      ...scan(runDir, needles, (rel) => rel === "assignments.json"),
      ...scan(box.env.TERMORCH_REGISTRY, needles),
      ...scan(userDir, needles, (rel) => rel === "worktrees" || rel === "pool"),
    ];
    if (leaks.length) {
      figures.canaryInTermorchFiles += leaks.length;
      fail(k, c, `canary in ${leaks.slice(0, 3).join(", ")}`);
    }
    const inGit = gitLeaks(repo, needles);
    if (inGit.length) {
      figures.canaryInTermorchCommits += inGit.length;
      fail(k, c, `canary in termorch's commits: ${inGit.slice(0, 3).join(", ")}`);
    }
    if (needles.some((n) => r.stdout.includes(n.toString()) || r.stderr.includes(n.toString()))) {
      figures.canaryInCliOutput++;
      fail(k, c, "canary in termorch's output");
    }

    // The ledger's chain holds (an agent that wrote into it is caught by the check instead), and
    // each task has one status file, the report's state.
    const ledger = await termorch(box, ["verify-ledger", runDir], { timeoutMs: 60_000 });
    const forges = c.kind === "outside-worktree" && c.variant === "c";
    if ((ledger.exitCode === 0) === forges) {
      figures.ledgerOrStatusWrong++;
      fail(k, c, `verify-ledger exit ${ledger.exitCode}: ${(ledger.stdout + ledger.stderr).slice(0, 300)}`);
    }
    const statusFiles = existsSync(join(runDir, "status")) ? readdirSync(join(runDir, "status")) : [];
    for (const t of report?.tasks ?? []) {
      const mine = statusFiles.filter((f) => f.startsWith(`${t.id}.`)).sort();
      if (mine.join() !== `${t.id}.${t.status}`) {
        figures.ledgerOrStatusWrong++;
        fail(k, c, `status files of ${t.id}: ${mine.join(", ")} (report: ${t.status})`);
      }
    }

    // No terminal control of the agent's reaches the operator's terminal through termorch's own
    // output: the run's, and `status`, which shows each task's last log line.
    const status = await termorch(box, ["status", runDir], { timeoutMs: 60_000 });
    const control = (o) => o.includes("\x1b") || o.includes("\x07");
    if ([r.stdout, r.stderr, status.stdout, status.stderr].some(control)) {
      figures.terminalControlInOutput++;
      fail(k, c, `terminal control in termorch's output: ${JSON.stringify(status.stdout.slice(0, 300))}`);
    }
    if (needles.some((n) => status.stdout.includes(n.toString()) || status.stderr.includes(n.toString()))) {
      figures.canaryInCliOutput++;
      fail(k, c, "canary in termorch status's output");
    }

    // Nothing left running: what the agent recorded, and anything in the sandbox.
    const pidDir = join(scratch, "pids");
    const pidsLeft = existsSync(pidDir)
      ? readdirSync(pidDir)
          .map((f) => Number(readFileSync(join(pidDir, f), "utf8").trim()))
          .filter((p) => p > 0 && alive(p))
      : [];
    const left = leftovers(box, repo);
    // The sandbox's tmux server keeps the failed tasks' sessions for inspection: it is not a leftover.
    const server = serverPid(box.socket);
    const procs = [
      ...new Set([...pidsLeft.map(String), ...left.processes.filter((p) => !p.startsWith(`${server} `))]),
    ];
    if (procs.length) {
      figures.processesLeft += procs.length;
      fail(k, c, `left running: ${procs.slice(0, 4).join(" | ")}`);
      for (const p of pidsLeft)
        try {
          process.kill(p, "SIGKILL");
        } catch {}
    }

    // Hooks, filters and config commands the agent planted (SCRATCH/hooks-ran): the agent itself
    // runs no git command after planting them, so any run is termorch's git running its code.
    const ran = join(scratch, "hooks-ran");
    if (existsSync(ran)) {
      figures.agentCommandsRunByTermorch++;
      fail(
        k,
        c,
        `termorch's git ran the agent's commands: ${readFileSync(ran, "utf8").split("\n").slice(0, 3).join("; ")}`,
      );
    }

    // The user's branch: the old commit, or what the merge made of it, with index and work tree
    // in agreement; an agent that moved it itself leaves it where it put it.
    const damage = branchDamage(repo, before, report, c, scratch);
    if (damage) {
      figures.userBranchDamage++;
      fail(k, c, `user branch: ${damage}`);
    }

    // `clean` removes what the failed run kept (sessions, worktrees, branches).
    // --force: a failed run's unmerged task branches are kept for inspection otherwise.
    const cleaned = await termorch(box, ["clean", runId, "--force"], { cwd: runDir, timeoutMs: 60_000 });
    const after = leftovers(box, repo);
    const rest = [
      ...after.sessions,
      ...after.worktrees,
      ...after.branches,
      ...after.processes.filter((p) => !p.startsWith(`${serverPid(box.socket)} `)),
    ];
    if (rest.length) {
      figures.leftoversAfterClean += rest.length;
      fail(
        k,
        c,
        `after clean: ${rest.slice(0, 4).join(" | ")}; clean said: ${cleaned.stdout.slice(0, 600)} ${cleaned.stderr.slice(0, 300)}`,
      );
    }
    console.log(`  ${k} ${key}: ${outcome} (${Math.round((Date.now() - t0) / 100) / 10} s)`);
  }
  if (process.env.HOSTILE_KEEP) console.log(`kept ${box.dir} (tmux -L ${box.socket})`);
  box.dispose();
  return finish(opts, {
    campaign: "hostile",
    trials,
    figures,
    mustBeZero: [
      "canaryInTermorchFiles",
      "canaryInTermorchCommits",
      "canaryInCliOutput",
      "terminalControlInOutput",
      "ledgerOrStatusWrong",
      "goodTasksDamaged",
      "runsWithoutClearOutcome",
      "unexpectedOutcomes",
      "processesLeft",
      "userBranchDamage",
      "leftoversAfterClean",
    ],
    failures,
    notes: [
      "each trial: three good tasks beside one hostile agent in a fresh repository; good tasks compared with a run without it",
      "agentCommandsRunByTermorch is not a must-be-zero figure: hooks and the fsmonitor are off for termorch's git, but filter and merge drivers of the repository's config are honoured (git-lfs needs them), and an agent with the user's uid can plant one (README, Security)",
    ],
    started,
  });
}

function branchDamage(repo, before, report, c, scratch) {
  let head;
  try {
    head = git(repo, "rev-parse", "--verify", "-q", "refs/heads/main").trim();
  } catch {
    head = null;
  }
  if (c.branchMoved) {
    const movedTo = existsSync(join(scratch, "moved-to"))
      ? readFileSync(join(scratch, "moved-to"), "utf8").trim()
      : null;
    // termorch never resets what was done behind its back; it may merge onto the moved tip
    // (the design's "the branch moved during the run"), and then says so in the report.
    if (c.putBack?.includes(c.variant)) {
      if (head !== before)
        return `main is ${head}, not put back to ${before}: ${JSON.stringify(report?.merge)}`;
      if (report?.merge?.result === "success")
        return "termorch merged after an agent moved the user's branch";
      return null;
    }
    if (head === before || (head !== null && head === movedTo)) return null;
    const m = report?.merge;
    if (
      m?.result === "success" &&
      m.target_moved &&
      m.target_moved_to === movedTo &&
      head === m.result_commit
    ) {
      const parents = git(repo, "rev-list", "--parents", "-n1", head).trim().split(" ").slice(1);
      if (parents[0] === movedTo) return null;
    }
    return `main is ${head}, neither the old commit, the agent's, nor a reported merge onto it: ${JSON.stringify(m)}`;
  }
  const merged = report?.merge?.result === "success" ? report.merge.result_commit : null;
  if (head !== before && head !== merged) return `main moved to ${head}`;
  const status = git(repo, "status", "--porcelain", "--untracked-files=no");
  const expected = c.mainDirty?.includes(c.variant) ? (c.variant === "a" ? " M README.md\n" : "") : "";
  if (status !== expected) return `index or work tree differ from HEAD: ${JSON.stringify(status)}`;
  return null;
}

await runAsScript(main);
