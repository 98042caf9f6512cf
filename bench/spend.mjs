// Spend read while attempts run (issue 37): what following a CLI's streamed usage costs an
// attempt, against today's run of the same tasks without a budget (nothing read until each
// attempt ends), interleaved in the same benchmark. The agent is a stand-in `opencode` first on
// PATH that prints E step_finish events (each with its tokens), a few milliseconds apart, as the
// real CLI prints one per model call; (b) sets a run budget no task reaches, so every attempt's
// stdout is followed and each step's usage counted and journaled as it comes.
import { chmodSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import {
  makeWorkspace,
  median,
  removeTemp,
  row,
  tempDir,
  termorchRun,
  uniqueSocket,
  writeAssignments,
} from "./lib.mjs";

/** A stand-in for `opencode run --format json`: E steps of 1,000 + 10 tokens, `gapS` apart. */
function standIn(dir, steps, gapS) {
  const bin = join(dir, "bin");
  mkdirSync(bin, { recursive: true });
  const step =
    '{"type":"step_finish","sessionID":"ses_bench","part":{"type":"step-finish","tokens":{"input":1000,"output":10,"cache":{"read":0,"write":0}},"cost":0.001}}';
  writeFileSync(
    join(bin, "opencode"),
    `#!/bin/bash\ncat > /dev/null\nfor ((i = 0; i < ${steps}; i++)); do printf '%s\\n' '${step}'; sleep ${gapS}; done\nprintf '%s\\n' '{"type":"text","sessionID":"ses_bench","part":{"text":"done"}}'\n`,
  );
  chmodSync(join(bin, "opencode"), 0o755);
  return bin;
}

async function once({ tasks, steps, gapS, budget }) {
  const dir = tempDir("spend");
  makeWorkspace(dir);
  const bin = standIn(dir, steps, gapS);
  const file = writeAssignments(
    dir,
    "spend",
    Array.from({ length: tasks }, (_, i) => ({ id: `t${i}`, agent: "opencode", expect_changes: false })),
    { resource_limits: { max_parallel: tasks, ...(budget ? { max_tokens: 1e12 } : {}) } },
  );
  const r = await termorchRun(file, uniqueSocket("spend"), [], { PATH: `${bin}:${process.env.PATH}` });
  const report = JSON.parse(readFileSync(join(dir, "execution_report.json"), "utf8"));
  const counted = report.summary.usage?.input_tokens ?? 0;
  removeTemp(dir);
  return { ...r, counted };
}

export async function run(opts = {}) {
  const reps = opts.smoke ? 1 : opts.quick ? 2 : 5;
  const shape = opts.smoke
    ? { tasks: 2, steps: 5, gapS: 0.001 }
    : { tasks: 4, steps: opts.quick ? 100 : 300, gapS: 0.005 };
  const today = [];
  const streamed = [];
  for (let i = 0; i < reps; i++) {
    today.push(await once({ ...shape, budget: false }));
    streamed.push(await once({ ...shape, budget: true }));
  }
  const A = { wall: median(today.map((r) => r.wall)), cpu: median(today.map((r) => r.clientCpu)) };
  const B = { wall: median(streamed.map((r) => r.wall)), cpu: median(streamed.map((r) => r.clientCpu)) };
  const label = `${shape.tasks} tasks × ${shape.steps} steps`;
  const expected = shape.tasks * shape.steps * 1000;
  return {
    name: "spend",
    rows: [
      row(`spend ${label}: no budget, termorch CPU (a)`, A.cpu, "s"),
      row(`spend ${label}: usage followed as it streams, termorch CPU (b/a)`, B.cpu, "s", {
        baseline: A.cpu,
      }),
      row(
        `spend ${label}: what following adds per attempt, CPU (b-a)/tasks`,
        ((B.cpu - A.cpu) / shape.tasks) * 1000,
        "ms",
      ),
      row(
        `spend ${label}: per streamed step, CPU (b-a)/(tasks×steps)`,
        ((B.cpu - A.cpu) / (shape.tasks * shape.steps)) * 1e6,
        "µs",
      ),
      row(`spend ${label}: wall (b/a)`, B.wall, "s", { baseline: A.wall }),
      row(
        `spend ${label}: every step counted in both`,
        `${[...today, ...streamed].filter((r) => r.counted === expected).length}/${reps * 2}`,
        "",
        {
          met: [...today, ...streamed].every((r) => r.counted === expected),
          check: true,
        },
      ),
    ],
    notes: [],
  };
}
