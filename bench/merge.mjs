// 6. Merge at scale: 100 task branches, each touching its own file — pre-merge check
// (in-memory merge-tree), integration commit, update of the checked-out target — through the
// git module directly and through `termorch run` (100 tasks that each write their own file);
// and a variant with one conflict at the end, which must be found without changing anything.
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import {
  makeWorkspace,
  ROOT,
  removeTemp,
  row,
  tempDir,
  termorchRun,
  uniqueSocket,
  writeAssignments,
} from "./lib.mjs";

const GIT_ENV = {
  ...process.env,
  GIT_CONFIG_GLOBAL: "/dev/null",
  GIT_CONFIG_NOSYSTEM: "1",
  GIT_AUTHOR_NAME: "bench",
  GIT_AUTHOR_EMAIL: "bench@example.invalid",
  GIT_COMMITTER_NAME: "bench",
  GIT_COMMITTER_EMAIL: "bench@example.invalid",
};
const git = (repo, args, input) =>
  execFileSync("git", args, {
    cwd: repo,
    env: { ...GIT_ENV, ...(input?.env ?? {}) },
    input: input?.stdin,
    encoding: "utf8",
  }).trim();

/** A branch off `base` whose one commit writes `file` (plumbing only, no checkout). */
function branch(repo, base, name, file, content) {
  const env = { GIT_INDEX_FILE: join(repo, ".git", "bench.index") };
  git(repo, ["read-tree", `${base}^{tree}`], { env });
  const blob = git(repo, ["hash-object", "-w", "--stdin"], { stdin: content });
  git(repo, ["update-index", "--add", "--cacheinfo", `100644,${blob},${file}`], { env });
  const tree = git(repo, ["write-tree"], { env });
  const commit = git(repo, ["commit-tree", tree, "-p", base, "-m", name]);
  git(repo, ["update-ref", `refs/heads/termorch/bench/${name}`, commit]);
  return commit;
}

function snapshot(repo) {
  return [
    git(repo, ["for-each-ref", "--format=%(refname) %(objectname)"]),
    git(repo, ["rev-parse", "HEAD"]),
    git(repo, ["status", "--porcelain", "--ignored"]),
    git(repo, ["worktree", "list", "--porcelain"]),
  ].join("\n");
}

async function moduleMerge(conflict, n) {
  const { checkMerge, createIntegrationCommit, advanceTarget } = await import(
    join(ROOT, "dist", "git", "merge.js")
  );
  const dir = tempDir("merge");
  const repo = makeWorkspace(dir, { git: true });
  const base = git(repo, ["rev-parse", "HEAD"]);
  const items = [];
  const name = (i) => `T${String(i).padStart(3, "0")}`;
  for (let i = 0; i < n; i++) {
    const task = name(i);
    items.push({
      task,
      commit: branch(repo, base, task, `tasks/${task}.txt`, `output of ${task}\n`),
      start: base,
    });
  }
  if (conflict) {
    // One more task, last in the order, writing a middle task's file (T050's of 100) differently.
    items.push({
      task: name(n),
      commit: branch(repo, base, name(n), `tasks/${name(n / 2)}.txt`, "something else\n"),
      start: base,
    });
  }
  const before = snapshot(repo);
  const t0 = performance.now();
  const check = await checkMerge(repo, base, items);
  const t1 = performance.now();
  let result;
  if (conflict) {
    const unchanged = snapshot(repo) === before;
    result = {
      check: (t1 - t0) / 1000,
      found: check.conflicts.length === 1 && check.tree === null,
      unchanged,
    };
  } else {
    if (check.tree === null) throw new Error(`unexpected conflicts: ${JSON.stringify(check.conflicts)}`);
    const integration = await createIntegrationCommit(repo, {
      tree: check.tree,
      parents: check.parents,
      message: "termorch: integrate bench",
      branch: "termorch/bench/integration",
    });
    const t2 = performance.now();
    const adv = await advanceTarget(repo, {
      ref: "refs/heads/main",
      expectedOld: base,
      newCommit: integration,
    });
    const t3 = performance.now();
    if (adv.status !== "advanced") throw new Error(`advance: ${adv.status}`);
    const files = git(repo, ["ls-files", "tasks"]).split("\n").length;
    if (files !== n) throw new Error(`merge: ${files} files in the target, ${n} expected`);
    result = {
      check: (t1 - t0) / 1000,
      integrate: (t2 - t1) / 1000,
      advance: (t3 - t2) / 1000,
      total: (t3 - t0) / 1000,
    };
  }
  removeTemp(dir);
  return result;
}

/** `termorch run` of n tasks writing their own file (git workspace); merge time from the ledger. */
async function runMerge(conflict, n) {
  const dir = tempDir("merge-run");
  const repo = makeWorkspace(dir, { git: true });
  const tasks = Array.from({ length: n }, (_, i) => ({
    id: `T${i}`,
    command: ["sh", "-c", `echo "output of T${i}" > "task-T${i}.txt"`],
  }));
  if (conflict) tasks.push({ id: "Tx", command: ["sh", "-c", `echo "something else" > task-T${n / 2}.txt`] });
  const file = writeAssignments(dir, "merge", tasks);
  const before = [
    git(repo, ["rev-parse", "refs/heads/main"]),
    git(repo, ["rev-parse", "HEAD"]),
    git(repo, ["status", "--porcelain", "--ignored"]),
  ].join("\n");
  let code = 0;
  try {
    await termorchRun(file, uniqueSocket("merge"), ["--max-parallel", "8"]);
  } catch (error) {
    code = /exited (\d+)/.exec(String(error))?.[1];
  }
  const events = readFileSync(join(dir, "events.jsonl"), "utf8")
    .trim()
    .split("\n")
    .map((l) => JSON.parse(l));
  const lastTask = Math.max(...events.filter((e) => e.type === "task.success").map((e) => Date.parse(e.ts)));
  const merge = events.find((e) => e.type.startsWith("merge."));
  const seconds = (Date.parse(merge.ts) - lastTask) / 1000;
  const result = { seconds, type: merge.type, code: Number(code) };
  if (process.env.BENCH_DEBUG) console.error(result, before);
  if (conflict) {
    // The workspace itself must be untouched: its branch, HEAD, index and files. (Task branches
    // and worktrees of the failed run are kept for inspection, by design.)
    const mine = (r) =>
      [
        git(r, ["rev-parse", "refs/heads/main"]),
        git(r, ["rev-parse", "HEAD"]),
        git(r, ["status", "--porcelain", "--ignored"]),
      ].join("\n");
    result.unchanged = mine(repo) === before;
  } else {
    const files = git(repo, ["ls-files"])
      .split("\n")
      .filter((f) => f.startsWith("task-")).length;
    if (files !== n) throw new Error(`termorch merge: ${files} task files in the target, ${n} expected`);
  }
  removeTemp(dir);
  return result;
}

export async function run(opts = {}) {
  const n = opts.smoke ? 8 : 100;
  const target = { value: 15, text: "< 15 s" };
  const m = await moduleMerge(false, n);
  const c = await moduleMerge(true, n);
  const rows = [
    row(`merge ${n} branches (git module): pre-merge check`, m.check, "s"),
    row(`merge ${n} branches (git module): integration commit`, m.integrate, "s"),
    row(`merge ${n} branches (git module): target update`, m.advance, "s"),
    row(`merge ${n} branches (git module): total`, m.total, "s", { target }),
    row(`merge ${n} + 1 conflicting (git module): conflict found`, c.check, "s", {
      target: { value: 15, text: "found, nothing changed" },
      met: c.found && c.unchanged,
      check: true,
    }),
  ];
  // --quick leaves out the runs; --smoke has them, small.
  if (opts.smoke || !opts.quick) {
    const r = await runMerge(false, n);
    rows.push(
      row(`merge via termorch run, ${n} tasks: last task → merge.success`, r.seconds, "s", {
        target,
        met: r.type === "merge.success" && r.seconds < 15,
      }),
    );
    const rc = await runMerge(true, n);
    rows.push(
      row(`merge via termorch run, ${n} + 1 conflicting: → merge.conflict (exit 3)`, rc.seconds, "s", {
        target: { value: 15, text: "exit 3, workspace unchanged" },
        met: rc.type === "merge.conflict" && rc.code === 3 && rc.unchanged,
      }),
    );
  }
  return {
    name: "merge",
    rows,
    notes: [
      "merge: the module figures time checkMerge / createIntegrationCommit / advanceTarget on branches built with plumbing; the run figures are ledger time from the last task's success to the merge event (pre-merge check, integration commit and worktree, gates, target update).",
    ],
  };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const { main } = await import("./run.js");
  await main(["merge", ...process.argv.slice(2)]);
}
