import { mkdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { RunState, TaskRun } from "../contract/state.js";
import { writeFileAtomicSync } from "./atomic.js";

/** `<tasks_dir>/<id>/task.json`: one task's newest state while its run is live. */
export function taskStatePath(tasksDir: string, taskId: string): string {
  return join(tasksDir, taskId, "task.json");
}

/**
 * Writes one task's state (a transition of that task). Synchronous: a few hundred bytes, and
 * its callers write the task's status file right after, which must never be ahead of it.
 */
export function writeTaskState(tasksDir: string, task: TaskRun, known: Set<string>): void {
  const dir = join(tasksDir, task.id);
  if (!known.has(dir)) {
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    known.add(dir);
  }
  writeFileAtomicSync(join(dir, "task.json"), `${JSON.stringify(task)}\n`, 0o600, false);
}

export type RunStateRead = { ok: true; state: RunState } | { ok: false; path: string; problem: string };

/**
 * Reads `<runDir>/state.json` with the per-task files of a live run merged in. `problem` says
 * what is wrong with a missing, damaged or unreadable file; the caller words it for its user.
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
  return { ok: true, state: withTaskFiles(parsed.data) };
}

function withTaskFiles(state: RunState): RunState {
  const dir = state.tasks_dir;
  if (dir === null) return state;
  const tasks = state.tasks.map((t) => {
    let text: string;
    try {
      text = readFileSync(taskStatePath(dir, t.id), "utf8");
    } catch {
      return t; // not started yet: state.json's copy is current
    }
    try {
      const newer = TaskRun.safeParse(JSON.parse(text));
      return newer.success && newer.data.id === t.id ? newer.data : t;
    } catch {
      return t;
    }
  });
  return { ...state, tasks };
}
