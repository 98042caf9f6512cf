import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { type LedgerEvent, readLedgerEvents } from "../../src/ledger/ledger.js";
import { buildReport, skippedMerge } from "../../src/report/build.js";
import { escapeHtml, renderReportHtml, renderTimeline } from "../../src/report/html.js";
import { timelineOf } from "../../src/report/timeline.js";
import { newTaskRun } from "../../src/task/task-run.js";

const T0 = Date.parse("2026-01-01T00:00:00.000Z");
const iso = (s: number): string => new Date(T0 + s * 1000).toISOString();
const HASH = "0".repeat(64);

/** A ledger written by hand: each event at `s` seconds after T0. */
function ledger(
  ...lines: Array<[number, string, string | undefined, Record<string, unknown>?]>
): LedgerEvent[] {
  return lines.map(([s, type, task, data = {}], seq) => ({
    schema_version: 1,
    seq,
    ts: iso(s),
    type,
    ...(task === undefined ? {} : { task_id: task }),
    data,
    prev: HASH,
    hash: HASH,
  }));
}

const accepted = (tasks: Array<[string, string[]]>): [number, string, undefined, Record<string, unknown>] => [
  0,
  "run.accepted",
  undefined,
  { run_id: "r1", tasks: tasks.map(([id, dependencies]) => ({ id, agent: "a", dependencies })) },
];
const planned = (
  waves: string[][],
  criticalPath: string[],
  maxParallel = 4,
): [number, string, undefined, Record<string, unknown>] => [
  0,
  "run.planned",
  undefined,
  { waves, critical_path: criticalPath, max_parallel: maxParallel, schedule: "eager" },
];
const launched = (
  s: number,
  task: string,
  attempt: number,
): [number, string, string, Record<string, unknown>] => [
  s,
  "task.launched",
  task,
  {
    attempt,
    session: `termorch-r1-${task}`,
    logs: { stdout: `logs/${task}-${attempt}.out`, stderr: `logs/${task}-${attempt}.err` },
  },
];
const running = (
  s: number,
  task: string,
  attempt: number,
  takenAt: number,
): [number, string, string, Record<string, unknown>] => [
  s,
  "task.running",
  task,
  { attempt, state: "running", started_at: iso(takenAt) },
];
const exited = (
  s: number,
  task: string,
  attempt: number,
  code: number,
  from: number,
): [number, string, string, Record<string, unknown>] => [
  s,
  "task.exited",
  task,
  { attempt, exit_code: code, started_at: iso(from), finished_at: iso(s) },
];
const final = (
  s: number,
  task: string,
  state: "success" | "failed" | "skipped",
  attempt: number,
  reason: string | null = null,
  detail: string | null = null,
): [number, string, string, Record<string, unknown>] => [
  s,
  `task.${state}`,
  task,
  { attempt, state, reason, detail, finished_at: iso(s) },
];

describe("timelineOf", () => {
  it("gives a failed attempt that was retried and its retry one bar each", () => {
    const events = ledger(
      accepted([["a", []]]),
      planned([["a"]], ["a"]),
      running(1, "a", 1, 1),
      launched(1, "a", 1),
      exited(4, "a", 1, 3, 1),
      [4, "task.retrying", "a", { attempt: 1, reason: "exit_code", detail: "exit code 3" }],
      launched(5, "a", 2),
      exited(9, "a", 2, 0, 5),
      final(9, "a", "success", 2),
      [10, "merge.success", undefined, {}],
      [10, "report.written", undefined, {}],
    );
    const tl = timelineOf(events, null, T0 + 60_000);
    expect(tl.live).toBe(false);
    expect(tl.bars.map((b) => [b.task, b.attempt, b.outcome, b.reason])).toEqual([
      ["a", 1, "retried", "exit_code"],
      ["a", 2, "success", null],
    ]);
    expect(tl.bars[0]).toMatchObject({
      start: T0 + 1000,
      end: T0 + 4000,
      exitCode: 3,
      critical: true,
      wave: 1,
    });
    expect(tl.bars[1]!.logs).toEqual({ stdout: "logs/a-2.out", stderr: "logs/a-2.err" });
    expect(tl.merge).toEqual({
      start: T0 + 9000,
      end: T0 + 10_000,
      result: "success",
      redos: 0,
      probes: [],
      culprit: null,
      redOnBase: false,
    });
    expect(tl.end).toBe(T0 + 10_000);
  });

  it("names each attempt's decision: an escalation, then a block; an invalid one by its problems", () => {
    const events = ledger(
      accepted([
        ["a", []],
        ["b", []],
      ]),
      planned([["a", "b"]], ["a"]),
      launched(1, "a", 1),
      exited(3, "a", 1, 0, 1),
      [
        3,
        "task.decision",
        "a",
        { attempt: 1, kind: "valid", status: "escalate_to_max", reason: "too hard", file: "x" },
      ],
      [3, "task.retrying", "a", { attempt: 1, reason: "escalated", detail: null, escalated: true }],
      launched(4, "a", 2),
      exited(6, "a", 2, 0, 4),
      [
        6,
        "task.decision",
        "a",
        { attempt: 2, kind: "valid", status: "blocked", reason: "needs a person", file: "y" },
      ],
      final(6, "a", "failed", 2, "blocked", "its agent says it is blocked: needs a person"),
      launched(1, "b", 1),
      exited(2, "b", 1, 0, 1),
      [
        2,
        "task.decision",
        "b",
        { attempt: 1, kind: "invalid", problems: ["decision.status: bad", "trace: missing"], file: "z" },
      ],
      final(2, "b", "failed", 1, "invalid_decision", "its decision is invalid"),
      [7, "report.written", undefined, {}],
    );
    const tl = timelineOf(events, null, T0 + 60_000);
    const decided = (task: string, attempt: number) =>
      tl.bars.find((b) => b.task === task && b.attempt === attempt)?.decision;
    expect(decided("a", 1)).toEqual({ status: "escalate_to_max", reason: "too hard" });
    expect(decided("a", 2)).toEqual({ status: "blocked", reason: "needs a person" });
    expect(decided("b", 1)).toEqual({ status: "invalid", reason: "decision.status: bad; trace: missing" });
    const { html } = renderTimeline(tl);
    expect(html).toContain(
      'data-attempt="2" data-outcome="failed" data-critical="true" data-reason="blocked" data-decision="blocked"',
    );
    expect(html).toContain("its agent decided escalate_to_max: too hard");
  });

  it("draws a redo: the attempt whose result conflicted, then the redo's own bar, and the merge from merge.started", () => {
    const redoStarted = (
      s: number,
      redo: number,
      attempt: number,
    ): [number, string, string, Record<string, unknown>] => [
      s,
      "merge.redo_started",
      "b",
      {
        redo,
        attempt,
        conflicted_with: ["a"],
        files: ["f.txt"],
        detail: "b conflicts with a",
        start_commit: "s",
        before_commit: "c",
      },
    ];
    const redoFinished = (
      s: number,
      redo: number,
      attempt: number,
      outcome: string,
      reason: string | null = null,
    ) =>
      [
        s,
        "merge.redo_finished",
        "b",
        { redo, attempt, outcome, reason, detail: reason, commit: null, restored: false },
      ] as [number, string, string, Record<string, unknown>];
    const events = ledger(
      accepted([
        ["a", []],
        ["b", []],
      ]),
      planned([["a", "b"]], ["a"]),
      running(1, "a", 1, 1),
      launched(1, "a", 1),
      running(1, "b", 1, 1),
      launched(1, "b", 1),
      exited(3, "a", 1, 0, 1),
      final(3, "a", "success", 1),
      exited(4, "b", 1, 0, 1),
      final(4, "b", "success", 1),
      [5, "merge.started", undefined, { on_conflict: "redo", order: ["a", "b"] }],
      redoStarted(6, 1, 2),
      launched(6, "b", 2),
      exited(8, "b", 2, 0, 6),
      final(8, "b", "success", 2),
      redoFinished(8, 1, 2, "failed", "validation"),
      redoStarted(9, 2, 3),
      launched(9, "b", 3),
      exited(11, "b", 3, 0, 9),
      final(11, "b", "success", 3),
      redoFinished(11, 2, 3, "resolved"),
      [12, "merge.success", undefined, {}],
      [12, "report.written", undefined, {}],
    );
    const tl = timelineOf(events, null, T0 + 60_000);
    expect(tl.bars.map((b) => [b.task, b.attempt, b.outcome, b.redo, b.reason])).toEqual([
      ["a", 1, "success", null, null],
      ["b", 1, "conflicted", null, "conflict"],
      ["b", 2, "failed", 1, "validation"],
      ["b", 3, "success", 2, null],
    ]);
    expect(tl.bars[1]!.conflict).toEqual({ with: ["a"], files: ["f.txt"] });
    expect(tl.bars[2]!.end).toBe(T0 + 8000);
    expect(tl.merge).toEqual({
      start: T0 + 5000,
      end: T0 + 12_000,
      result: "success",
      redos: 2,
      probes: [],
      culprit: null,
      redOnBase: false,
    });
    const { html } = renderTimeline(tl);
    expect(html).toContain('data-outcome="conflicted"');
    expect(html).toContain('data-redo="2"');
    expect(html).toContain("redo 1");
  });

  it("draws a bisect: its probes under the merge, the culprit's attempt that broke the gate, and its fix", () => {
    const probe = (s: number, k: number, task: string | null, passed: boolean) =>
      [
        s,
        "merge.probe",
        undefined,
        { k, of: 3, task, commit: `p${k}`, passed, duration_ms: 1000, detail: "" },
      ] as [number, string, undefined, Record<string, unknown>];
    const events = ledger(
      accepted([
        ["a", []],
        ["b", []],
        ["c", []],
      ]),
      planned([["a", "b", "c"]], ["a"]),
      ...["a", "b", "c"].flatMap((t) => [
        launched(1, t, 1),
        exited(2, t, 1, 0, 1),
        final(2, t, "success", 1),
      ]),
      [
        3,
        "merge.started",
        undefined,
        { on_conflict: "halt", on_gate_failure: "bisect_and_fix", order: ["a", "b", "c"] },
      ],
      probe(5, 0, null, true),
      probe(6, 1, "a", true),
      probe(7, 2, "b", false),
      [
        7,
        "merge.bisect_finished",
        undefined,
        { outcome: "culprit", culprit: "b", probes: 2, gate_runs: 4, time_ms: 3000 },
      ],
      [
        8,
        "merge.redo_started",
        "b",
        {
          cause: "gate",
          redo: 1,
          attempt: 2,
          conflicted_with: [],
          files: [],
          detail: "red",
          start_commit: "s",
          before_commit: "c",
        },
      ],
      launched(8, "b", 2),
      exited(9, "b", 2, 0, 8),
      final(10, "b", "success", 2),
      [
        10,
        "merge.redo_finished",
        "b",
        {
          cause: "gate",
          redo: 1,
          attempt: 2,
          outcome: "resolved",
          reason: null,
          detail: null,
          commit: "f",
          restored: false,
        },
      ],
      [12, "merge.success", undefined, {}],
      [12, "report.written", undefined, {}],
    );
    const tl = timelineOf(events, null, T0 + 60_000);
    expect(tl.bars.map((b) => [b.task, b.attempt, b.outcome, b.redo, b.redoCause])).toEqual([
      ["a", 1, "success", null, null],
      ["b", 1, "broke_gate", null, null],
      ["c", 1, "success", null, null],
      ["b", 2, "success", 1, "gate"],
    ]);
    expect(tl.merge).toMatchObject({ culprit: "b", redOnBase: false, redos: 1 });
    expect(tl.merge!.probes).toEqual([
      { k: 0, of: 3, task: null, passed: true, at: T0 + 5000, durationMs: 1000 },
      { k: 1, of: 3, task: "a", passed: true, at: T0 + 6000, durationMs: 1000 },
      { k: 2, of: 3, task: "b", passed: false, at: T0 + 7000, durationMs: 1000 },
    ]);
    const { html } = renderTimeline(tl);
    expect(html).toContain('data-outcome="broke_gate"');
    expect(html).toContain(">fix 1</span>");
    expect(
      [...html.matchAll(/class="tl-probe (passed|failed)" data-k="(\d)"/g)].map((m) => `${m[2]} ${m[1]}`),
    ).toEqual(["0 passed", "1 passed", "2 failed"]);
    expect(html).toContain("culprit: b");
  });

  it("marks a failure, and the dependent it skipped without a bar", () => {
    const events = ledger(
      accepted([
        ["a", []],
        ["b", ["a"]],
      ]),
      planned([["a"], ["b"]], ["a", "b"]),
      launched(1, "a", 1),
      exited(3, "a", 1, 2, 1),
      final(3, "a", "failed", 1, "exit_code", "exit code 2"),
      final(3, "b", "skipped", 0, "dependency_failed", "a dependency failed: a (exit_code)"),
      [4, "report.written", undefined, {}],
    );
    const tl = timelineOf(events, null, T0 + 60_000);
    expect(tl.bars).toHaveLength(1);
    expect(tl.bars[0]).toMatchObject({
      task: "a",
      outcome: "failed",
      reason: "exit_code",
      detail: "exit code 2",
    });
    expect(tl.markers).toEqual([
      expect.objectContaining({
        task: "b",
        wave: 2,
        kind: "skipped",
        reason: "dependency_failed",
        detail: "a dependency failed: a (exit_code)",
      }),
    ]);
    // Never ready (its dependency failed): it did not wait.
    expect(tl.waits.filter((w) => w.task === "b")).toEqual([]);
    expect(tl.rows.map((r) => [r.task, r.wave])).toEqual([
      ["a", 1],
      ["b", 2],
    ]);
  });

  it("draws a live run's running attempt up to now, and a task not started yet that waits", () => {
    const events = ledger(
      accepted([
        ["a", []],
        ["b", []],
        ["c", ["a"]],
      ]),
      planned([["a", "b"], ["c"]], ["a", "c"], 1),
      running(1, "a", 1, 1),
      launched(1, "a", 1),
    );
    const now = T0 + 30_000;
    const tl = timelineOf(events, null, now);
    expect(tl.live).toBe(true);
    expect(tl.end).toBe(now);
    expect(tl.bars).toEqual([expect.objectContaining({ task: "a", outcome: "running", end: null })]);
    // b is ready (wave 1) but max_parallel 1 keeps it waiting: still waiting now; c is not ready.
    // a's second before it was taken was no wait for a slot (none was held).
    expect(tl.waits).toEqual([expect.objectContaining({ task: "b", kind: "queued", start: T0, end: null })]);
    expect(tl.rows.map((r) => [r.task, r.attempt, r.bar?.outcome ?? null, r.marker])).toEqual([
      ["a", 1, "running", null],
      ["b", null, null, null],
      ["c", null, null, null],
    ]);
    // The merge has not started while tasks are left.
    expect(tl.merge).toBeNull();
  });

  it("measures the wait for a slot from the last dependency's success to the task's start", () => {
    const events = ledger(
      accepted([
        ["a", []],
        ["b", []],
        ["c", ["a", "b"]],
        ["d", []],
      ]),
      planned([["a", "b", "d"], ["c"]], ["b", "c"], 1),
      running(0, "a", 1, 0),
      launched(0, "a", 1),
      exited(2, "a", 1, 0, 0),
      final(2, "a", "success", 1),
      running(2, "b", 1, 2),
      launched(2, "b", 1),
      exited(5, "b", 1, 0, 2),
      final(5, "b", "success", 1),
      // d takes the one slot as b ends: c, ready then, waits for it.
      running(5, "d", 1, 5),
      launched(5, "d", 1),
      exited(7, "d", 1, 0, 5),
      final(7, "d", "success", 1),
      running(7, "c", 1, 7),
      launched(7, "c", 1),
      [8, "task.waiting_input", "c", { attempt: 1, since: iso(7.5) }],
      [9, "task.input_resumed", "c", { attempt: 1 }],
      [10, "task.waiting_input", "c", { attempt: 1, since: iso(10) }],
      exited(11, "c", 1, 0, 7),
      final(11, "c", "success", 1),
      [12, "report.written", undefined, {}],
    );
    const tl = timelineOf(events, null, T0 + 60_000);
    const waits = tl.waits.map((w) => [
      w.task,
      w.kind,
      (w.start - T0) / 1000,
      w.end === null ? null : (w.end - T0) / 1000,
    ]);
    expect(waits).toEqual([
      ["b", "queued", 0, 2],
      ["d", "queued", 0, 5],
      ["c", "queued", 5, 7],
      ["c", "input", 7.5, 9],
      // Still waiting when its attempt ended: the wait ends with it.
      ["c", "input", 10, 11],
    ]);
    expect(tl.bars.filter((b) => b.critical).map((b) => b.task)).toEqual(["b", "c"]);
    expect(tl.maxParallel).toBe(1);
  });

  it("orders rows by wave, then start, and marks an attempt that never launched", () => {
    const events = ledger(
      accepted([
        ["x", []],
        ["y", []],
        ["z", []],
      ]),
      planned([["x", "y", "z"]], ["x"]),
      launched(3, "x", 1),
      launched(1, "y", 1),
      final(2, "z", "failed", 1, "launch_error", "could not prepare its worktree"),
      exited(4, "y", 1, 0, 1),
      final(4, "y", "success", 1),
      [5, "run.cancel_requested", undefined, {}],
      exited(6, "x", 1, 143, 3),
      final(6, "x", "failed", 1, "cancelled", "the run was cancelled"),
      [7, "report.written", undefined, {}],
    );
    const tl = timelineOf(events, null, T0 + 60_000);
    expect(tl.rows.map((r) => [r.task, r.bar?.outcome ?? r.marker?.kind])).toEqual([
      ["y", "success"],
      ["z", "not_launched"],
      ["x", "cancelled"],
    ]);
    expect(tl.markers[0]).toMatchObject({ task: "z", attempt: 1, reason: "launch_error" });
  });

  it("takes the waves and critical path from the report when the ledger has no plan, and an empty ledger gives no rows", () => {
    const report = reportOf();
    const tl = timelineOf([], report, T0 + 99_000);
    expect(tl.live).toBe(false);
    expect(tl.criticalPath).toEqual(["T0"]);
    expect(tl.waves).toEqual([["T0", "T1"]]);
    expect(tl.start).toBe(Date.parse(report.started_at));
    expect(tl.end).toBe(Date.parse(report.finished_at));
    // Both tasks are known (from the report) but have no attempt in the ledger.
    expect(tl.bars).toEqual([]);
    expect(timelineOf([], null, T0).rows).toEqual([]);
  });

  it("treats an attempt followed by another one without its own end as lost (a worker killed mid-task)", () => {
    const events = ledger(
      accepted([["w", []]]),
      planned([["w"]], ["w"]),
      launched(1, "w", 1),
      launched(6, "w", 2),
      [9, "task.exited", "w", { attempt: 2, exit_code: 0 }],
      final(9, "w", "success", 2),
    );
    const tl = timelineOf(events, null, T0 + 20_000);
    expect(tl.bars.map((b) => [b.attempt, b.outcome, b.reason, b.end === null ? null : b.end - T0])).toEqual([
      [1, "retried", "lost", 6000],
      [2, "success", null, 9000],
    ]);
  });
});

describe("readLedgerEvents", () => {
  const dir = mkdtempSync(join(tmpdir(), "termorch-ledger-read-"));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it("reads a live ledger leniently: a torn last line is left out, a missing file has no events", async () => {
    const [one, two] = ledger([0, "run.accepted", undefined, {}], [1, "run.planned", undefined, {}]);
    const path = join(dir, "events.jsonl");
    writeFileSync(path, `${JSON.stringify(one)}\n${JSON.stringify(two)}\n{"data":{"ha`);
    expect((await readLedgerEvents(path)).map((e) => e.type)).toEqual(["run.accepted", "run.planned"]);
    expect(await readLedgerEvents(join(dir, "nothing.jsonl"))).toEqual([]);
  });
});

describe("renderTimeline and renderReportHtml", () => {
  const hostile = `<img src=x onerror="alert(1)">&'`;
  const events = ledger(
    accepted([
      [hostile, []],
      ["b", [hostile]],
    ]),
    planned([[hostile], ["b"]], [hostile]),
    launched(1, hostile, 1),
    exited(3, hostile, 1, 1, 1),
    [3, "task.retrying", hostile, { attempt: 1, reason: "exit_code", detail: "<script>x</script>" }],
    launched(4, hostile, 2),
    exited(6, hostile, 2, 1, 4),
    final(6, hostile, "failed", 2, "exit_code", "exit code 1"),
    final(6, "b", "skipped", 0, "dependency_failed", `a dependency failed: ${hostile} (exit_code)`),
    [7, "report.written", undefined, {}],
  );

  it("gives each attempt a .bar with its task, attempt and outcome, in row order, with every string escaped", () => {
    const { html, css } = renderTimeline(timelineOf(events, null, T0 + 60_000));
    const bars = [
      ...html.matchAll(
        /<div class="bar ([^"]*)" data-task="([^"]*)" data-attempt="(\d+)" data-outcome="(\w+)"/g,
      ),
    ];
    expect(bars.map((m) => [m[2], m[3], m[4], m[1]])).toEqual([
      [escapeHtml(hostile), "1", "retried", "retried critical"],
      [escapeHtml(hostile), "2", "failed", "failed critical"],
    ]);
    expect(html).not.toContain("<img");
    expect(html).not.toContain("<script");
    expect(html).toContain('data-marker="skipped"');
    expect(css).toContain(".tl .bar.failed");
  });

  it("renders a self-contained page: no URL, relative log links, escaped report strings", () => {
    const report = reportOf();
    report.tasks[0]!.logs = { stdout: "logs/T0.out", stderr: "logs/javascript:alert(1).err" };
    report.tasks[0]!.detail = hostile;
    report.tasks[0]!.argv = ["sh", "-c", hostile];
    report.merge.gates = [
      {
        name: "run.tests_cmd",
        required: true,
        passed: false,
        detail: "exit code 1; output in logs/t.out and logs/t.err",
      },
    ];
    const html = renderReportHtml(report, timelineOf(events, report, T0), {
      runDir: "/runs/r1",
      outDir: "/runs/r1",
    });
    expect(html.startsWith("<!doctype html>")).toBe(true);
    expect(html).not.toMatch(/https?:|\/\/[a-z]|<script|<img|<link|@import|url\(/i);
    expect(html).toContain('href="./logs/T0.out"');
    // A name that looks like a scheme stays a relative path.
    expect(html).toContain('href="./logs/javascript%3Aalert(1).err"');
    expect(html).toContain('href="./logs/t.out"');
    // Elsewhere, the links lead back to the run's folder.
    const elsewhere = renderReportHtml(report, timelineOf(events, report, T0), {
      runDir: "/runs/r1",
      outDir: "/tmp/out",
    });
    expect(elsewhere).toContain('href="../../runs/r1/logs/T0.out"');
  });
});

function reportOf() {
  const tasks = ["T0", "T1"].map((id) => ({
    ...newTaskRun(id, "agent", [], ["true"]),
    state: "success" as const,
    startedAt: T0 + 1000,
    finishedAt: T0 + 3000,
  }));
  return buildReport({
    runId: "r1",
    startedAt: T0,
    finishedAt: T0 + 4000,
    dryRun: false,
    waves: [["T0", "T1"]],
    tasks,
    merge: skippedMerge("test"),
    validation: "skipped",
    cancelled: false,
    stopped: null,
    error: null,
    workspace: "/w",
    tmuxSocket: "termorch",
    criticalPath: ["T0"],
    maxParallel: 2,
    peakParallelism: 2,
  });
}
