// `npm run bench [-- NAME... ] [--quick | --smoke] [--json FILE]`: runs the benchmarks (all, or
// the named ones) and prints one table. large-repo also takes --files N | --huge, --tasks N and
// --max-parallel P. Every figure is a ratio or a comparison taken in the same
// run on the same machine (BENCHMARKS.md records the latest ones). --smoke is each benchmark's
// smallest form, every part of it on a tiny workload once: CI runs it (test/bench/) to see that
// each one still produces its figures, which then mean nothing. --list prints the names.
import { writeFileSync } from "node:fs";
import { cleanupAll, machine, row, table } from "./lib.mjs";

const failedRow = (name) => row(name, null, "", { met: false });

export const BENCHES = [
  "overhead",
  "latency",
  "logs",
  "memory",
  "plan",
  "merge",
  "supervisor",
  "large-repo",
  "views",
  "sandbox",
  "redo",
  "bisect",
  "spend",
];
/** Run only when named: the scale-out simulation takes minutes (a private redis-server, 20 workers). */
export const OPT_IN = ["scale"];

export async function main(argv) {
  const names = [];
  const opts = { quick: false, smoke: false, json: null };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === "--quick") opts.quick = true;
    else if (a === "--smoke") opts.smoke = true;
    else if (a === "--list") {
      console.log([...BENCHES, ...OPT_IN].join("\n"));
      return;
    } else if (a === "--json") opts.json = argv[++i];
    else if (a === "--huge") opts.huge = true;
    else if (a === "--files" || a === "--tasks" || a === "--max-parallel") {
      const v = Number(argv[++i]);
      if (!Number.isInteger(v) || v < 1) {
        console.error(`${a} needs a positive whole number`);
        process.exitCode = 2;
        return;
      }
      opts[a === "--max-parallel" ? "maxParallel" : a.slice(2)] = v;
    } else if (a === "--help" || a === "-h") {
      console.log(
        `usage: npm run bench [-- ${[...BENCHES, ...OPT_IN].join("|")} ...] [--quick | --smoke] [--json FILE]`,
      );
      console.log(
        "  --quick: fewer repetitions and smaller sizes; --smoke: every part at its smallest, once (figures meaningless: CI's check that each benchmark runs); --list: the names",
      );
      console.log(
        "  large-repo: [--files N (default 50000; --quick 10000) | --huge (200000 files)] [--tasks N (8)] [--max-parallel P (4)]",
      );
      console.log(
        "  scale (only when named; node bench/scale.js --help for its own options): the bullmq backend with 20 workers",
      );
      return;
    } else if (BENCHES.includes(a) || OPT_IN.includes(a)) names.push(a);
    else {
      console.error(`unknown benchmark "${a}"; choose from ${[...BENCHES, ...OPT_IN].join(", ")}`);
      process.exitCode = 2;
      return;
    }
  }
  const selected = names.length ? names : BENCHES;
  const onSignal = () => {
    cleanupAll();
    process.exit(130);
  };
  process.once("SIGINT", onSignal);
  process.once("SIGTERM", onSignal);
  const m = machine();
  console.log(
    `machine: ${m.cores} cores (${m.cpu}), ${m.memory_gib} GiB, ${m.os}, tmux ${m.tmux}, git ${m.git}, node ${m.node}, perl ${m.perl}; ${m.date}`,
  );
  const results = [];
  try {
    for (const name of selected) {
      const t0 = Date.now();
      console.error(`bench: ${name}…`);
      try {
        const mod = await import(OPT_IN.includes(name) ? `./${name}.js` : `./${name}.mjs`);
        const result = await mod.run(opts);
        console.error(`bench: ${name} done in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
        results.push(result);
      } catch (error) {
        // One broken benchmark must not cost the figures of the others.
        console.error(`bench: ${name} FAILED: ${error?.stack ?? error}`);
        results.push({
          name,
          failed: String(error?.stack ?? error),
          rows: [
            { ...failedRow(name), name: `${name}: FAILED (${String(error?.message ?? error).slice(0, 80)})` },
          ],
          notes: [],
        });
        process.exitCode = 1;
      }
    }
  } finally {
    cleanupAll();
  }
  const rows = results.flatMap((r) => r.rows);
  console.log(table(rows));
  for (const r of results) for (const n of r.notes ?? []) console.log(`- ${n}`);
  if (opts.json) writeFileSync(opts.json, `${JSON.stringify({ machine: m, results }, null, 2)}\n`);
  if (rows.some((r) => r.met === false)) console.log("Some targets were not met (met? = NO).");
}

if (import.meta.url === `file://${process.argv[1]}`) {
  await main(process.argv.slice(2));
}
