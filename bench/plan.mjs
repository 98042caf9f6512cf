// 5. Planning at scale: validate + plan (`termorch run --dry-run`) of generated DAGs with
// 1,000, 10,000 and 50,000 tasks and 3 edges per task (each task depends on 3 random tasks
// among the 100 before it). Wall time of the whole command; the baseline is the same command
// on 1 task (Node's start and module loading), so the growth shows what planning costs.
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { BIN, makeWorkspace, median, removeTemp, row, tempDir, timed } from "./lib.mjs";

function dag(n) {
  // mulberry32: a small seeded PRNG, so every run plans the same DAG.
  let seed = 42;
  const rnd = (k) => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return Math.floor((((t ^ (t >>> 14)) >>> 0) / 4294967296) * k);
  };
  const tasks = [];
  for (let i = 0; i < n; i++) {
    const deps = new Set();
    const span = Math.min(i, 100);
    while (deps.size < Math.min(3, i)) deps.add(`t${i - 1 - rnd(span)}`);
    tasks.push({
      id: `t${i}`,
      agent: "bench",
      context_path: "ctx/task.md",
      command: ["true"],
      dependencies: [...deps],
    });
  }
  return { run_id: `plan-${n}`, tasks, environment: { workspace_dir: "ws" } };
}

async function dryRun(dir, n, reps) {
  const file = join(dir, `a${n}.json`);
  writeFileSync(file, JSON.stringify(dag(n)));
  const walls = [];
  for (let i = 0; i < reps; i++) {
    const r = await timed(process.execPath, [BIN, "run", file, "--dry-run", "--out", join(dir, `out${n}`)]);
    if (r.code !== 0) throw new Error(`dry run of ${n} tasks exited ${r.code}: ${r.stderr.slice(-1000)}`);
    walls.push(r.wall);
  }
  return median(walls);
}

/** 1k, 10k (the target's size) and 50k tasks; --smoke: 100, 500, 1k. */
const sizesOf = (opts) => (opts.smoke ? [100, 500, 1000] : [1000, 10000, 50000]);
const TARGET_SIZE = 10000;
const k = (n) => (n >= 1000 ? `${n / 1000}k` : `${n}`);

export async function run(opts = {}) {
  const reps = opts.smoke || opts.quick ? 1 : 3;
  const [small, middle, large] = sizesOf(opts);
  const dir = tempDir("plan");
  makeWorkspace(dir);
  const base = await dryRun(dir, 1, reps);
  const rows = [row("plan: dry run of 1 task (start-up baseline)", base, "s")];
  const walls = {};
  for (const n of [small, middle, large]) {
    walls[n] = await dryRun(dir, n, n === large ? 1 : reps);
    rows.push(
      row(`plan: validate + plan, ${n} tasks, ${3 * n - 6} edges (dry run)`, walls[n], "s", {
        baseline: base,
        ...(n === TARGET_SIZE ? { target: { value: 1, text: "< 1 s" }, ratio: null } : {}),
      }),
    );
    if (n === TARGET_SIZE) rows.at(-1).met = walls[n] < 1;
  }
  rows.push(
    row(
      `plan: growth ${k(small)}→${k(middle)}, ms per extra task`,
      ((walls[middle] - walls[small]) / (middle - small)) * 1000,
      "ms",
    ),
  );
  rows.push(
    row(
      `plan: growth ${k(middle)}→${k(large)}, ms per extra task`,
      ((walls[large] - walls[middle]) / (large - middle)) * 1000,
      "ms",
    ),
  );
  removeTemp(dir);
  return {
    name: "plan",
    rows,
    notes: [
      `plan: wall of \`termorch run FILE --dry-run\` (median of ${reps}; ${k(large)}: 1 run), start-up included.`,
    ],
  };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const { main } = await import("./run.js");
  await main(["plan", ...process.argv.slice(2)]);
}
