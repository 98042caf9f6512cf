import { readFileSync } from "node:fs";
import { join } from "node:path";
import { RunState, TaskRun } from "../contract/state.js";
import { AppendFile } from "./append-file.js";

/**
 * The task journal of a live run: one line per task transition, the whole TaskRun, appended
 * to one file. A later line supersedes earlier ones of the same task. Appending costs a single
 * write() of microseconds; rewriting a file instead (state.json, or a file per task) costs a
 * full copy or, on ext4, a flush of the file it replaces (~0.1 ms), at every transition.
 */
export class TaskJournal {
  private readonly file: AppendFile;
  private checked = false;

  constructor(readonly path: string) {
    this.file = new AppendFile(path);
  }

  /** Synchronous: its callers write the task's status file right after, which must never be ahead of it. */
  write(task: TaskRun): void {
    if (!this.checked) {
      // A crash mid-append left a torn line: end it, so the next line stands on its own.
      if (!this.file.endsWithNewline()) this.file.append("\n");
      this.checked = true;
    }
    this.file.append(`${JSON.stringify(task)}\n`);
  }

  close(): void {
    this.file.close();
    this.checked = false;
  }
}

export type RunStateRead = { ok: true; state: RunState } | { ok: false; path: string; problem: string };

/**
 * Reads `<runDir>/state.json` with a live run's task journal merged in. `problem` says what is
 * wrong with a missing, damaged or unreadable file; the caller words it for its user.
 */
export function readRunStateFile(runDir: string): RunStateRead {
  const path = join(runDir, "state.json");
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch {
    return { ok: false, path, problem: "missing" };
  }
  let data: unknown;
  try {
    data = JSON.parse(text);
  } catch (error) {
    return {
      ok: false,
      path,
      problem: `not JSON: ${error instanceof Error ? error.message : String(error)}`,
    };
  }
  const parsed = RunState.safeParse(data);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    return { ok: false, path, problem: `unreadable: ${issue?.path.join(".")}: ${issue?.message}` };
  }
  return { ok: true, state: withJournal(parsed.data) };
}

function withJournal(state: RunState): RunState {
  if (state.task_journal === null) return state;
  let text: string;
  try {
    text = readFileSync(state.task_journal, "utf8");
  } catch {
    return state; // no task has moved yet
  }
  const newest = new Map<string, TaskRun>();
  for (const line of text.split("\n")) {
    if (line === "") continue;
    let raw: unknown;
    try {
      raw = JSON.parse(line);
    } catch {
      continue; // a torn line: the transition it was writing never happened
    }
    const task = TaskRun.safeParse(raw);
    if (task.success) newest.set(task.data.id, task.data);
  }
  return { ...state, tasks: state.tasks.map((t) => newest.get(t.id) ?? t) };
}
