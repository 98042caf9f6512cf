import { type FSWatcher, statSync, watch } from "node:fs";
import { basename, dirname } from "node:path";
import { StringDecoder } from "node:string_decoder";
import { type OutputFormat, parseTranscript, type TranscriptFormat } from "../agent/results.js";
import { streamsUsage, UsageStream } from "../agent/usage-stream.js";
import type { Usage } from "../contract/agent-result.js";
import { readPartsSync } from "../fs/file-range.js";
import { limits } from "../spend/budget.js";
import { withCost } from "../spend/pricing.js";
import type { Ports } from "./ports.js";
import type { TaskRecorder } from "./recorder.js";
import type { RunPlan } from "./run-plan.js";
import { outOfBudget } from "./spend.js";
import type { AgentPlan, TaskPlan } from "./task-plan.js";
import type { TaskRun } from "./task-run.js";

/** How often a source that no file event announces is read again (an interactive transcript). */
const POLL_MS = 1000;
/** The most of a log read at once: a step's usage line follows its output, which may be large. */
const CHUNK = 4 * 1024 * 1024;

/** Where a running attempt's spend can be read while it runs. */
export interface SpendSource {
  /** Its stdout log, when its CLI streams JSONL events with each step's usage. */
  log: string | null;
  /** Its interactive session's transcript, once known (read whole again when it grew). */
  transcript: (() => { format: TranscriptFormat; path: string } | null) | null;
}

/** The source of an attempt of `agent`, its stdout log at `stdoutLog`. */
export function spendSource(
  agent: Pick<AgentPlan, "output">,
  stdoutLog: string,
  transcript: SpendSource["transcript"],
): SpendSource {
  const format: OutputFormat | null = agent.output;
  return { log: format !== null && streamsUsage(format) ? stdoutLog : null, transcript };
}

/**
 * Watches a running attempt against its task's budgets (the run's and its own), while any is set:
 * what it spends is read as its CLI streams it (recorder.streamed: views and other tasks' watchers
 * see it), and at every change of the run's spend, if a budget is reached and the run's
 * `on_budget` is `stop`, `over` is called once.
 */
export function watchSpend(
  run: Pick<RunPlan, "settings">,
  ports: Pick<Ports, "log">,
  recorder: TaskRecorder,
  t: Readonly<TaskRun>,
  p: TaskPlan,
  agent: Pick<AgentPlan, "output" | "price">,
  source: SpendSource,
  over: () => void,
): { dispose(): void } {
  if (!limits(run.settings.budget) && !limits(p.budget)) return { dispose: () => {} };
  let ended = false;
  const check = (): void => {
    if (ended || run.settings.on_budget !== "stop") return;
    if (outOfBudget(run, recorder, p) === null) return;
    ended = true;
    over();
  };
  const unsubscribe = recorder.onSpend(check);
  const note = (usage: Usage | null): void => {
    if (usage !== null) recorder.streamed(t.id, withCost(usage, agent.price)!);
  };
  const readers: { dispose(): void }[] = [];
  if (source.log) readers.push(tailLog(source.log, agent.output!, note, ports));
  if (source.transcript) readers.push(pollTranscript(source.transcript, note));
  // Spent already by what ran before it (a resumed attempt, another task's end in between).
  check();
  return {
    dispose() {
      unsubscribe();
      for (const r of readers) r.dispose();
    },
  };
}

/**
 * Follows a JSONL log as it is written (a file event, else a poll), each new whole line read
 * once; `note` hears the total whenever it changed.
 */
function tailLog(
  path: string,
  format: OutputFormat,
  note: (usage: Usage | null) => void,
  ports: Pick<Ports, "log">,
): { dispose(): void } {
  const stream = new UsageStream(format);
  const decoder = new StringDecoder("utf8");
  let offset = 0;
  const read = (): void => {
    let changed = false;
    for (;;) {
      const got = readPartsSync(path, [{ from: offset, bytes: CHUNK }]);
      const part = got?.parts[0];
      if (!part || part.length === 0) break;
      offset += part.length;
      changed = stream.push(decoder.write(part)) || changed;
    }
    if (changed) note(stream.total);
  };
  // The log's folder is watched, not the log: the session may not have created it yet.
  let watcher: FSWatcher | null = null;
  try {
    watcher = watch(dirname(path), (_event, name) => {
      if (name === null || name === basename(path)) read();
    });
    watcher.on("error", () => watcher?.close());
  } catch (error) {
    ports.log.debug({ path, error: String(error) }, "cannot watch the log's folder; polling it");
  }
  const timer = setInterval(read, POLL_MS);
  timer.unref();
  read();
  return {
    dispose() {
      watcher?.close();
      clearInterval(timer);
    },
  };
}

/** Reads an interactive session's transcript whole again whenever it grew: its usage so far. */
function pollTranscript(
  find: () => { format: TranscriptFormat; path: string } | null,
  note: (usage: Usage | null) => void,
): { dispose(): void } {
  let found: { format: TranscriptFormat; path: string } | null = null;
  let size = -1;
  const read = (): void => {
    found ??= find();
    if (!found) return;
    const now = sizeOf(found.path);
    if (now === size) return;
    size = now;
    const text = readPartsSync(found.path, [{ from: null, bytes: 16 * 1024 * 1024 }])?.parts[0];
    if (text) note(parseTranscript(found.format, text.toString("utf8")).usage);
  };
  const timer = setInterval(read, POLL_MS);
  timer.unref();
  return { dispose: () => clearInterval(timer) };
}

function sizeOf(path: string): number {
  try {
    return statSync(path).size;
  } catch {
    return -1;
  }
}

/** What an attempt ended at a budget says (the policy puts the budget and the spend before it). */
export const ENDED_AT_BUDGET = "termorch ended its attempt at the budget";
