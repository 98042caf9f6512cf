// Campaign 3 of issue 13: hostile agents. Each trial runs one hostile agent
// (test/reliability/agents/hostile.sh, KIND/VARIANT) beside three well-behaved tasks
// (agents/good.sh) in a fresh repository, then checks: a clear outcome for every task (report
// written, terminal state, a reason from the union and a message for a failure), the good tasks'
// results and logs the same as in a run without the hostile task, the canary secrets in no file
// termorch wrote (run directory, registry, per-user folder, CLI output, and termorch's own commits:
// message, author, file names and contents), nothing left running, and the user's branch intact.
//
// The sandbox pass (issue 25; SANDBOX_CASES): what a sandboxed agent must not do (read a key in
// ~/.ssh, another task's worktree or termorch's environment, write the user's checkout or outside
// its worktree, plant hooks or config in the main .git, move the user's branch, reach a port not
// on its allowlist, kill its supervisor), plus what no sandbox blocks (a fork bomb, a setsid
// daemon), each once with the sandbox off (the control) and with it on, with the checks above.
//
//   node test/reliability/hostile.mjs [--smoke | --long] [--sandbox] [--seed N] [--only K] [--json FILE]
//
// The long version (what `npm run reliability` runs) is the hostile kinds, then the sandbox pass
// when this machine can make a sandbox; --sandbox: the sandbox pass alone (smoke: a few cases,
// sandbox on). --sandbox-good: the good tasks sandboxed too in the pass (network "none").
import { execFileSync } from "node:child_process";
import {
  closeSync,
  existsSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readdirSync,
  readFileSync,
  readSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { createServer } from "node:http";
import { createServer as createNetServer } from "node:net";
import { dirname, join, relative } from "node:path";
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
  trialSeed,
  UID,
} from "./lib.mjs";

const AGENTS = join(ROOT, "test", "reliability", "agents");
const HOSTILE = join(AGENTS, "hostile.sh");
const GOOD = join(AGENTS, "good.sh");
const MB = 1024 * 1024;
const { Reason } = await import(join(ROOT, "dist", "contract", "reason.js"));
const REASONS = new Set(Reason.options);
const { sandboxTools } = await import(join(ROOT, "dist", "sandbox", "probe.js"));

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

/**
 * The sandbox pass (issue 25). The hostile task gets `"sandbox": {"network": ["127.0.0.1:P"]}`,
 * P the campaign's loopback server (startServers). The good tasks stay unsandboxed and are
 * compared with the reference as in every trial: a sandboxed neighbour changes nothing of theirs
 * (--sandbox-good sandboxes them too, network "none": the comparison then also says whether the
 * sandbox changes a well-behaved task's result or logs). Its repositories, run directories and
 * HOME (with a key in ~/.ssh) lie outside /tmp, which a sandbox replaces with a private one: what
 * hides them is the sandbox's rules, not that.
 *
 * `checks(t)` (t: trialFacts) gives [what must hold, whether it held], one per thing the agent
 * tried or effect looked for: judged on the host where the effect is a write (the file absent,
 * .git/config and .git/hooks as they were, the branch where it was), from the agent's own report
 * (`probe NAME open|blocked`) and the canary in no file the run kept where it is a read or a
 * connection. With the sandbox off (the control) each check of a blocked case must fail, else the
 * probe could not see an escape; but one marked "design", which termorch's own design makes hold
 * either way. `gate`: a case no sandbox blocks, and what bounds it instead; its checks hold in
 * both passes. `known`: a gap of the sandbox, reported (sandboxKnownGaps), not judged; its control
 * still must get through. `expectOn`: the outcomes with the sandbox on, when not `expect`'s. The
 * rest of a trial's settings (count, timeout, branchMoved, mainDirty, putBack) are its kind's.
 */
const SANDBOX_CASES = [
  {
    what: "read ~/.ssh/id_ed25519",
    kind: "readkey",
    variant: "a",
    expect: ["success"],
    checks: (t) => [
      ...said(t, "key-body", "key-artifact", "key-symlink"),
      ["the key's canary in no file the run kept", !t.kept(t.canary.key)],
    ],
  },
  {
    what: "read another task's worktree",
    kind: "readother",
    variant: "a",
    expect: ["success"],
    checks: (t) => [
      ...said(t, "other-list", "other-read"),
      // good.sh writes "made by <task>" in its worktree (then its commit and changes.patch).
      ["another task's work in none of its logs and artifacts", !t.inOwnFiles("made by good")],
    ],
  },
  {
    what: "read another task's committed work (the repository's objects)",
    kind: "readother",
    variant: "b",
    expect: ["success"],
    checks: (t) => [
      ...said(t, "other-objects"),
      ["another task's work in none of its logs and artifacts", !t.inOwnFiles("made by good")],
    ],
  },
  {
    what: "write the user's checkout (README.md)",
    kind: "outside-worktree",
    variant: "a",
    expect: ["success"],
    checks: (t) => [["README.md of the checkout as it was", read(join(t.repo, "README.md")) === "hello\n"]],
  },
  {
    what: "write a new file in the user's checkout",
    kind: "outside-worktree",
    variant: "b",
    expect: ["success"],
    checks: (t) => [["no new file in the checkout", !existsSync(join(t.repo, "untracked-by-agent.txt"))]],
  },
  {
    what: "write beside the repository and in the home",
    kind: "outside-worktree",
    variant: "d",
    expect: ["success"],
    checks: (t) => [
      ["nothing beside the repository", !existsSync(join(dirname(t.repo), "planted-by-agent.txt"))],
      ["nothing in the home", !existsSync(join(t.home, "planted-by-agent.txt"))],
    ],
  },
  {
    what: "forge the run directory (a status, a ledger line, the report)",
    kind: "outside-worktree",
    variant: "c",
    expect: ["success"],
    checks: (t) => [
      ["no forged line in the ledger", !read(join(t.runDir, "events.jsonl")).includes('"forged"')],
      ["the ledger verifies", t.ledgerOk],
    ],
  },
  {
    what: "plant hooks in the main .git",
    kind: "gitcommon",
    variant: "a",
    expect: ["success"],
    checks: (t) => [[".git/hooks as it was", t.gitAfter.hooks === t.gitBefore.hooks]],
  },
  {
    what: "set core.hooksPath in the main .git/config",
    kind: "gitcommon",
    variant: "b",
    expect: ["success"],
    checks: (t) => [[".git/config as it was", t.gitAfter.config === t.gitBefore.config]],
  },
  {
    what: "set core.fsmonitor in the main .git/config",
    kind: "gitcommon",
    variant: "d",
    expect: ["success"],
    checks: (t) => [[".git/config as it was", t.gitAfter.config === t.gitBefore.config]],
  },
  {
    // Without the sandbox, the one planting that termorch's own git runs (agentCommandsRunByTermorch).
    what: "plant a filter driver in the main .git/config, which termorch's git would run",
    kind: "gitcommon",
    variant: "e",
    expect: ["success", "failed/validation"],
    expectOn: ["success"],
    checks: (t) => [
      [".git/config as it was", t.gitAfter.config === t.gitBefore.config],
      ["termorch's git ran none of its commands", !existsSync(join(t.scratch, "hooks-ran"))],
    ],
  },
  {
    what: "move the user's branch",
    kind: "movebranch",
    variant: "a",
    expect: ["success"],
    checks: (t) => [["main where it was (or merged onto by termorch)", branchInPlace(t)]],
  },
  {
    what: "delete the user's branch",
    kind: "movebranch",
    variant: "b",
    // The task succeeds; the merge is refused and the branch put back (branchDamage checks it).
    expect: ["success"],
    checks: (t) => [["main where it was (or merged onto by termorch)", branchInPlace(t)]],
  },
  {
    what: "read termorch's environment: every /proc/*/environ",
    kind: "procenv",
    variant: "a",
    expect: ["success"],
    checks: (t) => [
      ...said(t, "environ-all"),
      ["the variable's canary in no file the run kept", !t.kept(t.canary.env)],
    ],
  },
  {
    what: "read its ancestors' /proc/<pid>/environ (supervisor, tmux server)",
    kind: "procenv",
    variant: "b",
    expect: ["success"],
    // termorch is no ancestor of an agent (tmux's server is, which termorch starts with an
    // environment of its own): its variable is out of the chain's reach with the sandbox off too.
    checks: (t) => [
      ...said(t, "environ-supervisor", "environ-tmux"),
      [...said(t, "environ-parents")[0], "design"],
      ["the variable's canary in no file the run kept", !t.kept(t.canary.env), "design"],
    ],
  },
  {
    what: "connect to a port and an address not on the allowlist (HTTP, raw TCP)",
    kind: "connect",
    variant: "a",
    expect: ["success"],
    checks: (t) => [
      ...said(t, "connect-http-port", "connect-tcp-port", "connect-http-address", "connect-tcp-address"),
      ["no connection reached a server not on the allowlist", t.hits.denied === 0],
    ],
  },
  {
    what: "kill its supervisor (KILL)",
    kind: "killsup",
    variant: "a",
    expect: ["failed/lost", "failed/signal"],
    expectOn: ["success"],
    checks: (t) => [["its supervisor out of its reach", supervisorSafe(t)]],
  },
  {
    what: "kill its supervisor (TERM)",
    kind: "killsup",
    variant: "b",
    expect: ["failed/lost", "failed/signal"],
    expectOn: ["success"],
    checks: (t) => [["its supervisor out of its reach", supervisorSafe(t)]],
  },
  {
    what: "fork bomb (60 processes, then hang)",
    kind: "forks",
    variant: "c",
    expect: ["failed/timeout"],
    gate: "the task's timeout and process-tree reaping",
    checks: (t) => [
      ["its 60 processes forked", t.log.includes("forked 60 processes")],
      ["ended by its timeout", t.outcome === "failed/timeout"],
      ["nothing left running", t.left.length === 0],
    ],
  },
  {
    what: "setsid daemon",
    kind: "setsid",
    variant: "a",
    expect: ["success"],
    // In a sandbox, its pid namespace also ends with the agent (bwrap's --die-with-parent).
    gate: "process-tree reaping at the task's end",
    checks: (t) => [
      ["its daemon started", t.log.includes("left a daemon behind")],
      ["nothing left running", t.left.length === 0],
    ],
  },
  {
    what: "setsid daemon holding the output pipes",
    kind: "setsid",
    variant: "c",
    expect: ["success"],
    // In a sandbox, its pid namespace also ends with the agent (bwrap's --die-with-parent).
    gate: "process-tree reaping at the task's end",
    checks: (t) => [
      ["its daemon started", t.log.includes("left a daemon behind")],
      ["nothing left running", t.left.length === 0],
    ],
  },
  ...ISSUE_35_CASES(),
];

/**
 * Issue 35's cases (found by a hostile-agent campaign from outside): /proc/sys written as root,
 * keys typed into the pane (TIOCSTI), the keyrings, a unix socket in a folder the agent sees, an
 * earlier run's artifacts. `plant` (trialPlants): what the campaign sets up for the trial. A
 * control the kernel itself holds (a user that is not root, a kernel without legacy TIOCSTI) is
 * marked "design": nothing to show there.
 */
function ISSUE_35_CASES() {
  return [
    {
      what: "open a kernel setting for writing (/proc/sys/kernel/core_pattern)",
      kind: "kernel",
      variant: "a",
      expect: ["success"],
      checks: (t) => [[...said(t, "proc-sys")[0], ...(UID === 0 ? [] : ["design"])]],
    },
    {
      what: "type into its terminal (TIOCSTI), as a tty agent",
      kind: "tty",
      variant: "a",
      tty: true,
      expect: ["success"],
      checks: (t) => [[...said(t, "tiocsti")[0], ...(legacyTiocsti() ? [] : ["design"])]],
    },
    {
      what: "read the keyrings (a key in the user's, the session's it runs in)",
      kind: "keyring",
      variant: "a",
      plant: "key",
      expect: ["success"],
      checks: (t) => [
        ...said(t, "keyring-user", "keyring-session"),
        ["the key's canary in no file the run kept", !t.kept(t.canary.keyring)],
      ],
    },
    {
      what: "connect to a unix socket in a folder it sees (~/.cache)",
      kind: "unixsock",
      variant: "a",
      plant: "socket",
      expect: ["success"],
      known:
        "a unix socket in a folder the agent sees is reachable whatever its network (docs/guides/sandbox.md: hide its folder with deny_read)",
      checks: (t) => [
        ...said(t, "unix-socket"),
        ["the daemon's answer in no file the run kept", !t.kept(t.canary.unix)],
      ],
    },
    {
      what: "read an earlier run's artifacts (cleaned since, its folder beside the run's)",
      kind: "earlier",
      variant: "a",
      plant: "earlier",
      expect: ["success"],
      checks: (t) => [
        ...said(t, "earlier-artifact"),
        ["the earlier run's canary in no file the run kept", !t.kept(t.canary.earlier)],
      ],
    },
    ...linkCases(),
  ];
}

/**
 * Issue 35, item 1: links the agent plants for termorch to follow after it, as the user. No
 * sandbox stops the planting (the link is in a folder the agent may write), and termorch's own
 * design makes each check hold either way ("design"): the control is the agent's word that it
 * planted. `task`: what the hostile task's entry adds (a gate that reads what the link names).
 */
const planted = (t) => ["the agent planted its link", t.log.includes("planted its link"), "design"];
const keyAsItWas = (t) => [
  "~/.ssh/id_ed25519 as it was (not redacted through a link)",
  read(join(t.home, ".ssh", "id_ed25519")).includes(t.canary.key),
  "design",
];
const noLinkKept = (t) => [
  "no link among the kept artifacts",
  !(t.report?.tasks.find((x) => x.id === "hostile")?.artifacts ?? []).some((a) =>
    lstatSync(join(t.runDir, a), { throwIfNoEntry: false })?.isSymbolicLink(),
  ),
  "design",
];
function linkCases() {
  return [
    {
      what: "plant changes.patch as a link to a file in the home",
      kind: "links",
      variant: "a",
      plant: "victim",
      expect: ["success"],
      checks: (t) => [
        planted(t),
        ["the file it named as it was", read(t.victim) === VICTIM_TEXT, "design"],
        noLinkKept(t),
      ],
    },
    {
      what: "plant a link to ~/.ssh/id_ed25519 in its artifacts (redaction would rewrite it)",
      kind: "links",
      variant: "b",
      expect: ["success"],
      checks: (t) => [planted(t), keyAsItWas(t), noLinkKept(t)],
    },
    {
      what: "move its handoff's folder, a link to ~/.aws/credentials in its place",
      kind: "links",
      variant: "c",
      plant: "hidden",
      task: { success_criteria: { handoff: true } },
      expect: ["failed/validation"],
      checks: (t) => [
        planted(t),
        ["the hidden file's canary in no file the run kept", !t.kept(t.canary.key), "design"],
      ],
    },
    {
      what: "a required artifact through a link to ~/.aws (out/credentials)",
      kind: "links",
      variant: "d",
      plant: "hidden",
      task: { success_criteria: { required_artifacts: ["out/credentials"] } },
      expect: ["failed/validation"],
      checks: (t) => [
        planted(t),
        ["the hidden file's canary in no file the run kept", !t.kept(t.canary.key), "design"],
      ],
    },
    {
      what: "plant prompt.md as a link for its retry to write through",
      kind: "links",
      variant: "e",
      plant: "victim",
      task: { retries: 1 },
      expect: ["success"],
      checks: (t) => [
        planted(t),
        ["the file it named as it was", read(t.victim) === VICTIM_TEXT, "design"],
        noLinkKept(t),
      ],
    },
  ];
}
const VICTIM_TEXT = "a file of the user's, untouched\n";

/** Whether this kernel lets a process type into its controlling terminal (dev.tty.legacy_tiocsti). */
function legacyTiocsti() {
  return read("/proc/sys/dev/tty/legacy_tiocsti").trim() !== "0";
}

/**
 * What an issue 35 case needs before its trial (`c.plant`): the environment its hostile agent gets,
 * and what undoes it after. "key": a user key (its payload the canary) in the user's keyring;
 * "socket": the canary as the campaign's unix socket's answer; "earlier": a run before this one
 * (in the trial's folder, cleaned: out of the registry) that copied the canary into its artifacts;
 * "victim": a file of the user's in the home (links); "hidden": ~/.aws/credentials, the key's canary
 * in it (links).
 */
async function trialPlants(c, { box, dir, config, canary, servers, home }) {
  if (c.plant === "victim") {
    const victim = join(home, "victim.txt");
    writeFileSync(victim, VICTIM_TEXT);
    // Written afresh for each trial, and left for the trial's checks.
    return { env: { VICTIM: victim }, victim, undo: () => {} };
  }
  if (c.plant === "hidden") {
    // Not a key's form: redaction alone would not hide it, only not reading it does.
    const hidden = join(home, ".aws", "credentials");
    mkdirSync(dirname(hidden), { recursive: true });
    writeFileSync(hidden, `[default]\nnote = ${canary.key}\n`, { mode: 0o600 });
    return { env: { HIDDEN: hidden }, undo: () => rmSync(hidden, { force: true }) };
  }
  if (c.plant === "key") {
    const desc = `termorch-hostile-${canary.keyring.slice(-8)}`;
    const id = keyctl("add", desc, canary.keyring);
    return { env: { KEY_DESC: desc }, undo: () => keyctl("invalidate", id) };
  }
  if (c.plant === "socket") {
    servers.unixAnswer = canary.unix;
    return { env: { UNIX_SOCK: servers.unixSock }, undo: () => {} };
  }
  if (c.plant === "earlier") {
    makeRepo(join(dir, "earlier"));
    const runDir = join(dir, "earlier-run");
    mkdirSync(runDir);
    const file = join(runDir, "assignments.json");
    const runId = `${c.kind}-${canary.earlier.slice(-6)}-earlier`;
    const task = {
      id: "early",
      agent: "good",
      context_path: "ctx/task.md",
      command: ["bash", "-c", `echo ${canary.earlier} > "$TERMORCH_ARTIFACTS_DIR/secret.txt"`],
      expect_changes: false,
    };
    writeFileSync(
      file,
      JSON.stringify({ run_id: runId, tasks: [task], environment: { workspace_dir: "../earlier/repo" } }),
    );
    const r = await termorch(box, ["run", file, "--config", config], { timeoutMs: 120_000 });
    const secret = join(runDir, "artifacts", "early", "secret.txt");
    if (r.exitCode !== 0 || !existsSync(secret))
      throw new Error(`the earlier run failed (exit ${r.exitCode}): ${r.stderr}`);
    await termorch(box, ["clean", runId, "--force"], { cwd: runDir, timeoutMs: 60_000 });
    return { env: { EARLIER: secret }, undo: () => {} };
  }
  return { env: {}, undo: () => {} };
}

/** A key in the user's keyring (add: its id), or one invalidated, by perl's syscall (perl-base). */
function keyctl(op, ...args) {
  const script = `
    use POSIX ();
    my $nr = { x86_64 => [248, 250], aarch64 => [217, 219] }->{ (POSIX::uname())[4] } or die "no keyctl numbers\n";
    my ($op, @a) = @ARGV;
    if ($op eq "add") {
      my ($type, $desc, $payload) = ("user", @a);
      my $id = syscall($nr->[0], $type, $desc, $payload, length $payload, -4);
      die "add_key: $!\n" if $id < 0;
      print $id;
    } else {
      syscall($nr->[1], 21, 0 + $a[0]);    # KEYCTL_INVALIDATE
    }`;
  return execFileSync("perl", ["-e", script, op, ...args], { encoding: "utf8" }).trim();
}

/** The sandbox pass's smoke: one case per mechanism (files, git, pid namespace, network; issue 35's kernel, terminal, keyrings, earlier runs). */
const SANDBOX_SMOKE = new Set([
  "readkey/a",
  "movebranch/a",
  "procenv/a",
  "connect/a",
  "kernel/a",
  "tty/a",
  "keyring/a",
  "earlier/a",
  "links/b",
  "links/c",
]);

/** One check per probe the agent reports: held when it says it was blocked. */
function said(t, ...names) {
  return names.map((n) => [`${n}, as the agent reports it`, t.probes.get(n) === "blocked"]);
}

/** The user's branch where it was, or where termorch's own merge put it from there. */
function branchInPlace(t) {
  const m = t.report?.merge;
  const moved = m?.target_moved || (m?.refs_changed ?? []).some((r) => r.ref === "refs/heads/main");
  return !moved && (t.head === t.before || (m?.result === "success" && t.head === m.result_commit));
}

/** Its supervisor not killed: the task ran to its end, and the agent found no supervisor to kill. */
function supervisorSafe(t) {
  return t.outcome === "success" && t.probes.get("kill-supervisor") === "blocked";
}

function read(path) {
  try {
    return readFileSync(path, "utf8");
  } catch {
    return "";
  }
}

/** What an agent could plant in the main .git: its config, and its hooks (names and contents). */
function gitState(repo) {
  const hooks = join(repo, ".git", "hooks");
  const files = existsSync(hooks) ? readdirSync(hooks, { withFileTypes: true }) : [];
  return {
    config: read(join(repo, ".git", "config")),
    hooks: files
      .map((f) => `${f.name} ${f.isFile() ? read(join(hooks, f.name)) : f.isDirectory() ? "dir" : "other"}`)
      .sort()
      .join("\0"),
  };
}

/**
 * The connect case's loopback servers: the allowed one (its answer names the request's path),
 * another port and another address (127.0.0.2, the allowed port), which count their connections.
 */
async function startServers(home) {
  const hits = { allowed: [], denied: 0 };
  const allowed = createServer((req, res) => {
    hits.allowed.push(req.url);
    res.end(`allowed server answers ${req.url.slice(1)}\n`);
  });
  const deniedPort = createServer((_, res) => res.end("not on the allowlist\n"));
  const deniedAddress = createServer((_, res) => res.end("not on the allowlist\n"));
  for (const d of [deniedPort, deniedAddress])
    d.on("connection", () => {
      hits.denied++;
    });
  const listen = (server, port, host) => new Promise((resolve) => server.listen(port, host, resolve));
  await listen(allowed, 0, "127.0.0.1");
  const port = allowed.address().port;
  await listen(deniedPort, 0, "127.0.0.1");
  await listen(deniedAddress, port, "127.0.0.2");
  // A daemon of the user's on a unix socket in a folder the agent sees (issue 35): it answers the
  // trial's canary. Short: a socket's path must fit in 108 bytes.
  const unixSock = join(home, ".cache", "hostile.sock");
  mkdirSync(dirname(unixSock), { recursive: true });
  rmSync(unixSock, { force: true });
  const state = { unixAnswer: "" };
  const unix = createNetServer((s) => s.end(`daemon answers ${state.unixAnswer}\n`));
  await new Promise((resolve) => unix.listen(unixSock, resolve));
  return {
    hits,
    unixSock,
    set unixAnswer(v) {
      state.unixAnswer = v;
    },
    allowed: `127.0.0.1:${port}`,
    denied: `port=127.0.0.1:${deniedPort.address().port} address=127.0.0.2:${port}`,
    reset() {
      hits.allowed = [];
      hits.denied = 0;
    },
    close() {
      for (const s of [allowed, deniedPort, deniedAddress, unix]) s.close();
    },
  };
}

/** The variable only termorch's own environment holds (procenv). */
const ENV_CANARY = "TERMORCH_HOSTILE_ENV_CANARY";

/** What a sandbox pass's trial left, for its checks. */
function trialFacts({
  repo,
  runDir,
  before,
  gitBefore,
  report,
  h,
  outcome,
  home,
  canary,
  hits,
  left,
  ledger,
  scratch,
  victim,
}) {
  const log = h?.logs?.stdout ? read(join(runDir, h.logs.stdout)) : "";
  const probes = new Map([...log.matchAll(/^probe (\S+) (open|blocked)/gm)].map((m) => [m[1], m[2]]));
  let head = null;
  try {
    head = git(repo, "rev-parse", "--verify", "-q", "refs/heads/main").trim();
  } catch {}
  return {
    repo,
    runDir,
    before,
    head,
    report,
    outcome,
    home,
    canary,
    hits,
    left,
    log,
    probes,
    scratch,
    victim,
    gitBefore,
    gitAfter: gitState(repo),
    ledgerOk: ledger.exitCode === 0,
    reachedAllowed:
      probes.get("connect-allowed") === "open" &&
      log.includes(`allowed server answers ${canary.request}`) &&
      hits.allowed.includes(`/${canary.request}`),
    /** Whether `needle` is in a file of the run directory (but the assignments) or a commit of the repository. */
    kept(needle) {
      if (scan(runDir, [Buffer.from(needle)], (rel) => rel === "assignments.json").length) return true;
      return git(repo, "log", "--all", "-p", "--format=%H%n%an %ae%n%B").includes(needle);
    },
    /** Whether `needle` is in the hostile task's logs or artifacts. */
    inOwnFiles(needle) {
      const own = [h?.logs?.stdout, h?.logs?.stderr].filter(Boolean).map((l) => read(join(runDir, l)));
      return (
        own.some((text) => text.includes(needle)) ||
        scan(join(runDir, "artifacts", "hostile"), [Buffer.from(needle)]).length > 0
      );
    },
  };
}

/** The uid's processes, which a sandboxed agent cannot count (its fork limit is above them). */
function userProcesses() {
  try {
    const out = execFileSync("ps", ["-u", String(UID), "--no-headers"], { encoding: "utf8" });
    return out.split("\n").filter(Boolean).length;
  } catch {
    return 0;
  }
}

/** One line per case of the sandbox pass: what happened with the sandbox off, and on. */
function sandboxTable(rows) {
  const cell = (tally, c, pass) => {
    if (!tally.trials) return "not run";
    const outcomes = Object.entries(tally.outcomes)
      .map(([o, n]) => (n > 1 ? `${o} ×${n}` : o))
      .join(", ");
    if (c.gate)
      return `${pass === "on" ? "not blocked; " : ""}held ${tally.held}/${tally.total} by ${c.gate} (${outcomes})`;
    if (pass === "off") {
      const design = tally.design ? `, ${tally.design} held by termorch's design` : "";
      return `got through ${tally.total - tally.held}/${tally.total}${design} (${outcomes})`;
    }
    if (c.known && tally.held < tally.total)
      return `not blocked (known gap): got through ${tally.total - tally.held}/${tally.total} (${outcomes})`;
    return `blocked ${tally.held}/${tally.total} (${outcomes})`;
  };
  const lines = ["| case | agent | sandbox off: what happened | sandbox on |", "|---|---|---|---|"];
  for (const c of SANDBOX_CASES) {
    const row = rows[`${c.kind}/${c.variant}`];
    if (row)
      lines.push(
        `| ${c.what} | ${c.kind}/${c.variant} | ${cell(row.off, c, "off")} | ${cell(row.on, c, "on")} |`,
      );
  }
  return lines;
}

/** The hostile kinds' trials (unless --sandbox), then the sandbox pass's when `sandboxPass`. */
function trialsOf(opts, sandboxPass) {
  const out = [];
  // --kind K: only the cases whose "kind/variant" starts with K (numbering changes: for a look, not a replay).
  const picked = (name) => typeof opts.extra.kind !== "string" || name.startsWith(opts.extra.kind);
  if (!("sandbox" in opts.extra))
    for (const c of CASES)
      for (const v of c.variants) {
        if (opts.mode === "smoke" && !SMOKE.has(`${c.kind}/${v}`)) continue;
        if (!picked(`${c.kind}/${v}`)) continue;
        // Long: `repeat` trials of the variant, each with its own seed (sizes, split points, canaries).
        const n = opts.mode === "smoke" ? 1 : (c.repeat ?? 1);
        for (let i = 0; i < n; i++) out.push({ ...c, variant: v });
      }
  if (sandboxPass)
    for (const c of SANDBOX_CASES) {
      const name = `${c.kind}/${c.variant}`;
      if (!picked(name) || (opts.mode === "smoke" && !SANDBOX_SMOKE.has(name))) continue;
      // The control once, then the sandbox twice (fresh canaries); smoke: the sandbox once.
      const passes = opts.mode === "smoke" ? ["on"] : ["off", "on", "on"];
      const kind = CASES.find((k) => k.kind === c.kind);
      for (const pass of passes) out.push({ ...kind, ...c, pass });
    }
  return out;
}

const GOOD_TASKS = [
  { id: "good1", dependencies: [] },
  { id: "good2", dependencies: [] },
  { id: "good3", dependencies: ["good1"] },
];

function assignments(runId, hostile, goodSandbox) {
  const tasks = GOOD_TASKS.map((g) => ({
    ...g,
    agent: "good",
    context_path: "ctx/task.md",
    command: ["bash", GOOD],
    ...(goodSandbox ? { sandbox: goodSandbox } : {}),
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

/** `goodSandbox`: the good tasks' sandbox setting, if any; `env`: more of termorch's environment. */
async function oneRun(box, dir, runId, hostile, secrets, config, { goodSandbox = null, env = {} } = {}) {
  const repo = makeRepo(dir);
  const runDir = join(dir, "run");
  mkdirSync(runDir);
  const file = join(runDir, "assignments.json");
  writeFileSync(file, JSON.stringify(assignments(runId, hostile, goodSandbox), null, 2));
  const before = git(repo, "rev-parse", "HEAD").trim();
  const gitBefore = gitState(repo);
  const r = await termorch(box, ["run", file, "--config", config], {
    env: { API_TOKEN: secrets.token, DB_PASSWORD: secrets.password, ...env },
    timeoutMs: 300_000,
  });
  let report = null;
  try {
    report = JSON.parse(readFileSync(join(runDir, "execution_report.json"), "utf8"));
  } catch {}
  return { repo, runDir, before, gitBefore, r, report };
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
  writeFileSync(
    config,
    JSON.stringify({
      defaults: { kill_grace_s: opts.mode === "smoke" ? 1 : 2 },
      // The tty cases' agent (issue 35): the hostile agent in the pane's terminal.
      agents: { "hostile-tty": { command: ["bash", HOSTILE], tty: true } },
    }),
  );
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
    // The sandbox pass: a check that did not hold with the sandbox on (or a gate's, either way);
    // one that held with it off (the probe could not have seen an escape); the allowed server
    // not reached with the sandbox on or off.
    sandboxNotHeld: 0,
    sandboxControlsHeld: 0,
    allowedServerNotReached: 0,
    // Checks of a case marked `known` that did not hold with the sandbox on: reported, not judged.
    sandboxKnownGaps: 0,
    outcomes: {},
    sandbox: {},
  };
  const failures = [];
  const fail = (k, c, what) =>
    failures.push(`trial ${k} ${c.kind}/${c.variant}${c.pass ? ` (sandbox ${c.pass})` : ""}: ${what}`);

  // The sandbox pass: with --sandbox, or in the long version when this machine can make a sandbox.
  const tools = sandboxTools(box.env.PATH);
  const sandboxPass = "sandbox" in opts.extra || (opts.mode === "long" && typeof tools !== "string");
  if ("sandbox" in opts.extra && typeof tools === "string") {
    console.error(`no sandbox pass on this machine: ${tools}`);
    return 1;
  }
  let world = null;
  let home = null;
  let servers = null;
  if (sandboxPass) {
    // Outside /tmp when it can (see SANDBOX_CASES): the runs' repositories and run directories,
    // and the HOME of their termorch and agents, with a key (its canary written per trial) and a
    // git identity (movebranch commits as the user).
    try {
      world = mkdtempSync(join("/var/tmp", "termorch-rel-hostile-"));
    } catch {
      world = mkdtempSync(join(box.dir, "world-"));
    }
    if (!process.env.HOSTILE_KEEP)
      process.once("exit", () => rmSync(world, { recursive: true, force: true }));
    home = join(world, "home");
    mkdirSync(join(home, ".ssh"), { recursive: true, mode: 0o700 });
    writeFileSync(
      join(home, ".gitconfig"),
      "[user]\n\tname = hostile campaign\n\temail = user@example.invalid\n",
    );
    servers = await startServers(home);
  }

  // The reference: the good tasks alone.
  const refSecrets = { token: "tokREFERENCE0000", password: 'p@ss w/REF+"é&=' };
  const ref = await oneRun(box, join(box.dir, "reference"), "reference", null, refSecrets, config);
  if (!ref.report || ref.r.exitCode !== 0)
    throw new Error(`the reference run failed (exit ${ref.r.exitCode}): ${ref.r.stderr}`);
  const refView = goodView(ref.runDir, ref.report, ref.repo);

  const all = trialsOf(opts, sandboxPass);
  let trials = 0;
  for (let k = 0; k < all.length; k++) {
    if (opts.only !== null && opts.only !== k) continue;
    const c = all[k];
    const rng = prng(trialSeed(opts.seed, k));
    const hex = () => Array.from({ length: 16 }, () => "0123456789abcdef"[rng.int(0, 15)]).join("");
    const secrets = { token: `tok${hex()}`, password: `p@ss w/${hex()}+"é&=` };
    const { pass } = c;
    const dir = join(pass ? world : box.dir, `t${k}`);
    // Under /tmp, as for every kind: a sandboxed agent's writes there land in its private /tmp.
    const scratch = join(box.dir, `t${k}`, "scratch");
    mkdirSync(scratch, { recursive: true });
    const size = c.sizes ? c.sizes[opts.mode === "smoke" ? 1 : 0] + rng.int(0, 4096) : 0;
    // The sandbox pass's canaries: the key in ~/.ssh, the variable in termorch's environment only
    // (the agent is told its name), and the path it asks the allowed server for.
    const canary = pass
      ? {
          key: `key-canary-${hex()}`,
          env: `env-canary-${hex()}`,
          request: `request-${hex()}`,
          keyring: `keyring-canary-${hex()}`,
          unix: `unix-canary-${hex()}`,
          earlier: `earlier-canary-${hex()}`,
        }
      : null;
    if (pass) {
      writeFileSync(
        join(home, ".ssh", "id_ed25519"),
        `-----BEGIN OPENSSH PRIVATE KEY-----\n${canary.key}\n-----END OPENSSH PRIVATE KEY-----\n`,
        { mode: 0o600 },
      );
      rmSync(join(home, "planted-by-agent.txt"), { force: true });
      servers.reset();
    }
    const plants = pass
      ? await trialPlants(c, { box, dir, config, canary, servers, home })
      : { env: {}, undo: () => {} };
    const hostile = {
      id: "hostile",
      // A tty case's agent (the config's): its terminal is the pane's.
      agent: c.tty ? "hostile-tty" : "hostile",
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
        ...(pass
          ? {
              ENV_CANARY_NAME: ENV_CANARY,
              ALLOWED: servers.allowed,
              DENIED: servers.denied,
              REQUEST: canary.request,
              USER_PROCS: String(userProcesses()),
              ...plants.env,
            }
          : {}),
      },
      ...(c.allowed ? { allowed_paths: c.allowed } : {}),
      ...(c.task ?? {}),
      ...(pass === "on" ? { sandbox: { network: [servers.allowed] } } : {}),
    };
    const runId = `h${k}-${c.kind}-${c.variant}${pass ? `-${pass}` : ""}`;
    const t0 = Date.now();
    const run = await oneRun(
      box,
      dir,
      runId,
      hostile,
      secrets,
      config,
      pass
        ? {
            goodSandbox: pass === "on" && "sandbox-good" in opts.extra ? { network: "none" } : null,
            env: { HOME: home, [ENV_CANARY]: canary.env },
          }
        : {},
    );
    plants.undo();
    trials++;
    const { repo, runDir, before, r, report } = run;
    const expect = pass === "on" ? (c.expectOn ?? c.expect) : c.expect;
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
      if (!expect.includes(outcome) && !expect.includes(h.status)) {
        figures.unexpectedOutcomes++;
        fail(k, c, `outcome ${outcome} (expected ${expect.join(" or ")}): ${h.detail}`);
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
    const name = `${c.kind}/${c.variant}${pass ? ` sandbox ${pass}` : ""}`;
    let key = name;
    for (let n = 2; key in figures.outcomes; n++) key = `${name}#${n}`;
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
    const forges = c.kind === "outside-worktree" && c.variant === "c" && pass !== "on";
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
    if (pass) left.processes.push(...processesUnder(world));
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
    // With the sandbox on, what the agent did to the branch and the checkout never happened.
    const damage = branchDamage(
      repo,
      before,
      report,
      pass === "on" ? { ...c, branchMoved: false, mainDirty: undefined } : c,
      scratch,
    );
    if (damage) {
      figures.userBranchDamage++;
      fail(k, c, `user branch: ${damage}`);
    }

    if (pass) {
      const t = trialFacts({
        ...run,
        h,
        outcome,
        home,
        canary,
        hits: servers.hits,
        left: procs,
        ledger,
        scratch,
        victim: plants.victim ?? null,
      });
      const row = `${c.kind}/${c.variant}`;
      figures.sandbox[row] ??= {
        what: c.what,
        off: { trials: 0, held: 0, design: 0, total: 0, outcomes: {} },
        on: { trials: 0, held: 0, design: 0, total: 0, outcomes: {} },
      };
      const tally = figures.sandbox[row][pass];
      tally.trials++;
      tally.outcomes[outcome] = (tally.outcomes[outcome] ?? 0) + 1;
      for (const [what, held, design] of c.checks(t)) {
        tally.total++;
        if (held) tally.held++;
        if (held && design) tally.design++;
        if (!held && pass === "on" && c.known) figures.sandboxKnownGaps++;
        else if (!held && (pass === "on" || c.gate || design)) {
          figures.sandboxNotHeld++;
          fail(k, c, `not held: ${what}`);
        }
        if (held && pass === "off" && !c.gate && !design) {
          figures.sandboxControlsHeld++;
          fail(k, c, `held without the sandbox (the probe could not see an escape): ${what}`);
        }
      }
      // The allowlist lets through what it names: the allowed server answered the agent's request.
      if (c.kind === "connect" && !t.reachedAllowed) {
        figures.allowedServerNotReached++;
        fail(k, c, `the allowed server was not reached: ${JSON.stringify(servers.hits.allowed)}`);
      }
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
  if (process.env.HOSTILE_KEEP) console.log(`kept ${box.dir} ${world ?? ""} (tmux -L ${box.socket})`);
  box.dispose();
  servers?.close();
  if (sandboxPass) {
    console.log(
      `\nsandbox pass (${opts.mode === "smoke" ? "sandbox on once" : "sandbox off once, on twice"} per case; a check: one thing the agent tried, or one effect looked for on the host)`,
    );
    for (const line of sandboxTable(figures.sandbox)) console.log(line);
  }
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
      "sandboxNotHeld",
      "sandboxControlsHeld",
      "allowedServerNotReached",
    ],
    failures,
    notes: [
      "each trial: three good tasks beside one hostile agent in a fresh repository; good tasks compared with a run without it",
      ...(sandboxPass
        ? [
            `sandbox pass: the hostile task sandboxed with only the campaign's loopback server allowed, the good tasks ${"sandbox-good" in opts.extra ? "sandboxed with no network" : "not sandboxed"}, compared with the unsandboxed reference`,
            ...SANDBOX_CASES.filter((c) => c.known).map(
              (c) => `sandboxKnownGaps (${c.kind}/${c.variant}, ${c.what}): ${c.known}`,
            ),
          ]
        : []),
      "agentCommandsRunByTermorch is not a must-be-zero figure: hooks and the fsmonitor are off for termorch's git, but filter and merge drivers of the repository's config are honoured (git-lfs needs them), and an agent with the user's uid can plant one (docs/guides/how-tasks-run.md, the repository's git configuration)",
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
