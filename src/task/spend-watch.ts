import { statSync } from "node:fs";
import {
  type OutputFormat,
  parseAgentOutput,
  parseTranscript,
  type TranscriptFormat,
} from "../agent/results.js";
import { findCodexRollout, findSession } from "../agent/session-files.js";
import { streamsUsage, UsageStream } from "../agent/usage-stream.js";
import type { Usage } from "../contract/agent-result.js";
import { readPartsSync } from "../fs/file-range.js";
import { type Following, followFile, tailFile } from "../fs/follow-file.js";
import { limits } from "../spend/budget.js";
import { withCost } from "../spend/pricing.js";
import type { Ports } from "./ports.js";
import type { TaskRecorder } from "./recorder.js";
import type { RunPlan } from "./run-plan.js";
import { outOfBudget } from "./spend.js";
import type { AgentPlan, TaskPlan } from "./task-plan.js";
import type { TaskRun } from "./task-run.js";

/** How often a session's file is looked for until found. */
const LOOK_MS = 1000;

type Transcript = { format: TranscriptFormat; path: string };

/** Where a running attempt's spend can be read while it runs. */
export interface SpendSource {
  /** Its stdout log, when its CLI prints each model call's usage there (a JSONL stream). */
  log: string | null;
  /**
   * Where its CLI keeps the session, once found: an interactive transcript, codex's rollout, a
   * session file (gemini, qwen, copilot, cn), read whole again whenever it grew.
   */
  transcript: (() => Transcript | null) | null;
}

/**
 * Where an attempt of `agent` says what it spends while it runs: its stdout where that streams,
 * else the session its CLI keeps (interactive: the one its events named); neither for a CLI
 * that says it only at its end (claude headless has a cap of its own instead).
 */
export function spendSource(
  agent: Pick<AgentPlan, "output" | "sessions" | "env">,
  at: { stdoutLog: string; cwd: string; since: number },
  interactive: (() => Transcript | null) | null,
): SpendSource {
  const format = agent.output;
  if (format !== null && streamsUsage(format)) return { log: at.stdoutLog, transcript: null };
  if (interactive) return { log: null, transcript: interactive };
  if (format === "codex-jsonl")
    return {
      log: null,
      // Its first event names the thread; the thread's rollout has each call's usage.
      transcript: () => {
        const head = readPartsSync(at.stdoutLog, [{ from: 0, bytes: 64 * 1024 }])?.parts[0];
        const thread = head ? parseAgentOutput(format, head.toString("utf8")).result?.session_id : null;
        return thread ? findCodexRollout(agent.env, thread) : null;
      },
    };
  const store = agent.sessions;
  if (store !== null)
    return {
      log: null,
      transcript: () => findSession(store, { env: agent.env, cwd: at.cwd, since: at.since }),
    };
  return { log: null, transcript: null };
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
  if (source.transcript) readers.push(followTranscript(source.transcript, note, ports));
  // Spent already by what ran before it (a resumed attempt, another task's end in between).
  check();
  return {
    dispose() {
      unsubscribe();
      for (const r of readers) r.dispose();
    },
  };
}

/** Follows a JSONL log as it is written, each new whole line read once; `note` hears each new total. */
function tailLog(
  path: string,
  format: OutputFormat,
  note: (usage: Usage | null) => void,
  ports: Pick<Ports, "log">,
): Following {
  const stream = new UsageStream(format);
  return tailFile(
    path,
    (text) => {
      if (stream.push(text)) note(stream.total);
    },
    { cannotWatch: cannotWatch(ports, path) },
  );
}

/** What a follower says when a folder cannot be watched (it polls then). */
function cannotWatch(ports: Pick<Ports, "log">, path: string): (error: unknown) => void {
  return (error) => ports.log.debug({ path, error: String(error) }, "cannot watch the folder; polling it");
}

/**
 * Looks for the session's file every LOOK_MS until found, then follows it, reading it whole
 * again whenever it grew (its CLI may rewrite earlier entries): its usage so far.
 */
function followTranscript(
  find: () => Transcript | null,
  note: (usage: Usage | null) => void,
  ports: Pick<Ports, "log">,
): { dispose(): void } {
  let size = -1;
  let following: Following | null = null;
  const read = (found: Transcript): void => {
    const now = sizeOf(found.path);
    if (now === size) return;
    size = now;
    const text = readPartsSync(found.path, [{ from: null, bytes: 16 * 1024 * 1024 }])?.parts[0];
    if (text) note(parseTranscript(found.format, text.toString("utf8")).usage);
  };
  const look = (): void => {
    const found = find();
    if (!found) return;
    clearInterval(timer);
    following = followFile(found.path, () => read(found), { cannotWatch: cannotWatch(ports, found.path) });
  };
  const timer = setInterval(look, LOOK_MS);
  timer.unref();
  look();
  return {
    dispose() {
      clearInterval(timer);
      following?.dispose();
    },
  };
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
