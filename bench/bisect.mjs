// A red integration bisected (issue 36): what finding the task that broke the run-level gate
// costs, for N tasks, against the same run whose tasks break nothing, in the same benchmark
// (interleaved), both with on_gate_failure "bisect_and_fix":
//   (a) N tasks, each writing its own file: the gate passes on the integration (one gate run);
//   (b) the same, but the task at two thirds of the merge order writes BROKEN: the gate is red, the
//       bisect runs it on the base and on probes of the first k tasks until it finds that task,
//       which is given a fix (its agent, seeing the gate's output in its prompt, writes it right),
//       then the gate runs on the merge with the fix and on the new integration.
// The agents and the gate are a line of shell, so what is measured is termorch's part: each
// probe's commit and scratch worktree, the gate's process, the fix's redo, the merge going on.

import { execFileSync } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
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

const AGENT = [
  "bash",
  "-c",
  'if grep -q "check failed" "$TERMORCH_PROMPT_FILE"; then echo fixed > "$TERMORCH_TASK_ID.txt"; else echo "$TEXT" > "$TERMORCH_TASK_ID.txt"; fi',
];
const CHECK =
  'for f in *.txt; do if grep -qx BROKEN "$f"; then echo "check failed: $f" >&2; exit 1; fi; done';

async function once(n, broken) {
  const dir = tempDir("bisect");
  const ws = makeWorkspace(dir, { git: true });
  writeFileSync(join(ws, "check.sh"), `${CHECK}\n`);
  const g = (...a) => execFileSync("git", ["-C", ws, ...a], { stdio: "ignore" });
  g("add", "-A");
  g("-c", "user.name=bench", "-c", "user.email=bench@example.invalid", "commit", "-q", "-m", "the gate");
  const culprit = Math.floor((2 * n) / 3);
  const file = writeAssignments(
    dir,
    "bisect",
    Array.from({ length: n }, (_, i) => ({
      id: `t${String(i + 1).padStart(2, "0")}`,
      command: AGENT,
      env: { TEXT: broken && i + 1 === culprit ? "BROKEN" : `t${i + 1}` },
      expect_changes: true,
    })),
  );
  const doc = JSON.parse(readFileSync(file, "utf8"));
  writeFileSync(
    file,
    JSON.stringify({
      ...doc,
      success_criteria: { tests_cmd: "sh check.sh" },
      mode: { merge: { on_gate_failure: "bisect_and_fix" } },
    }),
  );
  const r = await termorchRun(file, uniqueSocket("bisect"));
  const report = JSON.parse(readFileSync(join(dir, "execution_report.json"), "utf8"));
  const found = report.merge.culprit;
  const expected = broken ? `t${String(culprit).padStart(2, "0")}` : null;
  const ok =
    report.merge.result === "success" &&
    (found?.task ?? null) === expected &&
    (!broken || found.fixed === true);
  removeTemp(dir);
  if (!ok)
    throw new Error(`merge ${report.merge.result}, culprit ${found?.task ?? "none"} (expected ${expected})`);
  return { ...r, gateRuns: found?.gate_runs ?? 1, bisectMs: found?.time_ms ?? 0, probes: found?.probes ?? 0 };
}

export async function run(opts = {}) {
  const sizes = opts.smoke ? [4] : [8, 32];
  const reps = opts.smoke || opts.quick ? 1 : 3;
  const rows = [];
  for (const n of sizes) {
    const green = [];
    const red = [];
    // Interleaved, so a slow moment of the machine hits both variants alike.
    for (let i = 0; i < reps; i++) {
      green.push(await once(n, false));
      red.push(await once(n, true));
    }
    const A = median(green.map((r) => r.wall));
    const B = median(red.map((r) => r.wall));
    const gateRuns = median(red.map((r) => r.gateRuns));
    const bisectMs = median(red.map((r) => r.bisectMs));
    rows.push(
      row(`bisect ${n} tasks: none breaks the gate (a), wall`, A, "s"),
      row(`bisect ${n} tasks: one breaks it, found and fixed (b), wall (b/a)`, B, "s", { baseline: A }),
      row(
        `bisect ${n} tasks: the bisect's gate runs (integration, base, probes; at most ${2 + Math.ceil(Math.log2(n))})`,
        gateRuns,
        "",
      ),
      row(`bisect ${n} tasks: the bisect's time (base and probes)`, bisectMs, "ms"),
      row(`bisect ${n} tasks: per probe`, bisectMs / Math.max(1, gateRuns - 1), "ms"),
      row(
        `bisect ${n} tasks: what finding and fixing adds to the run's wall, (b) - (a)`,
        (B - A) * 1000,
        "ms",
      ),
      row(`bisect ${n} tasks: culprit found and fixed`, `${red.length}/${red.length}`, "", {
        met: true,
        check: true,
      }),
    );
  }
  return { name: "bisect", rows, notes: [] };
}
