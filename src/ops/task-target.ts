import type { RunState, TaskRun } from "../contract/state.js";
import { InputError } from "../errors.js";
import { registryDir } from "../fs/names.js";
import { type OpsRun, registryRuns, startedRun } from "./runs.js";
import { type SessionInfo, sessionsBySocket } from "./sessions.js";

type Env = Readonly<Record<string, string | undefined>>;

/** One task of one run, found for `attach` or `logs`. */
export interface TaskTarget {
  state: RunState;
  task: TaskRun;
  /** Its session as the run's tmux server has it; null when it has none. */
  session: SessionInfo | null;
}

function sessionOf(state: RunState, task: TaskRun, sessions: Map<string, SessionInfo>): SessionInfo | null {
  const s = task.current.session ? sessions.get(task.current.session) : undefined;
  // A session of that name tagged with another run is not this task's.
  return s && (s.run === null || s.run === state.run_id) ? s : null;
}

function taskIn(run: OpsRun, taskId: string): TaskRun | undefined {
  return run.state?.tasks.find((t) => t.id === taskId);
}

/**
 * The task in the run the operator named, or else in the newest registered run that has it:
 * with `needSession`, the newest where its session exists (one whose agent still runs first).
 * Nothing suitable: InputError naming every run looked at and why it did not do.
 */
export async function findTask(
  taskId: string,
  runRef: string | undefined,
  opts: { env: Env; cwd: string; needSession: boolean },
): Promise<TaskTarget> {
  if (runRef !== undefined) {
    const run = await startedRun(runRef, opts.env, opts.cwd);
    const task = taskIn(run, taskId);
    if (!task) {
      throw new InputError(
        [
          {
            message: `run ${run.runId} has no task ${taskId}; its tasks: ${run.state.tasks.map((t) => t.id).join(", ")}`,
          },
        ],
        "Pass one of its task ids.",
      );
    }
    const sessions = (await sessionsBySocket([run.state.socket], opts.env)).get(run.state.socket)!;
    const session = sessionOf(run.state, task, sessions);
    if (opts.needSession && !session) {
      throw new InputError(
        [{ message: `task ${taskId} of run ${run.runId}: ${noSessionWhy(task)}` }],
        `Read its logs instead: termorch logs ${taskId} --run ${run.runId}`,
      );
    }
    return { state: run.state, task, session };
  }

  const runs = (await registryRuns(opts.env)).reverse();
  const sessions = await sessionsBySocket(
    runs.flatMap((r) => (r.state ? [r.state.socket] : [])),
    opts.env,
  );
  const looked: string[] = [];
  let fallback: TaskTarget | null = null;
  for (const run of runs) {
    const state = run.state;
    if (!state) {
      looked.push(`${run.runId}: ${run.problem}`);
      continue;
    }
    const task = taskIn(run, taskId);
    if (!task) {
      looked.push(`${run.runId}: no task ${taskId}`);
      continue;
    }
    const session = sessionOf(state, task, sessions.get(state.socket) ?? new Map());
    if (!opts.needSession) return { state, task, session };
    if (session?.live) return { state, task, session };
    if (session) {
      fallback ??= { state, task, session };
      looked.push(`${run.runId}: session ${task.current.session} kept, its agent has exited`);
    } else looked.push(`${run.runId}: ${noSessionWhy(task)}`);
  }
  if (fallback) return fallback;
  throw new InputError(
    [
      {
        message: `no ${opts.needSession ? "live session of " : ""}task ${taskId} in any registered run (registry ${registryDir(opts.env)})${
          looked.length ? `; looked at, newest first:\n${listed(looked)}` : ": no runs registered"
        }`,
      },
    ],
    "Pick a run with --run <id|dir>; `termorch status` lists runs, tasks and their sessions.",
  );
}

/** A registry can hold hundreds of runs: the newest few say enough. */
const MAX_LISTED = 10;

function listed(lines: string[]): string {
  const shown = lines.slice(0, MAX_LISTED).map((l) => `  ${l}`);
  if (lines.length > MAX_LISTED) shown.push(`  ... and ${lines.length - MAX_LISTED} older runs`);
  return shown.join("\n");
}

function noSessionWhy(task: TaskRun): string {
  if (!task.current.session || task.attempts === 0)
    return `no tmux session (task ${task.state}: it never started)`;
  if (task.state === "success") return `its session ${task.current.session} was closed after it succeeded`;
  return `its session ${task.current.session} is gone (task ${task.state}; closed, cleaned, or the tmux server stopped)`;
}
