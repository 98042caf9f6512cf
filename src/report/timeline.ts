import { ledgerEntryOf, type ReadLedgerEntry } from "../contract/ledger-events.js";
import type { Report } from "../contract/report.js";
import type { LedgerEvent } from "../ledger/ledger.js";

/**
 * How one attempt ended. `retried`: it failed and another attempt followed (task.retrying, or a
 * later attempt launched without an exit record of this one: a worker lost mid-task);
 * `conflicted`: it succeeded, but its result conflicted with the tasks merged before it, and the
 * task was redone (merge.redo_started); `broke_gate`: it succeeded, but a bisect found that its
 * merge turns the run-level tests_cmd red, and the task ran again to fix it; `cancelled`: the
 * run's cancellation ended it; `running`: no end yet (a live run).
 */
export type AttemptOutcome =
  | "success"
  | "failed"
  | "retried"
  | "conflicted"
  | "broke_gate"
  | "cancelled"
  | "running";

/** One attempt of one task: a bar of the Gantt chart. Times are epoch milliseconds. */
export interface TimelineBar {
  task: string;
  attempt: number;
  /** 1-based wave of the plan. */
  wave: number;
  /** The task is on the plan's critical path. */
  critical: boolean;
  start: number;
  /** null: still running (drawn up to the timeline's `now`). */
  end: number | null;
  outcome: AttemptOutcome;
  /** Why it did not succeed (the report's reason union; `lost` for an attempt taken over). */
  reason: string | null;
  detail: string | null;
  exitCode: number | null;
  session: string | null;
  /** Scale-out runs: the host the attempt ran on. */
  host: string | null;
  /** Its logs, relative to the run's folder, as task.launched named them. */
  logs: { stdout: string | null; stderr: string | null } | null;
  /** The agent it ran (task.launched; an escalation's is another than the task's); null: not said. */
  agent: string | null;
  /** The feedback section it was given (the attempt before it failed), relative to the run's folder. */
  feedback: string | null;
  /** This attempt is the task's redo n (merge.on_conflict "redo", or a gate's fix); null: an ordinary attempt. */
  redo: number | null;
  /** Why it was redone: its result conflicted, or its merge turned the run-level gate red (a fix); null: no redo. */
  redoCause: "conflict" | "gate" | null;
  /** A redo's conflict, or the conflict of a `conflicted` attempt: the tasks and files. */
  conflict: { with: string[]; files: string[] } | null;
  /** What its agent decided ($TERMORCH_DECISION, task.decision): a status, or `invalid`, and why; null: nothing. */
  decision: { status: string; reason: string | null } | null;
}

/**
 * A task, or one attempt of it, that has no bar: `skipped` (it never ran: a dependency failed or
 * the run stopped first), `not_launched` (its attempt ended before its agent started: a worktree
 * that could not be prepared, a failed setup_cmd, a launch error).
 */
export interface TimelineMarker {
  task: string;
  wave: number;
  critical: boolean;
  /** The attempt it concerns; null for a skipped task. */
  attempt: number | null;
  kind: "skipped" | "not_launched";
  at: number;
  reason: string | null;
  detail: string | null;
}

/**
 * Time a task spent waiting. `queued`: ready (its last dependency succeeded, or the run was
 * planned) but not yet taken, while max_parallel tasks held every slot; `input`: an interactive agent
 * waiting for input (task.waiting_input → task.input_resumed or its attempt's end).
 */
export interface TimelineWait {
  task: string;
  /** The attempt it belongs to; a `queued` wait precedes the task's first attempt. */
  attempt: number | null;
  kind: "queued" | "input";
  start: number;
  /** null: still waiting. */
  end: number | null;
}

/** One line of the chart: an attempt (bar), a marker, or a task that has not started (neither). */
export interface TimelineRow {
  task: string;
  wave: number;
  critical: boolean;
  attempt: number | null;
  bar: TimelineBar | null;
  marker: TimelineMarker | null;
  /** The waits drawn on this row. */
  waits: TimelineWait[];
}

/** The merge step: from the tasks' end to its merge.* event. */
export interface TimelineMerge {
  start: number;
  /** null: still merging. */
  end: number | null;
  /** success, conflict, failed, skipped, rolled_back; null while merging. */
  result: string | null;
  /** Redos the merge ran (their attempts are bars of their tasks). */
  redos: number;
  /** The run-level gate's runs of bisects (merge.probe), in order: k tasks merged (0: the base). */
  probes: TimelineProbe[];
  /** The task the last bisect found; null when none did. */
  culprit: string | null;
  /** A bisect found the gate red on the base itself. */
  redOnBase: boolean;
}

/** One run of the run-level gate in a bisect: on the merge of the first k of `of` tasks. */
export interface TimelineProbe {
  k: number;
  of: number;
  /** The k-th task; null for the base. */
  task: string | null;
  passed: boolean;
  /** When it ended, and how long it took. */
  at: number;
  durationMs: number;
}

/** A run's timeline, from its ledger and (once it ended) its report. */
export interface Timeline {
  runId: string | null;
  /** Left edge of the chart: the run's start. */
  start: number;
  /** Right edge: the run's end, or `now` for a live run. */
  end: number;
  now: number;
  /** No report yet: attempts without an end are still running. */
  live: boolean;
  waves: string[][];
  criticalPath: string[];
  maxParallel: number | null;
  /** Rows by wave, then start (a task not started yet last in its wave). */
  rows: TimelineRow[];
  /** Every attempt, in the rows' order. */
  bars: TimelineBar[];
  markers: TimelineMarker[];
  waits: TimelineWait[];
  merge: TimelineMerge | null;
}

interface AttemptAcc {
  attempt: number;
  start: number;
  end: number | null;
  exitCode: number | null;
  session: string | null;
  host: string | null;
  logs: TimelineBar["logs"];
  agent: string | null;
  retried: { reason: string | null; detail: string | null } | null;
}

interface TaskAcc {
  id: string;
  attempts: Map<number, AttemptAcc>;
  /** Attempts that failed before a launch, with when and why. */
  unlaunched: Map<number, { at: number; reason: string | null; detail: string | null }>;
  /** The feedback section each attempt after a failed one was given (task.retrying names it). */
  feedback: Map<number, string>;
  /** When the scheduler took it (its status' started_at). */
  takenAt: number | null;
  final: {
    state: string;
    reason: string | null;
    detail: string | null;
    at: number;
    attempt: number | null;
  } | null;
  inputWaits: TimelineWait[];
  lastAttemptSeen: number;
  /** Redos by the attempt they ran as: which, why, the conflict, and how they ended (null: not yet). */
  redos: Map<
    number,
    {
      n: number;
      cause: "conflict" | "gate";
      with: string[];
      files: string[];
      outcome: string | null;
      reason: string | null;
      detail: string | null;
    }
  >;
  /** Attempts whose result a redo replaced, with why (its conflict, or the red gate). */
  conflicted: Map<number, { cause: "conflict" | "gate"; with: string[]; files: string[] }>;
  /** What the agent of each attempt decided (task.decision). */
  decisions: Map<number, NonNullable<TimelineBar["decision"]>>;
}

/** What the ledger's events say, folded in order: the run's plan and end, and each task's attempts. */
interface Fold {
  runId: string | null;
  /** The first run.accepted's tasks and their dependencies. */
  accepted: { id: string; dependencies: string[] }[] | null;
  /** The last run.planned (a resume may plan again). */
  planned: {
    waves: string[][] | null;
    criticalPath: string[] | null;
    maxParallel: number | null;
    at: number;
  } | null;
  reported: boolean;
  merge: { result: string; at: number } | null;
  /** When the merge stage began (merge.started; the last one, after a resume). */
  mergeStartedAt: number | null;
  probes: TimelineProbe[];
  culprit: string | null;
  redOnBase: boolean;
  tasks: Map<string, TaskAcc>;
}

type Entry = ReadLedgerEntry;
type StepOf<T extends Entry["type"]> = (
  f: Fold,
  e: Entry & { type: T },
  at: number,
  task: TaskAcc | null,
) => void;
type Steps = { [T in Entry["type"]]?: StepOf<T> };

const mergeStep = (f: Fold, e: { type: string }, at: number): void => {
  f.merge = { result: e.type.slice("merge.".length), at };
};

const finalStep: StepOf<"task.success" | "task.failed" | "task.skipped"> = (_f, e, at, t) => {
  if (!t) return;
  t.final = {
    state: e.type.slice("task.".length),
    reason: e.data.reason ?? null,
    detail: e.data.detail ?? null,
    at: time(e.data.finished_at) ?? at,
    attempt: e.data.attempt ?? null,
  };
};

/** One small step per kind of event; events of other kinds change nothing here. */
const STEPS: Steps = {
  "run.accepted": (f, e) => {
    f.runId ??= e.data.run_id ?? null;
    f.accepted ??= e.data.tasks ?? null;
  },
  "run.planned": (f, e, at) => {
    f.planned = {
      waves: e.data.waves ?? null,
      criticalPath: e.data.critical_path ?? null,
      maxParallel: e.data.max_parallel ?? null,
      at,
    };
  },
  "report.written": (f) => {
    f.reported = true;
  },
  "merge.success": mergeStep,
  "merge.conflict": mergeStep,
  "merge.failed": mergeStep,
  "merge.skipped": mergeStep,
  "merge.rolled_back": mergeStep,
  "merge.started": (f, _e, at) => {
    f.mergeStartedAt = at;
  },
  "merge.probe": (f, e, at) => {
    if (e.data.k === undefined) return;
    f.probes.push({
      k: e.data.k,
      of: e.data.of ?? 0,
      task: e.data.task ?? null,
      passed: e.data.passed ?? false,
      at,
      durationMs: e.data.duration_ms ?? 0,
    });
  },
  "merge.bisect_finished": (f, e) => {
    f.culprit = e.data.culprit ?? null;
    f.redOnBase = e.data.outcome === "red_on_base";
  },
  "merge.redo_started": (_f, e, _at, t) => {
    const n = e.data.attempt;
    if (!t || n === undefined) return;
    const conflict = {
      cause: e.data.cause ?? ("conflict" as const),
      with: e.data.conflicted_with ?? [],
      files: e.data.files ?? [],
    };
    t.redos.set(n, { n: e.data.redo ?? 1, ...conflict, outcome: null, reason: null, detail: null });
    // The attempt whose result conflicted: the latest before it that is not itself a failed redo.
    const before = [...t.attempts.keys()].filter((a) => a < n && !t.redos.has(a)).sort((a, b) => b - a)[0];
    if (before !== undefined && !t.conflicted.has(before)) t.conflicted.set(before, conflict);
  },
  "merge.redo_finished": (_f, e, _at, t) => {
    const r = e.data.attempt === undefined ? undefined : t?.redos.get(e.data.attempt);
    if (!r) return;
    r.outcome = e.data.outcome ?? null;
    r.reason = e.data.reason ?? null;
    r.detail = e.data.detail ?? null;
  },
  "task.launched": (_f, e, at, t) => {
    const n = e.data.attempt;
    if (!t || n === undefined || t.attempts.has(n)) return;
    const logs = e.data.logs;
    t.attempts.set(n, {
      attempt: n,
      start: at,
      end: null,
      exitCode: null,
      session: e.data.session ?? null,
      host: e.data.host ?? null,
      logs: logs ? { stdout: logs.stdout, stderr: logs.stderr } : null,
      agent: typeof e.data.agent === "string" ? e.data.agent : null,
      retried: null,
    });
  },
  "task.exited": (_f, e, at, t) => {
    const a = e.data.attempt === undefined ? undefined : t?.attempts.get(e.data.attempt);
    if (!a) return;
    // The supervisor's own times of the agent process are closer than the events' timestamps.
    a.start = time(e.data.started_at) ?? a.start;
    a.end = time(e.data.finished_at) ?? at;
    a.exitCode = e.data.exit_code ?? null;
  },
  "task.retrying": (_f, e, at, t) => {
    const n = e.data.attempt;
    if (!t || n === undefined) return;
    const why = { reason: e.data.reason ?? null, detail: e.data.detail ?? null };
    if (e.data.feedback) t.feedback.set(n + 1, e.data.feedback);
    const a = t.attempts.get(n);
    if (a) {
      a.retried = why;
      a.end ??= at;
    } else t.unlaunched.set(n, { at, ...why });
  },
  "task.decision": (_f, e, _at, t) => {
    const n = e.data.attempt;
    if (!t || n === undefined) return;
    t.decisions.set(
      n,
      e.data.kind === "invalid"
        ? { status: "invalid", reason: e.data.problems?.join("; ") ?? null }
        : { status: e.data.status ?? "completed", reason: e.data.reason ?? null },
    );
  },
  "task.waiting_input": (_f, e, at, t) => {
    t?.inputWaits.push({
      task: t.id,
      attempt: e.data.attempt ?? null,
      kind: "input",
      start: time(e.data.since) ?? at,
      end: null,
    });
  },
  "task.input_resumed": (_f, _e, at, t) => {
    const open = t?.inputWaits.findLast((w) => w.end === null);
    if (open) open.end = at;
  },
  "task.success": finalStep,
  "task.failed": finalStep,
  "task.skipped": finalStep,
};

function taskAccOf(tasks: Map<string, TaskAcc>, id: string): TaskAcc {
  let t = tasks.get(id);
  if (!t) {
    t = {
      id,
      attempts: new Map(),
      unlaunched: new Map(),
      feedback: new Map(),
      takenAt: null,
      final: null,
      inputWaits: [],
      lastAttemptSeen: 0,
      redos: new Map(),
      conflicted: new Map(),
      decisions: new Map(),
    };
    tasks.set(id, t);
  }
  return t;
}

/** Folds one event in: what every task event says of its task (its attempt, when it was taken), then its kind's step. */
function step(f: Fold, e: LedgerEvent, at: number): Fold {
  const entry = ledgerEntryOf(e);
  if (entry === null) return f;
  let task: TaskAcc | null = null;
  if (e.task_id !== undefined) {
    task = taskAccOf(f.tasks, e.task_id);
    const d: Record<string, unknown> = entry.data;
    if (typeof d.attempt === "number") task.lastAttemptSeen = Math.max(task.lastAttemptSeen, d.attempt);
    if (task.takenAt === null && entry.type !== "task.exited" && typeof d.started_at === "string")
      task.takenAt = time(d.started_at);
  }
  (STEPS[entry.type] as StepOf<typeof entry.type> | undefined)?.(f, entry as never, at, task);
  return f;
}

/**
 * Builds the timeline of a run from its ledger events (in seq order) and its report when there is
 * one. Pure: `now` is the right edge of a live run. Works for a run that ended, one still running
 * (no report), and one that never started (no events: an empty chart).
 */
export function timelineOf(events: readonly LedgerEvent[], report: Report | null, now: number): Timeline {
  const at = (e: LedgerEvent): number => time(e.ts) ?? now;
  const fold = events.reduce<Fold>((f, e) => step(f, e, at(e)), {
    runId: null,
    accepted: null,
    planned: null,
    reported: false,
    merge: null,
    mergeStartedAt: null,
    probes: [],
    culprit: null,
    redOnBase: false,
    tasks: new Map(),
  });
  const { planned, tasks } = fold;
  const ended = report !== null || fold.reported;
  const waves = planned?.waves ?? report?.waves ?? [];
  const criticalPath = planned?.criticalPath ?? report?.summary.metrics?.critical_path ?? [];
  const critical = new Set(criticalPath);
  const maxParallel = planned?.maxParallel ?? report?.summary.metrics?.max_parallel ?? null;
  const runId = report?.run_id ?? fold.runId;

  const deps = new Map<string, string[]>();
  for (const t of report?.tasks ?? []) deps.set(t.id, t.dependencies);
  for (const t of fold.accepted ?? []) deps.set(t.id, t.dependencies);

  const waveOf = new Map<string, number>();
  waves.forEach((ids, i) => {
    for (const id of ids) waveOf.set(id, i + 1);
  });
  for (const id of waveOf.keys()) taskAccOf(tasks, id);
  for (const id of deps.keys()) taskAccOf(tasks, id);

  const firstTs = events.length > 0 ? at(events[0]!) : null;
  const start = minOf([time(report?.started_at), firstTs]) ?? now;
  const lastTs = events.length > 0 ? at(events.at(-1)!) : null;
  const end = ended ? (maxOf([time(report?.finished_at), lastTs]) ?? now) : Math.max(now, lastTs ?? now);
  const plannedAt = planned ? planned.at : start;
  const reportTask = new Map((report?.tasks ?? []).map((t) => [t.id, t]));

  // When each task held a slot: from when the scheduler took it to its final state.
  const held = [...tasks.values()].flatMap((t) => {
    const from = t.takenAt ?? minOf([...t.attempts.values()].map((a) => a.start));
    return from === null ? [] : [{ from, to: t.final?.at ?? Number.POSITIVE_INFINITY }];
  });
  // How many slots were held from each change on (a step function), so that a run of thousands
  // of tasks is measured in one pass. A task's own interval starts where its wait ends: it never
  // counts against itself.
  const changes = held
    .flatMap((h) => [
      { at: h.from, d: 1 },
      { at: h.to, d: -1 },
    ])
    .sort((a, b) => a.at - b.at || a.d - b.d);
  const stepAt: number[] = [];
  const stepCount: number[] = [];
  let count = 0;
  for (const c of changes) {
    count += c.d;
    if (stepAt.at(-1) === c.at) stepCount[stepCount.length - 1] = count;
    else {
      stepAt.push(c.at);
      stepCount.push(count);
    }
  }
  const slotsFull = (from: number, to: number): boolean => {
    if (maxParallel === null) return true;
    // The last change at or before `from`, then every change before `to`.
    let lo = 0;
    let hi = stepAt.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (stepAt[mid]! <= from) lo = mid + 1;
      else hi = mid;
    }
    for (let i = Math.max(0, lo - 1); i < stepAt.length && stepAt[i]! < to; i++)
      if (stepCount[i]! >= maxParallel) return true;
    return false;
  };

  const rows: TimelineRow[] = [];
  const sortAt = new Map<TimelineRow, number>();
  for (const t of tasks.values()) {
    const wave = waveOf.get(t.id) ?? waves.length + 1;
    const isCritical = critical.has(t.id);
    const numbers = [...new Set([...t.attempts.keys(), ...t.unlaunched.keys()])].sort((a, b) => a - b);
    // A final failure before any launch of its last attempt (a worktree that could not be
    // prepared, a failed setup_cmd) is a marker of that attempt.
    if (t.final && t.final.state === "failed") {
      const n = t.final.attempt ?? Math.max(t.lastAttemptSeen, 1);
      if (!t.attempts.has(n) && !t.unlaunched.has(n)) {
        t.unlaunched.set(n, { at: t.final.at, reason: t.final.reason, detail: t.final.detail });
        numbers.push(n);
        numbers.sort((a, b) => a - b);
      }
    }
    const last = numbers.at(-1);
    const taskRows: TimelineRow[] = [];
    for (const n of numbers) {
      const a = t.attempts.get(n);
      if (!a) {
        const u = t.unlaunched.get(n)!;
        const marker: TimelineMarker = {
          task: t.id,
          wave,
          critical: isCritical,
          attempt: n,
          kind: "not_launched",
          at: u.at,
          reason: u.reason,
          detail: u.detail,
        };
        const row = { task: t.id, wave, critical: isCritical, attempt: n, bar: null, marker, waits: [] };
        sortAt.set(row, u.at);
        taskRows.push(row);
        continue;
      }
      const following = numbers[numbers.indexOf(n) + 1];
      const next =
        following === undefined
          ? null
          : (t.attempts.get(following)?.start ?? t.unlaunched.get(following)?.at ?? null);
      const bar = barOf(t, a, { wave, critical: isCritical, ended, runEnd: end, next }, reportTask.get(t.id));
      const row: TimelineRow = {
        task: t.id,
        wave,
        critical: isCritical,
        attempt: n,
        bar,
        marker: null,
        waits: t.inputWaits
          .filter((w) => w.attempt === n || (w.attempt === null && n === last))
          .map((w) => ({ ...w, attempt: n, end: w.end ?? bar.end })),
      };
      sortAt.set(row, a.start);
      taskRows.push(row);
    }
    if (numbers.length === 0) {
      const skipped = t.final?.state === "skipped" || reportTask.get(t.id)?.status === "skipped";
      const marker: TimelineMarker | null = skipped
        ? {
            task: t.id,
            wave,
            critical: isCritical,
            attempt: null,
            kind: "skipped",
            at: t.final?.at ?? end,
            reason: t.final?.reason ?? reportTask.get(t.id)?.reason ?? null,
            detail: t.final?.detail ?? reportTask.get(t.id)?.detail ?? null,
          }
        : null;
      const row: TimelineRow = {
        task: t.id,
        wave,
        critical: isCritical,
        attempt: null,
        bar: null,
        marker,
        waits: [],
      };
      sortAt.set(row, marker?.at ?? Number.POSITIVE_INFINITY);
      taskRows.push(row);
    }
    // Ready: the run was planned (no dependency), or its last dependency succeeded.
    const depIds = deps.get(t.id) ?? [];
    const depEnds = depIds.map((dep) => {
      const f = tasks.get(dep)?.final;
      return f?.state === "success" ? f.at : null;
    });
    const ready = depEnds.includes(null) ? null : Math.max(plannedAt, ...(depEnds as number[]));
    const skipped = t.final?.state === "skipped" && numbers.length === 0;
    if (ready !== null && !skipped) {
      const firstStart = numbers.length > 0 ? (t.attempts.get(numbers[0]!)?.start ?? null) : null;
      const taken = t.takenAt ?? firstStart ?? t.final?.at ?? (ended ? end : null);
      // Drawn only when max_parallel tasks held the slots meanwhile: a task taken late for
      // termorch's own reasons (setting up the run, preparing another worktree) did not queue.
      if ((taken === null || taken > ready) && slotsFull(ready, taken ?? end)) {
        const wait: TimelineWait = {
          task: t.id,
          attempt: numbers[0] ?? null,
          kind: "queued",
          start: ready,
          end: taken,
        };
        taskRows[0]!.waits.unshift(wait);
      }
    }
    rows.push(...taskRows);
  }

  rows.sort(
    (a, b) =>
      a.wave - b.wave ||
      sortAt.get(a)! - sortAt.get(b)! ||
      (a.task < b.task ? -1 : a.task > b.task ? 1 : 0) ||
      (a.attempt ?? 0) - (b.attempt ?? 0),
  );

  let merge: TimelineMerge | null = null;
  const finals = [...tasks.values()].map((t) => t.final?.at ?? null);
  const merged = fold.merge;
  const redos = [...tasks.values()].reduce((n, t) => n + t.redos.size, 0);
  if (merged || fold.mergeStartedAt !== null || (!ended && tasks.size > 0 && !finals.includes(null))) {
    // A redone task's final state comes after the merge began: merge.started says when it did.
    const mergeStart = fold.mergeStartedAt ?? maxOf(finals) ?? plannedAt;
    const bisect = { probes: fold.probes, culprit: fold.culprit, redOnBase: fold.redOnBase };
    merge = merged
      ? { start: Math.min(mergeStart, merged.at), end: merged.at, result: merged.result, redos, ...bisect }
      : { start: mergeStart, end: null, result: null, redos, ...bisect };
  }

  return {
    runId,
    start,
    end,
    now,
    live: !ended,
    waves,
    criticalPath,
    maxParallel,
    rows,
    bars: rows.flatMap((r) => (r.bar ? [r.bar] : [])),
    markers: rows.flatMap((r) => (r.marker ? [r.marker] : [])),
    waits: rows.flatMap((r) => r.waits),
    merge,
  };
}

function barOf(
  t: TaskAcc,
  a: AttemptAcc,
  o: {
    wave: number;
    critical: boolean;
    ended: boolean;
    runEnd: number;
    /** When the next attempt (or a marker of it) came; null: this is the last one. */
    next: number | null;
  },
  reported: Report["tasks"][number] | undefined,
): TimelineBar {
  let outcome: AttemptOutcome;
  let reason: string | null = null;
  let detail: string | null = null;
  let end = a.end;
  const redo = t.redos.get(a.attempt) ?? null;
  const conflicted = t.conflicted.get(a.attempt) ?? null;
  if (conflicted?.cause === "gate") {
    outcome = "broke_gate";
    reason = "validation";
    detail = "a bisect found that its merge turns the run-level tests_cmd red; run again to fix it";
  } else if (conflicted) {
    outcome = "conflicted";
    reason = "conflict";
    detail = `its result conflicted with ${conflicted.with.join(", ") || "the tasks merged before it"} in ${conflicted.files.join(", ")}; redone`;
  } else if (redo?.outcome === "failed" || redo?.outcome === "cancelled") {
    outcome = redo.outcome;
    reason = redo.reason;
    detail = redo.detail;
    end ??= o.next ?? t.final?.at ?? null;
  } else if (a.retried) {
    outcome = "retried";
    ({ reason, detail } = a.retried);
  } else if (o.next !== null) {
    // A later attempt started without this one's end: its worker or session was lost.
    outcome = "retried";
    reason = "lost";
    end ??= o.next;
  } else if (t.final) {
    end ??= t.final.at;
    if (t.final.state === "success") outcome = "success";
    else if (t.final.reason === "cancelled" || t.final.state === "skipped") outcome = "cancelled";
    else outcome = "failed";
    if (outcome !== "success") ({ reason, detail } = t.final);
  } else if (o.ended) {
    // The report came without the task's final event (a ledger cut short): the report decides.
    end ??= o.runEnd;
    const status = reported?.status;
    outcome = status === "success" ? "success" : reported?.reason === "cancelled" ? "cancelled" : "failed";
    if (outcome !== "success") {
      reason = reported?.reason ?? null;
      detail = reported?.detail ?? null;
    }
  } else outcome = "running";
  return {
    task: t.id,
    attempt: a.attempt,
    wave: o.wave,
    critical: o.critical,
    start: a.start,
    end,
    outcome,
    reason,
    detail,
    exitCode: a.exitCode,
    session: a.session,
    host: a.host,
    logs: a.logs,
    agent: a.agent,
    feedback: t.feedback.get(a.attempt) ?? null,
    redo: redo?.n ?? null,
    redoCause: redo?.cause ?? null,
    conflict: redo
      ? { with: redo.with, files: redo.files }
      : conflicted && { with: conflicted.with, files: conflicted.files },
    decision: t.decisions.get(a.attempt) ?? null,
  };
}

function time(value: unknown): number | null {
  if (typeof value !== "string") return null;
  const ms = Date.parse(value);
  return Number.isNaN(ms) ? null : ms;
}

function minOf(values: readonly (number | null | undefined)[]): number | null {
  const known = values.filter((v): v is number => typeof v === "number");
  return known.length > 0 ? Math.min(...known) : null;
}

function maxOf(values: readonly (number | null | undefined)[]): number | null {
  const known = values.filter((v): v is number => typeof v === "number");
  return known.length > 0 ? Math.max(...known) : null;
}
