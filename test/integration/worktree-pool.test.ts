import {
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  utimesSync,
  writeFileSync,
} from "node:fs";
import { join } from "node:path";
import { execa } from "execa";
import { describe, expect, it } from "vitest";
import {
  BIN,
  cliEnv,
  git,
  lines,
  POOL_DIR,
  ROOT,
  readReport,
  termorch,
  testFile,
  worktreesInUse,
  writeAssignments,
} from "./harness.js";

const PROBE_SH = join(ROOT, "test", "fixtures", "agents", "pool-probe.sh");
const { socket, workspace } = testFile("pool");

/** A repository with ignored build output and a linked node_modules, and a probe folder. */
function poolWorkspace() {
  const ws = workspace();
  writeFileSync(join(ws.repo, ".gitignore"), "build/\nnode_modules/\n");
  git(ws.repo, "add", ".gitignore");
  git(ws.repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "ignore");
  mkdirSync(join(ws.repo, "node_modules", "dep"), { recursive: true });
  writeFileSync(join(ws.repo, "node_modules", "dep", "index.js"), "module.exports = 1;\n");
  const probe = join(ws.dir, "probe");
  mkdirSync(probe);
  return { ...ws, probe };
}

/** Runs the probe as tasks `ids` of run `runId`; its run directory is `<dir>/<runId>`. */
async function probeRun(
  ws: ReturnType<typeof poolWorkspace>,
  runId: string,
  ids: string[],
  opts: { env?: Record<string, Record<string, string>>; fault?: string; config?: string } = {},
) {
  const file = writeAssignments(
    ws.dir,
    ids.map((id) => ({ id, command: ["bash", PROBE_SH], env: { PROBE: ws.probe, ...opts.env?.[id] } })),
    // Every task starts at once: none gets the worktree of another of its run.
    {
      run_id: runId,
      environment: {
        workspace_dir: "repo",
        worktree_include: ["node_modules"],
        resource_limits: { max_parallel: 8 },
      },
    },
    `${runId}.json`,
  );
  const args = ["run", file, "--out", join(ws.dir, runId), ...(opts.config ? ["--config", opts.config] : [])];
  return termorch(args, { socket, ...(opts.fault ? { env: { TERMORCH_FAULT: opts.fault } } : {}) });
}

/** The events of one kind in a run's ledger, with their task. */
function events(runDir: string, type: string): { task_id?: string; data: Record<string, unknown> }[] {
  return readFileSync(join(runDir, "events.jsonl"), "utf8")
    .split("\n")
    .filter(Boolean)
    .map((l) => JSON.parse(l))
    .filter((e) => e.type === type);
}

const reusedTasks = (runDir: string): string[] =>
  events(runDir, "task.worktree")
    .filter((e) => e.data.reused === true)
    .map((e) => e.task_id!);

/** What the probe sees in a fresh `git worktree add` of `commit`, with the include link made as termorch makes it. */
async function freshProbe(ws: ReturnType<typeof poolWorkspace>, commit: string, runId: string, task: string) {
  const path = join(ws.dir, `fresh-${runId}-${task}`);
  git(ws.repo, "worktree", "add", "-q", "-b", `fresh/${runId}/${task}`, path, commit);
  symlinkSync(join(ws.repo, "node_modules"), join(path, "node_modules"));
  // What termorch adds to every task's worktree: the (empty) folder of $TERMORCH_DECISION.
  mkdirSync(join(path, ".termorch"));
  const probe = join(ws.dir, `fresh-probe-${runId}-${task}`);
  mkdirSync(probe);
  await execa("bash", [PROBE_SH], {
    cwd: path,
    env: { PROBE: probe, TERMORCH_RUN_ID: `fresh-${runId}`, TERMORCH_TASK_ID: task },
  });
  git(ws.repo, "worktree", "remove", "--force", path);
  git(ws.repo, "branch", "-D", `fresh/${runId}/${task}`, `probe-fresh-${runId}-${task}`);
  return readFileSync(join(probe, `fresh-${runId}-${task}.txt`), "utf8");
}

const worktreePaths = (repo: string): string[] =>
  git(repo, "worktree", "list", "--porcelain")
    .split("\n")
    .filter((l) => l.startsWith("worktree "))
    .map((l) => l.slice("worktree ".length));

/** The repository's worktrees that are in termorch's pool. */
const pooledHere = (repo: string): string[] =>
  worktreePaths(repo).filter((p) => p.startsWith(`${POOL_DIR}/`));

describe("the warm worktree pool", () => {
  it("hands a later run a worktree the agent cannot tell from a fresh one, as the base moves", async () => {
    const ws = poolWorkspace();
    for (const [n, runId] of ["p1", "p2", "p3"].entries()) {
      const base = git(ws.repo, "rev-parse", "main").trim();
      const r = await probeRun(ws, runId, ["A", "B"]);
      expect(r.exitCode, r.stderr).toBe(0);
      const runDir = join(ws.dir, runId);
      expect(readReport(runDir).merge.result).toBe("success");
      // The first run has an empty pool; every later one takes both worktrees from it.
      expect(reusedTasks(runDir).sort()).toEqual(n === 0 ? [] : ["A", "B"]);
      for (const task of ["A", "B"]) {
        const seen = readFileSync(join(ws.probe, `${runId}-${task}.txt`), "utf8");
        // Only the include link is untracked (.gitignore's `node_modules/` matches folders only).
        expect(seen).toContain("--- status\n?? node_modules\n--- files");
        expect(seen).toBe(await freshProbe(ws, base, runId, task));
      }
      // Nothing of the run is left but its pooled worktrees: no branch, no folder of its own.
      expect(git(ws.repo, "for-each-ref", "--format=%(refname)", "refs/heads/termorch/")).toBe("");
      expect(events(runDir, "run.cleaned")[0]!.data).toMatchObject({ pooled: 2, removed: 0 });
      expect(pooledHere(ws.repo)).toHaveLength(2);
    }
    // The merged result is every run's lines, and the include link was never followed.
    expect(readFileSync(join(ws.repo, "f-A.txt"), "utf8")).toBe("p1 A\np2 A\np3 A\n");
    expect(readFileSync(join(ws.repo, "node_modules", "dep", "index.js"), "utf8")).toBe(
      "module.exports = 1;\n",
    );

    // `termorch clean` (every run) empties the pool.
    const cleaned = await termorch(["clean"], { socket });
    expect(cleaned.exitCode, cleaned.stderr).toBe(0);
    expect(cleaned.stdout).toContain("emptied the warm worktree pool: 2 worktrees removed");
    expect(worktreePaths(ws.repo)).toEqual([git(ws.repo, "rev-parse", "--show-toplevel").trim()]);
    expect(existsSync(POOL_DIR)).toBe(false);
  }, 120_000);

  it("hands a run's later tasks the worktrees of its finished ones", async () => {
    const ws = poolWorkspace();
    const file = writeAssignments(
      ws.dir,
      [
        { id: "A", dependencies: [] },
        { id: "B", dependencies: ["A"] },
        { id: "C", dependencies: ["B"] },
      ].map((t) => ({ ...t, command: ["bash", PROBE_SH], env: { PROBE: ws.probe } })),
      { run_id: "chain", environment: { workspace_dir: "repo", worktree_include: ["node_modules"] } },
      "chain.json",
    );
    const r = await termorch(["run", file, "--out", join(ws.dir, "chain")], { socket });
    expect(r.exitCode, r.stderr).toBe(0);
    // One worktree served the whole chain: each task took the one its dependency left.
    expect(reusedTasks(join(ws.dir, "chain"))).toEqual(["B", "C"]);
    const gitDirs = ["A", "B", "C"].map((t) => readFileSync(join(ws.probe, `chain-${t}.gitdir`), "utf8"));
    expect(new Set(gitDirs).size).toBe(1);
    // B started from A's result, C from B's.
    expect(readFileSync(join(ws.probe, "chain-C.txt"), "utf8")).toContain("./f-B.txt");
    expect(readFileSync(join(ws.repo, "f-A.txt"), "utf8")).toBe("chain A\n");
    expect(pooledHere(ws.repo)).toHaveLength(1);
  }, 120_000);

  it("keeps within its bounds: worktrees per repository, and disk", async () => {
    const ws = poolWorkspace();
    const one = join(ws.dir, "one.json");
    writeFileSync(one, JSON.stringify({ git: { pool: { max_worktrees: 1 } } }));
    const r1 = await probeRun(ws, "b1", ["A", "B", "C"], { config: one });
    expect(r1.exitCode, r1.stderr).toBe(0);
    expect(events(join(ws.dir, "b1"), "run.cleaned")[0]!.data).toMatchObject({ pooled: 1, removed: 2 });
    expect(pooledHere(ws.repo)).toHaveLength(1);
    const noDisk = join(ws.dir, "no-disk.json");
    writeFileSync(noDisk, JSON.stringify({ git: { pool: { max_disk_mb: 0 } } }));
    const r2 = await probeRun(ws, "b2", ["A", "B"], { config: noDisk });
    expect(r2.exitCode, r2.stderr).toBe(0);
    // It took the pooled one, and could give nothing back.
    expect(reusedTasks(join(ws.dir, "b2"))).toHaveLength(1);
    expect(events(join(ws.dir, "b2"), "run.cleaned")[0]!.data).toMatchObject({ pooled: 0, removed: 2 });
    expect(pooledHere(ws.repo)).toEqual([]);
  }, 120_000);

  it("never pools a worktree with index flags, and never hands out one that was written into", async () => {
    const ws = poolWorkspace();
    const r1 = await probeRun(ws, "d1", ["A", "B", "C"], { env: { C: { FLAG: "1" } } });
    expect(r1.exitCode, r1.stderr).toBe(0);
    // C's worktree has README.md marked assume-unchanged: removed, not pooled.
    expect(events(join(ws.dir, "d1"), "run.cleaned")[0]!.data).toMatchObject({ pooled: 2, removed: 1 });
    const pooled = pooledHere(ws.repo);
    expect(pooled).toHaveLength(2);
    // Someone writes into both pooled worktrees: an untracked file, a changed tracked file.
    writeFileSync(join(pooled[0]!, "stray.txt"), "left here\n");
    writeFileSync(join(pooled[1]!, "README.md"), "changed\n");

    const base = git(ws.repo, "rev-parse", "main").trim();
    const r2 = await probeRun(ws, "d2", ["A", "B"]);
    expect(r2.exitCode, r2.stderr).toBe(0);
    expect(reusedTasks(join(ws.dir, "d2"))).toEqual([]);
    for (const task of ["A", "B"]) {
      expect(readFileSync(join(ws.probe, `d2-${task}.txt`), "utf8")).toBe(
        await freshProbe(ws, base, "d2", task),
      );
    }
    // The dirty ones are gone; the pool holds the run's two clean worktrees instead.
    const now = worktreePaths(ws.repo);
    for (const p of pooled) expect(now).not.toContain(p);
    expect(now.filter((p) => p.startsWith(POOL_DIR))).toHaveLength(2);
  }, 120_000);

  it("never gives two concurrent runs the same pooled worktree", async () => {
    const ws = poolWorkspace();
    const warm = await probeRun(ws, "w1", ["A", "B", "C", "D"]);
    expect(warm.exitCode, warm.stderr).toBe(0);
    expect(pooledHere(ws.repo)).toHaveLength(4);
    // Two runs on two folders of the same repository (a lock per folder), whose six agents all
    // run at once (a barrier): six worktrees in use together, four of them from the pool.
    for (const sub of ["left", "right"]) {
      mkdirSync(join(ws.repo, sub, "ctx"), { recursive: true });
      writeFileSync(join(ws.repo, sub, "ctx", "task.md"), "# do it\n");
    }
    git(ws.repo, "add", "-A");
    git(ws.repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "folders");
    const barrier = join(ws.dir, "barrier");
    mkdirSync(barrier);
    const runs = (["left", "right"] as const).map((sub) => {
      const ids = sub === "left" ? ["L1", "L2", "L3"] : ["R1", "R2", "R3"];
      const file = writeAssignments(
        ws.dir,
        ids.map((id) => ({
          id,
          command: ["bash", PROBE_SH],
          env: { PROBE: ws.probe, BARRIER: `${barrier}:6` },
        })),
        {
          run_id: `c-${sub}`,
          environment: { workspace_dir: `repo/${sub}`, resource_limits: { max_parallel: 3 } },
        },
        `c-${sub}.json`,
      );
      return execa(process.execPath, [BIN, "run", file, "--out", join(ws.dir, sub)], {
        reject: false,
        env: cliEnv(socket),
        timeout: 120_000,
      });
    });
    const results = await Promise.all(runs);
    for (const r of results) expect(r.stderr).toMatch(/3\/3 tasks succeeded/);
    const gitDirs = readdirSync(ws.probe)
      .filter((f) => f.startsWith("c-") && f.endsWith(".gitdir"))
      .map((f) => readFileSync(join(ws.probe, f), "utf8").trim());
    expect(gitDirs).toHaveLength(6);
    expect(new Set(gitDirs).size).toBe(6);
    const reused = ["left", "right"].flatMap((sub) => reusedTasks(join(ws.dir, sub)));
    expect(reused).toHaveLength(4);
  }, 180_000);

  it("finishes a clean-up killed after the report with termorch clean", async () => {
    const ws = poolWorkspace();
    const r = await probeRun(ws, "k1", ["A", "B", "C"], { fault: "kill-in-clean-up" });
    expect(r.exitCode).not.toBe(0);
    // The report came first, whole, and says what happened.
    expect(readReport(join(ws.dir, "k1"))).toMatchObject({ exit_code: 0, merge: { result: "success" } });
    expect(events(join(ws.dir, "k1"), "run.cleaned")).toEqual([]);
    const left = git(ws.repo, "for-each-ref", "--format=%(refname)", "refs/heads/termorch/k1/");
    expect(left).not.toBe("");
    const cleaned = await termorch(["clean", "k1"], { socket });
    expect(cleaned.exitCode, cleaned.stdout + cleaned.stderr).toBe(0);
    expect(git(ws.repo, "for-each-ref", "--format=%(refname)", "refs/heads/termorch/k1/")).toBe("");
    const paths = worktreePaths(ws.repo);
    expect(paths.filter((p) => p.includes("/worktrees/k1/"))).toEqual([]);
    expect(git(ws.repo, "worktree", "list", "--porcelain")).not.toContain("prunable");
    // The one pooled before the kill is as good as any: the next run takes it.
    const again = await probeRun(ws, "k2", ["A"]);
    expect(again.exitCode, again.stderr).toBe(0);
    expect(reusedTasks(join(ws.dir, "k2"))).toEqual(["A"]);
    expect(lines(join(ws.repo, "f-A.txt"))).toEqual(["k1 A", "k2 A"]);
  }, 120_000);

  it("checks the worktrees of independent tasks out at the same time", async () => {
    const ws = poolWorkspace();
    // A smudge filter that waits until two checkouts run it at once (bounded: fails alone).
    const meet = join(ws.dir, "meet");
    mkdirSync(meet);
    const filter = join(ws.dir, "smudge.sh");
    writeFileSync(
      filter,
      `#!/bin/sh\ntouch "${meet}/$$"\ni=0\nwhile [ "$(ls "${meet}" | wc -l)" -lt 2 ]; do i=$((i+1)); [ $i -gt 200 ] && exit 1; sleep 0.05; done\ncat\n`,
      { mode: 0o755 },
    );
    writeFileSync(join(ws.repo, ".gitattributes"), "slow.txt filter=slow\n");
    writeFileSync(join(ws.repo, "slow.txt"), "slow\n");
    git(ws.repo, "add", ".gitattributes", "slow.txt");
    git(ws.repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "slow");
    git(ws.repo, "config", "filter.slow.smudge", filter);
    git(ws.repo, "config", "filter.slow.clean", "cat");
    git(ws.repo, "config", "filter.slow.required", "true");
    const config = join(ws.dir, "no-pool.json");
    writeFileSync(config, JSON.stringify({ git: { pool: { max_worktrees: 0 } } }));
    const r = await probeRun(ws, "par", ["A", "B"], { config });
    expect(r.exitCode, r.stderr).toBe(0);
    expect(readdirSync(meet).length).toBeGreaterThanOrEqual(2);
    // The pool is off: both worktrees were removed.
    expect(events(join(ws.dir, "par"), "run.cleaned")[0]!.data).toMatchObject({ pooled: 0, removed: 2 });
  }, 120_000);
});

describe("what an agent leaves that git does not see", () => {
  const commitAll = (repo: string, what: string) => {
    git(repo, "add", "-A");
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", what);
  };

  it("keeps a worktree with a submodule, changed permissions or a hard link out of the pool", async () => {
    const ws = poolWorkspace();
    // A submodule entry whose folder no one checks out: git neither looks into it nor cleans it.
    const blob = git(ws.repo, "rev-parse", "HEAD").trim();
    git(ws.repo, "update-index", "--add", "--cacheinfo", `160000,${blob},lib`);
    mkdirSync(join(ws.repo, "lib"));
    git(ws.repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "gitlink");
    const r1 = await probeRun(ws, "s1", ["A"], {
      env: { A: { EXTRA: "mkdir -p lib && echo left > lib/note.txt" } },
    });
    expect(r1.exitCode, r1.stderr).toBe(0);
    expect(events(join(ws.dir, "s1"), "run.cleaned")[0]!.data).toMatchObject({ pooled: 0, removed: 1 });

    const plain = poolWorkspace();
    const outside = join(plain.dir, "outside-link");
    const r2 = await probeRun(plain, "m1", ["A", "B"], {
      env: { A: { EXTRA: "chmod 600 README.md" }, B: { EXTRA: `ln README.md ${outside}` } },
    });
    expect(r2.exitCode, r2.stderr).toBe(0);
    expect(events(join(plain.dir, "m1"), "run.cleaned")[0]!.data).toMatchObject({ pooled: 0, removed: 2 });
    expect(pooledHere(plain.repo)).toEqual([]);
  }, 120_000);

  it("writes a reused worktree's files as a checkout would, when an agent or the rules wrote them otherwise", async () => {
    const ws = poolWorkspace();
    writeFileSync(join(ws.repo, ".gitattributes"), "*.txt eol=crlf\n");
    writeFileSync(join(ws.repo, "notes.cfg"), "notes\n");
    commitAll(ws.repo, "crlf");
    // The agent writes new.txt with LF; git calls it unchanged, a checkout writes CRLF.
    const r1 = await probeRun(ws, "e1", ["A"], { env: { A: { EXTRA: "printf 'one\\n' > new.txt" } } });
    expect(r1.exitCode, r1.stderr).toBe(0);
    const [pooled] = pooledHere(ws.repo);
    expect(readFileSync(join(pooled!, "new.txt"), "utf8")).toBe("one\r\n");
    // An agent that changes the attributes: its worktree is not pooled.
    const r2 = await probeRun(ws, "e2", ["A"], {
      env: { A: { EXTRA: "echo '*.md eol=crlf' >> .gitattributes" } },
    });
    expect(r2.exitCode, r2.stderr).toBe(0);
    expect(reusedTasks(join(ws.dir, "e2"))).toEqual(["A"]);
    expect(events(join(ws.dir, "e2"), "run.cleaned")[0]!.data).toMatchObject({ pooled: 0, removed: 1 });
    // The rules change while a worktree is pooled: it is taken, and every file written again.
    const r3 = await probeRun(ws, "e3", ["A"]);
    expect(r3.exitCode, r3.stderr).toBe(0);
    // Its files long written (not racily clean, which would have git rewrite them anyway).
    const [waiting] = pooledHere(ws.repo);
    utimesSync(join(waiting!, "notes.cfg"), new Date(2000, 0, 1), new Date(2000, 0, 1));
    git(waiting!, "update-index", "--refresh");
    git(ws.repo, "config", "core.autocrlf", "true");
    const od = join(ws.dir, "notes-as-seen");
    const r4 = await probeRun(ws, "e4", ["A"], { env: { A: { EXTRA: `cp notes.cfg ${od}` } } });
    expect(r4.exitCode, r4.stderr).toBe(0);
    expect(reusedTasks(join(ws.dir, "e4"))).toEqual(["A"]);
    expect(readFileSync(od, "utf8")).toBe("notes\r\n");
  }, 120_000);

  it("takes none while the repository's worktrees get more than files, and none with flags set while pooled", async () => {
    const ws = poolWorkspace();
    expect((await probeRun(ws, "w1", ["A", "B"])).exitCode).toBe(0);
    const [first, second] = pooledHere(ws.repo);
    // A flag set while pooled hides a change: that worktree is never handed out.
    git(first!, "update-index", "--skip-worktree", "README.md");
    writeFileSync(join(first!, "README.md"), "written while pooled\n");
    // The main worktree gets its own config: `git worktree add` would copy it, the pool cannot.
    git(ws.repo, "config", "extensions.worktreeConfig", "true");
    git(ws.repo, "config", "--worktree", "user.name", "Worktree User");
    const seen = join(ws.dir, "user-seen");
    expect(
      (await probeRun(ws, "w2", ["A"], { env: { A: { EXTRA: `git config user.name > ${seen}` } } })).exitCode,
    ).toBe(0);
    expect(reusedTasks(join(ws.dir, "w2"))).toEqual([]);
    expect(readFileSync(seen, "utf8")).toBe("Worktree User\n");
    git(ws.repo, "config", "--worktree", "--unset", "user.name");
    rmSync(join(git(ws.repo, "rev-parse", "--absolute-git-dir").trim(), "config.worktree"));
    git(ws.repo, "config", "--unset", "extensions.worktreeConfig");
    const w3 = await probeRun(ws, "w3", ["A", "B"]);
    expect(w3.exitCode, w3.stderr).toBe(0);
    // The flagged one was dropped; the other (and w2's) served.
    expect(worktreePaths(ws.repo)).not.toContain(first);
    expect(readFileSync(join(ws.repo, "README.md"), "utf8")).toBe("hello\n");
    expect(second).toBeDefined();
  }, 120_000);

  it("leaves nothing of a worktree its agent locked, or whose removal was interrupted", async () => {
    const ws = poolWorkspace();
    const r1 = await probeRun(ws, "l1", ["A"], { env: { A: { EXTRA: 'git worktree lock "$PWD"' } } });
    expect(r1.exitCode, r1.stderr).toBe(0);
    expect(git(ws.repo, "worktree", "list", "--porcelain")).not.toContain("locked");
    expect(worktreesInUse(ws.repo)).toEqual([]);
    // A failed run keeps its worktree; a removal of it killed halfway leaves a folder without
    // its .git file, which git then forgets (any later prune): clean still removes it.
    const r2 = await probeRun(ws, "l2", ["A"], { env: { A: { EXTRA: "exit 1" } } });
    expect(r2.exitCode).toBe(1);
    const [kept] = worktreesInUse(ws.repo);
    rmSync(join(kept!, ".git"));
    git(ws.repo, "worktree", "prune");
    const cleaned = await termorch(["clean", "l2"], { socket });
    expect(cleaned.exitCode, cleaned.stdout).toBe(0);
    expect(cleaned.stdout).toContain("a worktree whose removal had been interrupted");
    expect(existsSync(kept!)).toBe(false);
  }, 120_000);
});
