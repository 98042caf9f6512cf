// 1. Orchestration overhead: trivial tasks at max_parallel 8, three ways in one run —
//    (a) the floor: bench/floor.sh (tmux new-session -d + tmux wait-for, via xargs -P8),
//    (b) GNU parallel -j8 running the same command without tmux,
//    (c) termorch run (non-git workspace; and a git workspace, a worktree per task).
// Wall time, CPU of the whole process tree (the tmux server and everything in its panes
// included), per-task figures, ratios. Then 1,000 tasks in 10 waves to show the growth.
import { execFileSync, spawnSync } from "node:child_process";
import { readdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import {
  holdServer,
  killServer,
  makeWorkspace,
  median,
  ROOT,
  removeTemp,
  row,
  serverCpu,
  tempDir,
  termorchRun,
  timed,
  uniqueSocket,
  writeAssignments,
} from "./lib.mjs";

const FLOOR = join(ROOT, "bench", "floor.sh");
const TRUE = execFileSync("bash", ["-c", "command -v true"], { encoding: "utf8" }).trim() || "/bin/true";

/** GNU parallel, installed from Debian's packages when absent (root only). */
export function ensureParallel() {
  const has = () => spawnSync("parallel", ["--version"], { stdio: "ignore" }).status === 0;
  if (has()) return true;
  if (process.getuid?.() !== 0) return false;
  console.error("bench: installing GNU parallel (apt-get install parallel)…");
  const env = { ...process.env, DEBIAN_FRONTEND: "noninteractive" };
  let r = spawnSync("apt-get", ["install", "-y", "-qq", "parallel"], { stdio: "ignore", env });
  if (r.status !== 0) {
    spawnSync("apt-get", ["update", "-qq"], { stdio: "ignore", env });
    r = spawnSync("apt-get", ["install", "-y", "-qq", "parallel"], { stdio: "ignore", env });
  }
  return has();
}

async function floor(n, p, waves = 1) {
  const dir = tempDir("floor");
  const conf = join(dir, "floor.conf");
  // Same server settings as termorch's, except remain-on-exit: the floor's panes just go.
  writeFileSync(conf, "set -s exit-empty off\nset -g history-limit 10000\nset -g default-size 200x50\n");
  const socket = uniqueSocket("floor");
  const hold = holdServer(socket, conf);
  let wall = 0;
  let cpu = 0;
  for (let w = 0; w < waves; w++) {
    const r = await timed(FLOOR, [socket, String(n / waves), String(p), TRUE, `w${w}t`]);
    if (r.code !== 0) throw new Error(`floor.sh failed: ${r.stderr}`);
    wall += r.wall;
    cpu += r.cpu;
  }
  const { server, panes } = serverCpu(hold);
  killServer(socket);
  removeTemp(dir);
  return { wall, cpu: cpu + server + panes, clientCpu: cpu, serverSelfCpu: server, paneCpu: panes };
}

async function gnuParallel(n, p) {
  const r = await timed("bash", ["-c", `seq 1 ${n} | parallel --will-cite -j${p} ${TRUE}`]);
  if (r.code !== 0) throw new Error(`parallel failed: ${r.stderr}`);
  return { wall: r.wall, cpu: r.cpu };
}

async function termorch(n, p, { git = false, waves = 1 } = {}) {
  const dir = tempDir(git ? "git" : "plain");
  makeWorkspace(dir, { git });
  const per = n / waves;
  const tasks = [];
  for (let w = 0; w < waves; w++) {
    for (let i = 0; i < per; i++) {
      tasks.push({
        id: `w${w}t${i}`,
        command: [TRUE],
        dependencies: w === 0 ? [] : [`w${w - 1}t${i}`],
      });
    }
  }
  const file = writeAssignments(dir, "ovh", tasks);
  const args = ["--max-parallel", String(p), ...(waves > 1 ? ["--schedule", "waves"] : [])];
  const r = await termorchRun(file, uniqueSocket(git ? "git" : "plain"), args);
  const ok = readdirSync(join(dir, "status")).filter((f) => f.endsWith(".success")).length;
  removeTemp(dir);
  if (ok !== n) throw new Error(`termorch: ${ok} of ${n} tasks succeeded`);
  return r;
}

/** Repetitions and sizes: the full run, --quick (no growth part), --smoke (every part, tiny). */
function settings(opts) {
  if (opts.smoke) return { reps: 1, n: 16, gitReps: 1, growth: { big: 40, waves: 4 } };
  if (opts.quick) return { reps: 1, n: 200, gitReps: 1, growth: null };
  return { reps: 3, n: 200, gitReps: 2, growth: { big: 1000, waves: 10 } };
}

export async function run(opts = {}) {
  const { reps, n, gitReps, growth } = settings(opts);
  const p = 8;
  const rows = [];
  const notes = [];
  const haveParallel = ensureParallel();
  // Interleaved repetitions, so a slow moment of the machine hits every variant alike.
  const a = [];
  const b = [];
  const c = [];
  for (let i = 0; i < reps; i++) {
    a.push(await floor(n, p));
    if (haveParallel) b.push(await gnuParallel(n, p));
    c.push(await termorch(n, p));
  }
  const gitRuns = [];
  for (let i = 0; i < gitReps; i++) gitRuns.push(await termorch(n, p, { git: true }));
  const A = { wall: median(a.map((r) => r.wall)), cpu: median(a.map((r) => r.cpu)) };
  const B = haveParallel ? { wall: median(b.map((r) => r.wall)), cpu: median(b.map((r) => r.cpu)) } : null;
  const C = { wall: median(c.map((r) => r.wall)), cpu: median(c.map((r) => r.cpu)) };
  const G = { wall: median(gitRuns.map((r) => r.wall)), cpu: median(gitRuns.map((r) => r.cpu)) };
  const target = { value: 1.25, text: "≤ 1.25× floor" };
  rows.push(row(`overhead ${n}×true P${p}: (a) floor tmux+wait-for, wall`, A.wall, "s"));
  if (B) rows.push(row(`overhead ${n}×true P${p}: (b) GNU parallel -j${p}, wall`, B.wall, "s"));
  rows.push(
    row(`overhead ${n}×true P${p}: (c) termorch non-git, wall (c/a)`, C.wall, "s", {
      baseline: A.wall,
      target,
    }),
  );
  if (B)
    rows.push(
      row(`overhead ${n}×true P${p}: termorch non-git vs parallel (c/b)`, C.wall, "s", { baseline: B.wall }),
    );
  rows.push(row(`overhead ${n}×true P${p}: (a) floor, CPU of process tree`, A.cpu, "s"));
  if (B) rows.push(row(`overhead ${n}×true P${p}: (b) GNU parallel, CPU`, B.cpu, "s"));
  rows.push(
    row(`overhead ${n}×true P${p}: (c) termorch non-git, CPU (c/a)`, C.cpu, "s", { baseline: A.cpu }),
  );
  rows.push(row(`overhead per task: floor, wall/N`, (A.wall / n) * 1000, "ms"));
  rows.push(
    row(`overhead per task: termorch non-git, wall/N`, (C.wall / n) * 1000, "ms", {
      baseline: (A.wall / n) * 1000,
    }),
  );
  rows.push(row(`overhead per task: floor, CPU/N`, (A.cpu / n) * 1000, "ms"));
  rows.push(
    row(`overhead per task: termorch non-git, CPU/N`, (C.cpu / n) * 1000, "ms", {
      baseline: (A.cpu / n) * 1000,
    }),
  );
  // Where the CPU goes, per task: the orchestrating process tree (xargs and its tmux clients; Node
  // and the tmux clients it spawns), the tmux server itself, and its panes (the floor's sh and
  // `tmux wait-for -S`; termorch's supervisor; the agent in both). BENCHMARKS.md has the finer split.
  const part = (runs, key) => (median(runs.map((r) => r[key])) / n) * 1000;
  for (const [label, key] of [
    ["orchestrator process tree", "clientCpu"],
    ["tmux server itself", "serverSelfCpu"],
    ["panes (supervisor/shell + agent)", "paneCpu"],
  ]) {
    rows.push(
      row(`overhead per task, CPU split: ${label}, termorch (vs floor)`, part(c, key), "ms", {
        baseline: part(a, key),
      }),
    );
  }
  rows.push(
    row(`overhead ${n}×true P${p}: termorch git (worktree/task), wall (vs a)`, G.wall, "s", {
      baseline: A.wall,
    }),
  );
  rows.push(row(`overhead per task: termorch git, wall/N`, (G.wall / n) * 1000, "ms"));
  rows.push(row(`overhead per task: termorch git, CPU/N`, (G.cpu / n) * 1000, "ms"));
  notes.push(
    `overhead: median of ${reps} interleaved runs; CPU = user+sys of the command's process tree plus the tmux server's (its panes' processes included); the 1.25× target applies to the non-git workspace (the floor has no git); the git run is reported for its cost; the CPU split takes the median of each part separately. Workspaces are created under the temp folder ($TMPDIR): on a file system where creating a file is slow (BENCHMARKS.md, issue 12) termorch pays it per task and the floor does not; TMPDIR=/dev/shm shows the figures without it.`,
  );

  if (growth) {
    const { big, waves } = growth;
    const fa = await floor(big, p, waves);
    const fc = await termorch(big, p, { waves });
    rows.push(row(`overhead ${big} tasks, ${waves} waves: floor, wall`, fa.wall, "s"));
    rows.push(
      row(`overhead ${big} tasks, ${waves} waves: termorch non-git, wall (vs floor)`, fc.wall, "s", {
        baseline: fa.wall,
        target,
      }),
    );
    rows.push(
      row(`growth: floor per-task wall, ${big}/${waves}w vs ${n}/1w`, (fa.wall / big) * 1000, "ms", {
        baseline: (A.wall / n) * 1000,
      }),
    );
    rows.push(
      row(`growth: termorch per-task wall, ${big}/${waves}w vs ${n}/1w`, (fc.wall / big) * 1000, "ms", {
        baseline: (C.wall / n) * 1000,
        target: { value: 1.25, text: "linear (≤ 1.25×)" },
      }),
    );
    rows.push(
      row(`growth: termorch per-task CPU, ${big}/${waves}w vs ${n}/1w`, (fc.cpu / big) * 1000, "ms", {
        baseline: (C.cpu / n) * 1000,
        target: { value: 1.25, text: "linear (≤ 1.25×)" },
      }),
    );
  }
  return { name: "overhead", rows, notes };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const { main } = await import("./run.js");
  await main(["overhead", ...process.argv.slice(2)]);
}
