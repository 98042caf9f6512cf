import { existsSync, type FSWatcher, watch } from "node:fs";
import { open } from "node:fs/promises";
import { isAbsolute, join } from "node:path";
import type { RunState, TaskRun } from "../contract/state.js";
import { readRunState } from "./runs.js";

/** Which of a task's logs. */
export type LogStream = "stdout" | "stderr";

/** Where output goes; awaits the stream's drain so a fast log cannot pile up in memory. */
export type Sink = (chunk: Buffer) => Promise<void>;

/** A sink over a writable stream that respects its backpressure. */
export function streamSink(out: NodeJS.WritableStream): Sink {
  return (chunk) =>
    new Promise((resolve) => {
      if (out.write(chunk)) resolve();
      else out.once("drain", () => resolve());
    });
}

const FINAL = ["success", "failed", "skipped"];
const CHUNK = 64 * 1024;

/** Absolute path of a task's log, or null before its first attempt. */
export function logPathOf(state: RunState, task: TaskRun, stream: LogStream): string | null {
  const rel = task.result.logs?.[stream];
  if (!rel) return null;
  return isAbsolute(rel) ? rel : join(state.run_dir, rel);
}

/** Copies `path` from byte `from` to its current end into the sink; returns the new offset. */
export async function copyFrom(path: string, from: number, sink: Sink): Promise<number> {
  let handle: Awaited<ReturnType<typeof open>>;
  try {
    handle = await open(path, "r");
  } catch {
    return from;
  }
  let pos = from;
  try {
    const buffer = Buffer.alloc(CHUNK);
    for (;;) {
      const { bytesRead } = await handle.read(buffer, 0, CHUNK, pos);
      if (bytesRead === 0) return pos;
      pos += bytesRead;
      await sink(Buffer.from(buffer.subarray(0, bytesRead)));
    }
  } finally {
    await handle.close();
  }
}

/** What ended a follow. */
export type FollowEnd = "finished" | "aborted" | "replaced";

/** What followLog needs. */
export interface FollowOptions {
  runDir: string;
  runId: string;
  taskId: string;
  stream: LogStream;
  sink: Sink;
  /** Messages for the operator (a retry switched logs), not log content. */
  notice: (line: string) => void;
  signal: AbortSignal;
}

/**
 * Prints the task's log and then what is appended to it, until the task's state is final and
 * the log is drained ("finished"), the signal aborts, or a later run takes over the run directory.
 * A retry writes a new log: the follow moves on to it. Driven by fs.watch on the run directory,
 * its status and logs folders (appends show up as changes in the logs folder).
 */
export function followLog(o: FollowOptions): Promise<FollowEnd> {
  return new Promise<FollowEnd>((resolve, reject) => {
    const watchers = new Map<string, FSWatcher>();
    let current: string | null = null;
    let pos = 0;
    let busy = false;
    let again = false;
    let done = false;

    const finish = (end: FollowEnd | Error): void => {
      if (done) return;
      done = true;
      for (const w of watchers.values()) w.close();
      o.signal.removeEventListener("abort", onAbort);
      if (end instanceof Error) reject(end);
      else resolve(end);
    };
    const onAbort = (): void => finish("aborted");

    const ensureWatching = (): void => {
      for (const dir of [o.runDir, join(o.runDir, "status"), join(o.runDir, "logs")]) {
        if (watchers.has(dir) || !existsSync(dir)) continue;
        try {
          const w = watch(dir, () => kick());
          w.on("error", () => {});
          watchers.set(dir, w);
        } catch {
          // Created and removed in between: the run directory watcher sees it come back.
        }
      }
    };

    const taskFinal = (state: RunState, task: TaskRun): boolean =>
      state.phase === "reported" ||
      FINAL.includes(task.state) ||
      FINAL.some((s) => existsSync(join(o.runDir, "status", `${o.taskId}.${s}`)));

    // One pass: catch up with the log the state names now; how the follow ends, or null to go on.
    const pass = async (): Promise<FollowEnd | null> => {
      ensureWatching();
      const read = await readRunState(o.runDir);
      if ("problem" in read) throw new Error(read.problem);
      const state = read.state;
      if (state.run_id !== o.runId) {
        o.notice(`run ${o.runId}'s directory now holds run ${state.run_id}; stopping`);
        return "replaced";
      }
      const task = state.tasks.find((t) => t.id === o.taskId);
      if (!task) throw new Error(`run ${o.runId} has no task ${o.taskId}`);
      // Decided before reading: once final, the log is complete, so what is read next is all of it.
      const final = taskFinal(state, task);
      const path = logPathOf(state, task, o.stream);
      if (path !== current) {
        if (current !== null) {
          await copyFrom(current, pos, o.sink);
          o.notice(`attempt ${task.attempts} of ${o.taskId} writes a new log: ${path}`);
        }
        current = path;
        pos = 0;
      }
      if (current !== null) pos = await copyFrom(current, pos, o.sink);
      return final ? "finished" : null;
    };

    const kick = (): void => {
      if (done) return;
      if (busy) {
        again = true;
        return;
      }
      busy = true;
      void (async () => {
        try {
          do {
            again = false;
            const end = await pass();
            if (end) {
              finish(end);
              return;
            }
          } while (again && !done);
        } catch (error) {
          finish(error instanceof Error ? error : new Error(String(error)));
        } finally {
          busy = false;
        }
      })();
    };

    if (o.signal.aborted) return finish("aborted");
    o.signal.addEventListener("abort", onAbort, { once: true });
    kick();
  });
}
