import { type FSWatcher, watch } from "node:fs";
import { open } from "node:fs/promises";
import { join } from "node:path";
import { ledgerEntryOf } from "../contract/ledger-events.js";
import type { RunChange, WaitOutput } from "../contract/mcp.js";
import { Reason, TaskState } from "../contract/reason.js";
import type { RunView } from "../contract/status-view.js";
import { LedgerEvent } from "../ledger/ledger.js";
import { redoSteps } from "../shell/redo-command.js";

/** The most changes one answer carries; the rest come with the next call. */
export const MAX_CHANGES = 200;
/** The most of a ledger one answer reads (a line is a few hundred bytes). */
const MAX_READ = 4 << 20;

/** Where a reader of a run's ledger is: the last event it saw and the byte after it. */
export interface Cursor {
  seq: number;
  offset: number;
}

/** `12:4096`; the start of the ledger when there is no cursor yet. */
export function parseCursor(text: string | undefined): Cursor {
  if (text === undefined) return { seq: -1, offset: 0 };
  const [seq, offset] = text.split(":").map(Number);
  return { seq: seq ?? -1, offset: offset ?? 0 };
}

export function cursorText(c: Cursor): string {
  return `${c.seq}:${c.offset}`;
}

/**
 * The ledger's whole lines after `from`, and where the reader is after them; `more` when the
 * answer stopped short of the ledger's end (at MAX_CHANGES changes, or MAX_READ bytes).
 */
export async function readChanges(
  runDir: string,
  from: Cursor,
): Promise<{ changes: RunChange[]; cursor: Cursor; more: boolean }> {
  let handle: Awaited<ReturnType<typeof open>>;
  try {
    handle = await open(join(runDir, "events.jsonl"), "r");
  } catch {
    // A run a daemon queued has no ledger yet.
    return { changes: [], cursor: from, more: false };
  }
  try {
    const size = (await handle.stat()).size;
    // A ledger shorter than the cursor is another run's (the folder was reused): read it all.
    const at = size < from.offset ? { seq: -1, offset: 0 } : from;
    const buffer = Buffer.alloc(Math.min(size - at.offset, MAX_READ));
    await handle.read(buffer, 0, buffer.length, at.offset);
    const changes: RunChange[] = [];
    let seq = at.seq;
    let done = 0;
    // Whole lines only (the one being written is read next time), and at most MAX_CHANGES changes:
    // a long run's ledger comes in several answers, each cursor where the last one stopped.
    for (
      let nl = buffer.indexOf(0x0a);
      nl >= 0 && changes.length < MAX_CHANGES;
      nl = buffer.indexOf(0x0a, done)
    ) {
      const event = LedgerEvent.safeParse(safeJson(buffer.subarray(done, nl).toString("utf8")));
      done = nl + 1;
      if (!event.success || event.data.seq <= at.seq) continue;
      seq = event.data.seq;
      const change = changeOf(event.data, runDir);
      if (change) changes.push(change);
    }
    const more = changes.length >= MAX_CHANGES || buffer.length < size - at.offset;
    return { changes, cursor: { seq, offset: at.offset + done }, more: more && at.offset + done < size };
  } finally {
    await handle.close();
  }
}

function safeJson(line: string): unknown {
  try {
    return JSON.parse(line);
  } catch {
    return null;
  }
}

/** What a caller following the run hears of one ledger event; null: nothing (most of them). */
function changeOf(event: LedgerEvent, runDir: string): RunChange | null {
  const entry = ledgerEntryOf(event);
  if (!entry) return null;
  const at = event.ts;
  const task = event.task_id ?? "";
  switch (entry.type) {
    case "run.accepted":
      return { event: "run_started", at, tasks: entry.data.tasks?.length ?? 0 };
    case "task.launched":
      return { event: "task_started", at, task, attempt: entry.data.attempt ?? 1 };
    case "task.retrying": {
      const reason = Reason.safeParse(entry.data.reason);
      return {
        event: "task_retrying",
        at,
        task,
        attempt: entry.data.attempt ?? 1,
        reason: reason.success ? reason.data : "exit_code",
      };
    }
    case "task.waiting_input":
      return {
        event: "task_waiting_input",
        at,
        task,
        asks: entry.data.asks ?? null,
        answers: entry.data.answers ?? [],
      };
    case "task.input_resumed":
      return { event: "task_input_resumed", at, task };
    case "task.waiting_approval":
    case "run.waiting_approval":
      return {
        event: "waiting_approval",
        at,
        task: entry.type === "run.waiting_approval" ? null : task,
        what: entry.data.at ?? "result",
        attempt: entry.data.attempt ?? 0,
        until: entry.data.until ?? null,
      };
    case "task.success":
    case "task.failed":
    case "task.skipped": {
      const state = TaskState.parse(entry.type.slice("task.".length));
      const reason = Reason.safeParse(entry.data.reason);
      return {
        event: "task_ended",
        at,
        task,
        state,
        reason: reason.success ? reason.data : null,
        detail: entry.data.detail ?? null,
        ...(entry.data.needs_human === true ? { needs_human: true as const } : {}),
      };
    }
    case "merge.redo_started":
      return {
        event: "task_redo_started",
        at,
        task,
        cause: entry.data.cause ?? "conflict",
        attempt: entry.data.attempt ?? 1,
        redo: entry.data.redo ?? 1,
        conflicted_with: entry.data.conflicted_with ?? [],
        files: entry.data.files ?? [],
      };
    case "merge.redo_finished": {
      const reason = Reason.safeParse(entry.data.reason);
      return {
        event: "task_redo_finished",
        at,
        task,
        cause: entry.data.cause ?? "conflict",
        redo: entry.data.redo ?? 1,
        outcome: entry.data.outcome ?? "failed",
        reason: reason.success ? reason.data : null,
      };
    }
    case "merge.probe":
      return {
        event: "merge_probe",
        at,
        k: entry.data.k ?? 0,
        of: entry.data.of ?? 0,
        task: entry.data.task ?? null,
        passed: entry.data.passed ?? false,
        duration_ms: entry.data.duration_ms ?? 0,
      };
    case "merge.bisect_finished":
      return {
        event: "merge_bisected",
        at,
        culprit: entry.data.culprit ?? null,
        red_on_base: entry.data.outcome === "red_on_base",
        gate_runs: entry.data.gate_runs ?? 0,
        time_ms: entry.data.time_ms ?? 0,
      };
    case "merge.success":
    case "merge.conflict":
    case "merge.failed":
    case "merge.skipped":
    case "merge.rolled_back":
      return {
        event: "merge",
        at,
        result: entry.data.result ?? entry.type.slice(6),
        reason: entry.data.reason ?? null,
        redo: redoSteps(runDir, entry.data.redoAssignments ?? []),
      };
    case "run.detached":
      return { event: "run_detached", at };
    case "report.written":
      return {
        event: "run_finished",
        at,
        exit_code: entry.data.exit_code ?? 70,
        failed_tasks: entry.data.failed_tasks ?? [],
      };
    default:
      return null;
  }
}

/** How many tasks are in each state, who waits for an answer, who needs a person, where the merge is, the budget. */
export function taskSummary(
  view: RunView | null,
): Pick<WaitOutput, "tasks" | "waiting_input" | "needs_human" | "merge" | "budget"> {
  const tasks: Record<string, number> = {};
  const waiting: WaitOutput["waiting_input"] = [];
  const humans: WaitOutput["needs_human"] = [];
  for (const t of view?.tasks ?? []) {
    const state = t.waiting_approval
      ? "waiting_approval"
      : t.waiting_since
        ? "waiting_input"
        : t.waiting_quota_until
          ? "waiting_quota"
          : t.state;
    tasks[state] = (tasks[state] ?? 0) + 1;
    if (t.waiting_since) waiting.push({ task: t.id, asks: t.waiting_for, answers: t.waiting_answers });
    if (t.needs_human) humans.push({ task: t.id, reason: t.detail });
  }
  return {
    tasks,
    waiting_input: waiting,
    needs_human: humans,
    merge: view?.merge?.line ?? null,
    budget: view?.budget ?? null,
  };
}

/**
 * Resolves when something in `runDir` changes (its ledger, state.json, its status files), after
 * `ms`, or on `signal`; a driver that dies writes nothing, so the caller looks again each time.
 */
export function changeIn(runDir: string, ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const watchers: FSWatcher[] = [];
    const done = (): void => {
      clearTimeout(timer);
      signal.removeEventListener("abort", done);
      for (const w of watchers) w.close();
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal.addEventListener("abort", done, { once: true });
    for (const dir of [runDir, join(runDir, "status")]) {
      try {
        const w = watch(dir, done);
        w.on("error", done);
        watchers.push(w);
      } catch {
        // Not there yet (a queued run, a run before its first task): the timer looks again.
      }
    }
  });
}
