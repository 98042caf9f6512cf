// Conflicts resolved by redo (issue 27): what a redo adds to a run, against the same run whose
// two tasks do not conflict, in the same benchmark (interleaved), both with on_conflict "redo".
//   (a) A and B change different lines of f.txt: merged as they are;
//   (b) A and B change the same line: B conflicts with A and is redone on top of it (its agent,
//       seeing the conflict section in its prompt, keeps A's line and adds its own).
// The agent is a line of bash, so what is measured is termorch's part of a redo: the section, the
// branch move, a fresh worktree and session, the gates, the merge going on.

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
  // On a redo the line merged before it is kept, and its own goes under it.
  'if grep -q "json termorch-conflict" "$TERMORCH_PROMPT_FILE"; then echo "$TERMORCH_TASK_ID" >> f.txt; else sed -i "$LINE s/.*/$TERMORCH_TASK_ID/" f.txt; fi',
];

async function once(conflict) {
  const dir = tempDir("redo");
  const ws = makeWorkspace(dir, { git: true });
  writeFileSync(join(ws, "f.txt"), Array.from({ length: 10 }, (_, i) => `line${i + 1}\n`).join(""));
  const g = (...a) => execFileSync("git", ["-C", ws, ...a], { stdio: "ignore" });
  g("add", "-A");
  g("-c", "user.name=bench", "-c", "user.email=bench@example.invalid", "commit", "-q", "-m", "f");
  const file = writeAssignments(dir, "redo", [
    { id: "A", command: AGENT, env: { LINE: "2" }, expect_changes: true },
    { id: "B", command: AGENT, env: { LINE: conflict ? "2" : "6" }, expect_changes: true },
  ]);
  const doc = JSON.parse(readFileSync(file, "utf8"));
  writeFileSync(file, JSON.stringify({ ...doc, mode: { merge: { on_conflict: "redo" } } }));
  const r = await termorchRun(file, uniqueSocket("redo"));
  const report = JSON.parse(readFileSync(join(dir, "execution_report.json"), "utf8"));
  const redone = report.merge.redone;
  if (report.merge.result !== "success" || redone.length !== (conflict ? 1 : 0))
    throw new Error(`merge ${report.merge.result}, ${redone.length} redo(s)`);
  // The redo itself, from the ledger: merge.redo_started to merge.redo_finished.
  const events = readFileSync(join(dir, "events.jsonl"), "utf8")
    .split("\n")
    .filter(Boolean)
    .map((l) => JSON.parse(l));
  const at = (type) => Date.parse(events.find((e) => e.type === type)?.ts ?? "");
  const span = conflict ? (at("merge.redo_finished") - at("merge.redo_started")) / 1000 : null;
  removeTemp(dir);
  return { ...r, span };
}

export async function run(opts = {}) {
  const reps = opts.smoke ? 1 : opts.quick ? 2 : 7;
  const clean = [];
  const redo = [];
  // Interleaved, so a slow moment of the machine hits both variants alike.
  for (let i = 0; i < reps; i++) {
    clean.push(await once(false));
    redo.push(await once(true));
  }
  const A = { wall: median(clean.map((r) => r.wall)), cpu: median(clean.map((r) => r.cpu)) };
  const B = { wall: median(redo.map((r) => r.wall)), cpu: median(redo.map((r) => r.cpu)) };
  const rows = [
    row("redo: 2 tasks, no conflict (a), wall", A.wall, "s"),
    row("redo: 2 tasks, B redone on top of A (b), wall (b/a)", B.wall, "s", { baseline: A.wall }),
    row("redo: CPU, (b/a)", B.cpu, "s", { baseline: A.cpu }),
    row(
      "redo: one redo, merge.redo_started to redo_finished (median)",
      median(redo.map((r) => r.span)) * 1000,
      "ms",
    ),
    row("redo: what it adds to the run's wall, (b) - (a)", (B.wall - A.wall) * 1000, "ms"),
  ];
  return { name: "redo", rows, notes: [] };
}
