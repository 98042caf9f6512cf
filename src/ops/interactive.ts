import { mkdtempSync, rmSync, statSync, writeFileSync } from "node:fs";
import { mkdir, readFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { keysProblems } from "../contract/keys.js";
import type { RunState, TaskRun } from "../contract/state.js";
import { InputError } from "../errors.js";
import { writeJsonAtomic } from "../fs/atomic.js";
import { finishFileOf, privateDirOf } from "../fs/private-dir.js";
import { serverFor } from "./sessions.js";
import { findTask } from "./task-target.js";

type Env = Readonly<Record<string, string | undefined>>;

/** What `send` types: the operator's text or a file as it is (pasted), or keys (pressed). */
export type SendInput = { text: string } | { file: string } | { keys: readonly string[] };

/**
 * The one answer a send gives, from what the CLI, MCP or serve was handed: exactly one of text,
 * file and keys, the keys each one termorch presses. InputError (exit 2) otherwise.
 */
export function sendInputOf(
  taskId: string,
  given: { text?: string | undefined; file?: string | undefined; keys?: readonly string[] | undefined },
): SendInput {
  const named = (["text", "file", "keys"] as const).filter((k) => given[k] !== undefined);
  if (named.length !== 1)
    throw new InputError(
      [
        {
          message: `send ${taskId}: give one of text (TEXT), a file (--file F) and keys (--keys K...): ${named.length === 0 ? "none was" : `${named.join(" and ")} were`} given`,
        },
      ],
      `e.g. termorch send ${taskId} "use the blue one", or for a menu: termorch send ${taskId} --keys 2`,
    );
  if (given.keys !== undefined) {
    checkKeys(taskId, given.keys);
    return { keys: given.keys };
  }
  return given.file !== undefined ? { file: given.file } : { text: given.text! };
}

/** InputError (exit 2) naming each key termorch would not press; nothing is pressed then. */
function checkKeys(taskId: string, keys: readonly string[]): void {
  const problems = keysProblems(keys);
  if (problems.length > 0)
    throw new InputError(
      problems.map((message) => ({ message: `--keys: ${message}` })),
      `e.g. termorch send ${taskId} --keys 2, or --keys Down Enter`,
    );
}

/**
 * `termorch send`: pastes text into a running task's live session the way termorch pastes an
 * interactive task's prompt (one bracketed paste, then Enter), so a multi-line answer arrives
 * whole and is submitted once; or presses keys there, for a menu that takes keys and ignores a
 * paste. An unknown task, or one that does not run: InputError (exit 2).
 */
export async function sendToTask(
  taskId: string,
  runRef: string | undefined,
  input: SendInput,
  opts: { env: Env; cwd: string },
): Promise<{ state: RunState; task: TaskRun }> {
  if ("file" in input && !statSync(input.file, { throwIfNoEntry: false })?.isFile())
    throw new InputError([{ message: `--file ${input.file}: no such file` }], "Name a readable file.");
  const { state, task, session } = await findTask(taskId, runRef, { ...opts, needSession: true });
  if (task.state !== "running" || !session?.live)
    throw new InputError(
      [{ message: `task ${taskId} of run ${state.run_id} is not running (it is ${task.state})` }],
      `Only a running task's agent can be answered; termorch logs ${taskId} --run ${state.run_id} shows what it did.`,
    );
  // Another agent's terminal is not an input: its prompt came on stdin, nothing reads the pane.
  if (!(await isInteractive(state, taskId)))
    throw new InputError(
      [
        {
          message: `task ${taskId} of run ${state.run_id} is not an interactive task: send answers only those`,
        },
      ],
      `Watch it with: termorch attach ${taskId} --run ${state.run_id}`,
    );
  const server = serverFor(state.socket, opts.env);
  if ("keys" in input) {
    await server.sendKeys(task.current.session!, input.keys);
    return { state, task };
  }
  if ("file" in input) {
    await server.pasteFile(task.current.session!, input.file);
    return { state, task };
  }
  // A private file: the answer may hold what the operator would not leave lying around.
  const dir = mkdtempSync(join(tmpdir(), "termorch-send-"));
  try {
    const file = join(dir, "text");
    writeFileSync(file, input.text, { mode: 0o600 });
    await server.pasteFile(task.current.session!, file);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  return { state, task };
}

/** Only an interactive task's running status file carries waiting_input. */
async function isInteractive(state: RunState, taskId: string): Promise<boolean> {
  const status = await readFile(join(state.run_dir, "status", `${taskId}.running`), "utf8").catch(() => null);
  try {
    return status !== null && "waiting_input" in (JSON.parse(status) as object);
  } catch {
    // Being replaced: the task is moving on from running.
    return false;
  }
}

/**
 * `termorch finish`: asks the run's driver to end an interactive task's agent and count the task
 * as done (exit 0), through a file in the run's private folder that the driver samples with the
 * task's screen. A task that does not run: InputError (exit 2).
 */
export async function requestFinish(
  taskId: string,
  runRef: string | undefined,
  opts: { env: Env; cwd: string; now: number },
): Promise<{ state: RunState; task: TaskRun; file: string }> {
  const { state, task } = await findTask(taskId, runRef, { ...opts, needSession: true });
  if (task.state !== "running")
    throw new InputError(
      [{ message: `task ${taskId} of run ${state.run_id} is not running (it is ${task.state})` }],
      "Only a running interactive task can be finished.",
    );
  // Nothing would watch for the finish file of another.
  if (!(await isInteractive(state, taskId)))
    throw new InputError(
      [
        {
          message: `task ${taskId} of run ${state.run_id} is not an interactive task: finish ends only those`,
        },
      ],
      `To stop the whole run: termorch cancel ${state.run_id}`,
    );
  const file = finishFileOf(privateDirOf(state.run_dir, state.run_id), taskId);
  await mkdir(dirname(file), { recursive: true, mode: 0o700 });
  await writeJsonAtomic(file, { requested_at: new Date(opts.now).toISOString(), by_pid: process.pid }, 0o600);
  return { state, task, file };
}
