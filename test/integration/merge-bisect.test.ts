import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { execa } from "execa";
import { describe, expect, it, onTestFinished } from "vitest";
import { FeedbackBlock } from "../../src/contract/feedback-block.js";
import type { Report } from "../../src/contract/report.js";
import { type RunView, StatusView } from "../../src/contract/status-view.js";
import { parseCursor, readChanges, taskSummary } from "../../src/mcp/follow.js";
import { frame } from "../../src/watch/model.js";
import {
  BIN,
  cliEnv,
  git,
  lastAnswer,
  lines,
  ROOT,
  readReport,
  termorch,
  testFile,
  waitFor,
  worktreesInUse,
  writeAssignments,
} from "./harness.js";

const { socket, workspace } = testFile("merge-bisect");
const AGENT = join(ROOT, "test", "fixtures", "agents", "gate-fix.sh");
/**
 * The run-level gate: every task's file must not say BROKEN. Given a file, the probe of a and b
 * alone waits for it first (a test looks at the bisect meanwhile).
 */
const CHECK = `if [ -n "\${1:-}" ] && [ -e b.txt ] && [ ! -e c.txt ]; then
  while [ ! -e "$1" ]; do sleep 0.05; done
fi
for f in *.txt; do
  if grep -qx BROKEN "$f"; then echo "check failed: $f says BROKEN" >&2; exit 1; fi
done
echo "check passed"
`;
const FAILURE = "check failed: c.txt says BROKEN";

/** A repository whose first commit holds the gate's script (and `files`). */
function repo(files: Record<string, string> = {}) {
  const ws = workspace();
  writeFileSync(join(ws.repo, "check.sh"), CHECK);
  for (const [name, text] of Object.entries(files)) writeFileSync(join(ws.repo, name), text);
  git(ws.repo, "add", "-A");
  git(ws.repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "the gate");
  return ws;
}

const task = (id: string, env: Record<string, string>, extra: Record<string, unknown> = {}) => ({
  id,
  agent: "gate-fix",
  command: ["sh", AGENT],
  env: { TEXT: `${id} was here`, ...env } as Record<string, string>,
  ...extra,
});

/** Four tasks; the third, c, breaks the gate; d depends on it (it carries c's result). */
function fourTasks(counter: string, fixedBy: string) {
  return [
    task("a", { COUNTER: counter }),
    task("b", { COUNTER: counter }),
    task("c", { COUNTER: counter, TEXT: "BROKEN", FIXED_BY: fixedBy, FIX: "c was fixed" }),
    task("d", { COUNTER: counter }, { dependencies: ["c"] }),
  ];
}

async function run(
  ws: ReturnType<typeof repo>,
  tasks: ReturnType<typeof task>[],
  merge: Record<string, unknown>,
): Promise<{ exitCode: number; report: Report; stderr: string }> {
  const file = writeAssignments(ws.dir, tasks as never, {
    success_criteria: { tests_cmd: "sh check.sh" },
    mode: { merge },
  });
  const r = await termorch(["run", file], { socket });
  return { exitCode: r.exitCode, report: readReport(ws.dir), stderr: r.stderr };
}

const events = (dir: string) =>
  readFileSync(join(dir, "events.jsonl"), "utf8")
    .trim()
    .split("\n")
    .map((l) => JSON.parse(l) as { type: string; task_id?: string; data: Record<string, unknown> });

describe("merge.on_gate_failure", () => {
  it("bisect: four tasks, the third breaks the run-level gate: the report names it, nothing is merged", async () => {
    const ws = repo();
    const head = git(ws.repo, "rev-parse", "HEAD");
    const { exitCode, report, stderr } = await run(ws, fourTasks(join(ws.dir, "counter"), FAILURE), {
      on_gate_failure: "bisect",
    });
    expect(exitCode).toBe(1);
    expect(stderr).toContain(
      `\n  c's merge turned run.tests_cmd red (bisect: 4 gate runs); the gate's output ends: ${FAILURE}\n`,
    );
    expect(report.summary.validation).toBe("failed");
    expect(report.merge).toMatchObject({ result: "skipped", on_gate_failure: "bisect", redone: [] });
    expect(report.merge.reason).toContain("the bisect found that c's merge turns it red");
    expect(report.merge.order).toEqual(["a", "b", "c", "d"]);
    // The base, then k = 2 (green), then k = 3 (red): c.
    expect(report.merge.bisects).toHaveLength(1);
    const [b] = report.merge.bisects;
    expect(b).toMatchObject({ gate: "run.tests_cmd", outcome: "culprit", culprit: "c", gate_runs: 4 });
    expect(b!.base).toMatchObject({ passed: true });
    expect(b!.probes.map((p) => [p.k, p.task, p.passed])).toEqual([
      [2, "b", true],
      [3, "c", false],
    ]);
    expect(report.merge.culprit).toMatchObject({
      task: "c",
      gate: "run.tests_cmd",
      probes: 2,
      gate_runs: 4,
      fixed: null,
      probe_commit: b!.probes[1]!.commit,
      commit: report.tasks.find((t) => t.id === "c")!.commit,
    });
    expect(report.merge.culprit!.output_tail).toContain(FAILURE);
    expect(report.merge.culprit!.time_ms).toBeGreaterThan(0);
    // The probes are commits of the integration: k = 2 holds a's and b's work and not c's.
    const probe2 = b!.probes[0]!.commit;
    expect(git(ws.repo, "ls-tree", "--name-only", probe2).split("\n")).toEqual(
      expect.arrayContaining(["a.txt", "b.txt", "check.sh"]),
    );
    expect(git(ws.repo, "ls-tree", "--name-only", probe2)).not.toContain("c.txt");
    // Never on a branch, never left as a worktree; the user's branch did not move.
    expect(git(ws.repo, "branch", "-a", "--contains", probe2).trim()).toBe("");
    expect(git(ws.repo, "rev-parse", "HEAD")).toBe(head);
    expect(worktreesInUse(ws.repo).filter((w) => w.includes("integration"))).toEqual([]);
    // Each probe is in the ledger.
    const probes = events(ws.dir).filter((e) => e.type === "merge.probe");
    expect(probes.map((e) => [e.data.k, e.data.task, e.data.passed])).toEqual([
      [0, null, true],
      [2, "b", true],
      [3, "c", false],
    ]);
    expect(probes[1]!.data).toMatchObject({ of: 4, commit: probe2, duration_ms: expect.any(Number) });
    // No task ran twice.
    expect(lines(join(ws.dir, "counter")).sort()).toEqual(["a 1", "b 1", "c 1", "d 1"]);
  });

  it("bisect_and_fix: the culprit's fix sees the gate's output, the rest merges after it, and the gate ends green", async () => {
    const ws = repo();
    const counter = join(ws.dir, "counter");
    const { exitCode, report, stderr } = await run(ws, fourTasks(counter, FAILURE), {
      on_gate_failure: "bisect_and_fix",
    });
    expect(exitCode).toBe(0);
    expect(stderr).toContain(
      "\n  c's merge turned run.tests_cmd red (bisect: 4 gate runs); a new attempt of it fixed that\n",
    );
    expect(report.summary.validation).toBe("passed");
    expect(report.merge).toMatchObject({ result: "success", on_gate_failure: "bisect_and_fix" });
    expect(report.merge.culprit).toMatchObject({ task: "c", fixed: true });
    expect(report.merge.redone).toHaveLength(1);
    const fix = report.merge.redone[0]!;
    expect(fix).toMatchObject({
      task: "c",
      cause: "gate",
      redo: 1,
      attempt: 2,
      outcome: "resolved",
      conflict_section: "artifacts/c/attempt-2/feedback.md",
      run_gate: { name: "run.tests_cmd", passed: true },
    });
    // Its attempt record: from the integration, told what went wrong.
    expect(report.tasks.find((t) => t.id === "c")!.attempt_history).toMatchObject([
      { n: 1, started_from: null, feedback: null, reason: null },
      { n: 2, started_from: "integration", feedback: "artifacts/c/attempt-2/feedback.md", reason: null },
    ]);
    // Its start: the integration of a and b (the green probe before it).
    expect(fix.start_commit).toBe(report.merge.bisects[0]!.probes[0]!.commit);
    // Merged: c's fix, and d's own work replayed on it (d carried c's broken result).
    const at = (path: string) => git(ws.repo, "show", `HEAD:${path}`);
    expect(at("c.txt")).toBe("c was fixed\n");
    expect(at("d.txt")).toBe("d was here\n");
    expect(readFileSync(join(ws.repo, "c.txt"), "utf8")).toBe("c was fixed\n");
    expect(git(ws.repo, "rev-parse", "HEAD").trim()).toBe(report.merge.result_commit);
    // The fix's prompt carried the feedback section with the gate's output; kept as its artifact.
    const prompt = readFileSync(join(ws.dir, "artifacts", "c", "prompt.md"), "utf8");
    expect(prompt).toContain("## What went wrong in attempt 1");
    expect(prompt).toContain(FAILURE);
    const feedback = readFileSync(join(ws.dir, "artifacts", "c", "attempt-2", "feedback.md"), "utf8");
    expect(prompt).toContain(feedback.trim());
    const block = FeedbackBlock.parse(
      JSON.parse(/````?json termorch-feedback\n([\s\S]*?)\n````?/.exec(feedback)![1]!),
    );
    expect(block).toMatchObject({
      task: "c",
      attempt: 1,
      reason: "validation",
      next_starts_from: "integration",
      changed_files: ["c.txt"],
    });
    expect(block.tests).toMatchObject({ command: "sh check.sh", exit_code: 1 });
    expect(block.tests!.tail).toContain(FAILURE);
    expect(block.failed_gates.map((g) => g.name)).toEqual(["run.tests_cmd"]);
    // c ran twice (its fix), nothing else did; no ref or worktree of the run is left.
    expect(lines(counter).sort()).toEqual(["a 1", "b 1", "c 1", "c 2", "d 1"]);
    expect(git(ws.repo, "for-each-ref", "refs/termorch/")).toBe("");
    expect(worktreesInUse(ws.repo)).toEqual([]);
    const kinds = events(ws.dir).map((e) => e.type);
    expect(kinds).toContain("merge.bisect_finished");
    expect(
      events(ws.dir)
        .filter((e) => e.type === "merge.redo_started")
        .map((e) => [e.task_id, e.data.cause]),
    ).toEqual([["c", "gate"]]);
  });

  it("bisect_and_fix with conflicts redone: a task redone before the fix is merged again on the fixed merge, not with the culprit's old result", async () => {
    // a and e both write line 2 of shared.txt: e, merged last, is redone on top of a. Then the
    // gate is red, c is fixed, and the merge is taken again: e's redo held c's broken result.
    const ws = repo({ "shared.txt": "one\ntwo\nthree\n" });
    const counter = join(ws.dir, "counter");
    const [a, b, c, d] = fourTasks(counter, FAILURE);
    const { exitCode, report } = await run(
      ws,
      [{ ...a!, env: { ...a!.env, SHARED: "1" } }, b!, c!, d!, task("e", { COUNTER: counter, SHARED: "1" })],
      { on_conflict: "redo", on_gate_failure: "bisect_and_fix" },
    );
    expect(exitCode).toBe(0);
    expect(report.merge.redone.map((r) => [r.task, r.cause, r.outcome])).toEqual([
      ["e", "conflict", "resolved"],
      ["c", "gate", "resolved"],
    ]);
    const at = (path: string) => git(ws.repo, "show", `HEAD:${path}`);
    expect(at("c.txt")).toBe("c was fixed\n");
    expect(at("shared.txt")).toBe("one\na\nthree\ne\n");
    expect(report.merge.bisects).toHaveLength(1);
    expect(lines(counter).sort()).toEqual(["a 1", "b 1", "c 1", "c 2", "d 1", "e 1", "e 2"]);
  });

  it("bisect_and_fix whose fixes run out: the culprit's earlier result is back and the run halts naming it", async () => {
    const ws = repo();
    const counter = join(ws.dir, "counter");
    const head = git(ws.repo, "rev-parse", "HEAD");
    // Its fixes never read the failure: c stays broken.
    const { exitCode, report } = await run(ws, fourTasks(counter, "never in any prompt"), {
      on_gate_failure: "bisect_and_fix",
      gate_fix_attempts: 2,
    });
    expect(exitCode).toBe(1);
    expect(report.summary.validation).toBe("failed");
    expect(report.merge.result).toBe("skipped");
    expect(report.merge.reason).toContain("c's merge turns it red");
    expect(report.merge.reason).toContain("c's fixes did not make the run-level gate pass (fix 2/2");
    expect(report.merge.culprit).toMatchObject({ task: "c", fixed: false });
    expect(report.merge.redone.map((r) => [r.task, r.cause, r.redo, r.outcome, r.reason])).toEqual([
      ["c", "gate", 1, "failed", "validation"],
      ["c", "gate", 2, "failed", "validation"],
    ]);
    expect(
      report.tasks.find((t) => t.id === "c")!.attempt_history!.map((a) => [a.n, a.started_from, a.reason]),
    ).toEqual([
      [1, null, null],
      [2, "integration", "validation"],
      [3, "integration", "validation"],
    ]);
    // The second fix was told how the first went.
    const second = readFileSync(join(ws.dir, "artifacts", "c", "attempt-3", "feedback.md"), "utf8");
    expect(second).toContain("## What went wrong in attempt 2");
    expect(second).toContain(FAILURE);
    // Its earlier result is back: its record, branch and changes.patch.
    const c = report.tasks.find((t) => t.id === "c")!;
    expect(c).toMatchObject({ status: "success", attempts: 3 });
    expect(git(ws.repo, "show", `${c.commit}:c.txt`)).toBe("BROKEN\n");
    expect(git(ws.repo, "rev-parse", c.branch!).trim()).toBe(c.commit);
    expect(readFileSync(join(ws.dir, "artifacts", "c", "changes.patch"), "utf8")).toContain("+BROKEN");
    expect(git(ws.repo, "rev-parse", "HEAD")).toBe(head);
    // The bisect of the restored integration was not run again.
    expect(report.merge.bisects).toHaveLength(1);
    expect(lines(counter).sort()).toEqual(["a 1", "b 1", "c 1", "c 2", "c 3", "d 1"]);
  });

  it("a gate red on the base itself: said at once, no probe, no task blamed", async () => {
    const ws = repo({ "old.txt": "BROKEN\n" });
    const { exitCode, report } = await run(ws, fourTasks(join(ws.dir, "counter"), FAILURE), {
      on_gate_failure: "bisect_and_fix",
    });
    expect(exitCode).toBe(1);
    expect(report.summary.validation).toBe("failed");
    expect(report.merge.reason).toMatch(
      /run\.tests_cmd fails on the base commit \w+ itself, before any task merged/,
    );
    expect(report.merge.culprit).toBeNull();
    expect(report.merge.bisects).toHaveLength(1);
    expect(report.merge.bisects[0]).toMatchObject({
      outcome: "red_on_base",
      probes: [],
      culprit: null,
      gate_runs: 2,
    });
    expect(report.merge.bisects[0]!.base).toMatchObject({ passed: false });
    expect(report.merge.redone).toEqual([]);
    expect(
      events(ws.dir)
        .filter((e) => e.type === "merge.probe")
        .map((e) => e.data.k),
    ).toEqual([0]);
  });

  it("halt (the default): a red gate stops the run as before, with no bisect", async () => {
    const ws = repo();
    const { exitCode, report } = await run(ws, fourTasks(join(ws.dir, "counter"), FAILURE), {});
    expect(exitCode).toBe(1);
    expect(report.merge).toMatchObject({ on_gate_failure: "halt", bisects: [], culprit: null });
    expect(report.merge.reason).toMatch(/^run-level validation failed on the integration commit/);
    expect(existsSync(join(ws.dir, "events.jsonl"))).toBe(true);
    expect(events(ws.dir).some((e) => e.type === "merge.probe")).toBe(false);
  });

  it('refuses "bisect_and_fix" with workers (backend bullmq), before anything starts (exit 2); "bisect" is not refused', async () => {
    const ws = repo();
    const config = join(ws.dir, "config.json");
    writeFileSync(config, JSON.stringify({ backend: "bullmq", redis: "redis://127.0.0.1:1" }));
    const tasks = fourTasks(join(ws.dir, "counter"), FAILURE);
    const file = writeAssignments(ws.dir, tasks as never, {
      mode: { merge: { on_gate_failure: "bisect_and_fix" } },
    });
    for (const command of ["validate", "run"]) {
      const r = await termorch([command, file, "--config", config], { socket });
      expect(r.exitCode).toBe(2);
      expect(r.stderr).toContain(
        'field mode.merge.on_gate_failure: on_gate_failure "bisect_and_fix" is not supported with backend bullmq',
      );
    }
    expect(existsSync(join(ws.dir, "state.json"))).toBe(false);
    expect(git(ws.repo, "branch", "--list", "termorch/*")).toBe("");
    const bisect = writeAssignments(
      ws.dir,
      tasks as never,
      { mode: { merge: { on_gate_failure: "bisect" } } },
      "b.json",
    );
    const r = await termorch(["validate", bisect, "--config", config], { socket });
    expect(r.stderr).not.toContain("on_gate_failure");
  });

  it("a bisect under way, and the culprit's fix, are shown by status, watch, MCP wait and report.html", async () => {
    const ws = repo();
    const probed = join(ws.dir, "probed");
    const fixed = join(ws.dir, "fixed");
    const tasks = fourTasks(join(ws.dir, "counter"), FAILURE);
    tasks[2]!.env.HOLD = fixed;
    const file = writeAssignments(ws.dir, tasks as never, {
      success_criteria: { tests_cmd: `sh check.sh ${probed}` },
      mode: { merge: { on_gate_failure: "bisect_and_fix" } },
    });
    const runId = JSON.parse(readFileSync(file, "utf8")).run_id as string;
    const run = termorch(["run", file], { socket });
    // Whatever the test found, the run is let go.
    onTestFinished(() => {
      for (const f of [probed, fixed]) writeFileSync(f, "");
    });
    const runView = async (): Promise<RunView | null> => {
      const r = await termorch(["status", runId, "--json"], { socket });
      // Not registered yet: exit 2.
      return r.exitCode === 0 ? (StatusView.parse(JSON.parse(r.stdout)).runs[0] ?? null) : null;
    };
    // `watch | cat` from the start: a line for each step of the merge it shows.
    let view = await lastAnswer(runView, (v) => v !== null, 30_000);
    const watch = execa(process.execPath, [BIN, "watch", runId], {
      reject: false,
      cwd: ROOT,
      env: cliEnv(socket),
      stdin: "ignore",
    });
    let out = "";
    watch.stdout?.on("data", (d: Buffer) => {
      out += d.toString();
    });
    // The probe of a and b holds: the second gate run of about three.
    const probing = (v: RunView | null) => v?.merge?.probe?.k === 2;
    view = await lastAnswer(runView, probing, 60_000);
    const line = "bisecting run.tests_cmd: probe 2 of ~3 (the first 2 tasks, up to b)";
    expect(view!.merge).toEqual({
      step: "bisecting",
      probe: { n: 2, of: 3, k: 2, task: "b" },
      culprit: null,
      red_on_base: false,
      line,
    });
    expect((await termorch(["status", runId], { socket })).stdout).toContain(`\n  merge: ${line}\n`);
    const board = frame({
      view: {
        schema_version: 1,
        generated_at: new Date().toISOString(),
        runs: [view!],
        problems: [],
        queued: [],
      },
      selected: null,
      offset: 0,
      width: 160,
      height: 12,
      now: Date.now(),
      scope: runId,
      message: null,
      keys: [],
    }).lines.map((l) =>
      l
        .map((seg) => seg.text)
        .join("")
        .trimEnd(),
    );
    expect(board, board.join("\n")).toContain(`  merge: ${line}`);
    expect(taskSummary(view!).merge).toBe(line);
    await waitFor(() => out.includes(`${runId} - merge ${line}`), 20_000, "watch's probe line");
    const before = await readChanges(ws.dir, parseCursor(undefined));
    expect(before.changes.filter((c) => c.event === "merge_probe")).toMatchObject([
      { k: 0, of: 4, task: null, passed: true },
    ]);

    // Released: the probe passes, k = 3 fails, c is the culprit and its fix holds.
    writeFileSync(probed, "");
    const fixing = (v: RunView | null) => v?.tasks.find((t) => t.id === "c")?.attempts === 2;
    view = await lastAnswer(runView, fixing, 60_000);
    expect(view!.tasks.find((t) => t.id === "c")).toMatchObject({
      state: "redo",
      redo: { cause: "gate", n: 1, of: 2 },
    });
    expect(view!.merge).toMatchObject({
      step: "fixing",
      culprit: "c",
      line: "c's merge turns run.tests_cmd red: fixing it",
    });
    const human = (await termorch(["status", runId], { socket })).stdout;
    expect(human).toContain("  c: fix 1/2, its merge turned run.tests_cmd red");
    expect(human).toContain("  merge: c's merge turns run.tests_cmd red: fixing it");
    await waitFor(() => out.includes(`${runId} c redo wave 1 attempt 2 fix 1/2`), 20_000, "watch's fix line");
    writeFileSync(fixed, "");
    expect((await run).exitCode).toBe(0);
    expect((await watch).exitCode).toBe(0);

    // Reported: the culprit stays in the view; MCP wait heard every step.
    const done = (await runView())!;
    expect(done.merge).toMatchObject({ culprit: "c", line: "culprit c (c's merge turns run.tests_cmd red)" });
    const { changes } = await readChanges(ws.dir, parseCursor(undefined));
    expect(changes.filter((c) => c.event === "merge_probe").map((c) => ("k" in c ? c.k : null))).toEqual([
      0, 2, 3,
    ]);
    expect(changes.find((c) => c.event === "merge_bisected")).toMatchObject({
      culprit: "c",
      red_on_base: false,
      gate_runs: 4,
    });
    expect(changes.find((c) => c.event === "task_redo_started")).toMatchObject({ task: "c", cause: "gate" });
    // report.html: c's first attempt broke the gate, its second is the fix; the probes under the merge.
    const html = readFileSync(join(ws.dir, "report.html"), "utf8");
    expect(html).toMatch(/data-task="c" data-attempt="1" data-outcome="broke_gate"/);
    expect(html).toMatch(/data-task="c" data-attempt="2" data-outcome="success"[^>]*data-redo="1"/);
    expect(
      [...html.matchAll(/class="tl-probe (passed|failed)" data-k="(\d+)"/g)].map((m) => [m[2], m[1]]),
    ).toEqual([
      ["0", "passed"],
      ["2", "passed"],
      ["3", "failed"],
    ]);
    expect(html).toContain("culprit: c");
    expect(html).toContain("<h3>Bisect of the run-level gate</h3>");
  });

  it("cancelled during a probe: the bisect stops there, the probe cut short is no verdict, nothing is merged", async () => {
    const ws = repo();
    const probed = join(ws.dir, "probed");
    const file = writeAssignments(ws.dir, fourTasks(join(ws.dir, "counter"), FAILURE) as never, {
      success_criteria: { tests_cmd: `sh check.sh ${probed}` },
      mode: { merge: { on_gate_failure: "bisect_and_fix" } },
    });
    const runId = JSON.parse(readFileSync(file, "utf8")).run_id as string;
    const head = git(ws.repo, "rev-parse", "HEAD");
    const run = termorch(["run", file], { socket });
    onTestFinished(() => writeFileSync(probed, ""));
    // The probe of a and b holds (the gate waits for a file that never comes): cancel then.
    const probing = (): boolean => {
      try {
        return JSON.parse(readFileSync(join(ws.dir, "state.json"), "utf8")).merge?.probe?.k === 2;
      } catch {
        return false;
      }
    };
    await waitFor(probing, 60_000, "the probe of the first 2 tasks");
    const cancel = await termorch(["cancel", runId], { socket });
    expect(cancel.exitCode, cancel.stderr + cancel.stdout).toBe(0);
    const { exitCode } = await run;
    expect(exitCode).toBe(130);
    const report = readReport(ws.dir);
    expect(report.merge.result).toBe("skipped");
    expect(report.merge.reason).toContain("the run was stopped during its bisect");
    expect(report.merge.culprit).toBeNull();
    expect(
      events(ws.dir)
        .filter((e) => e.type === "merge.probe")
        .map((e) => [e.data.k, e.data.passed]),
    ).toEqual([[0, true]]);
    expect(git(ws.repo, "rev-parse", "HEAD")).toBe(head);
    expect(worktreesInUse(ws.repo).filter((w) => w.includes("integration"))).toEqual([]);
  });
});
