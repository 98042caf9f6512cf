import { existsSync, type FSWatcher, watch } from "node:fs";
import { mkdir } from "node:fs/promises";
import { join } from "node:path";
import type { RunState } from "../contract/state.js";
import { writeJsonAtomic } from "../fs/atomic.js";
import { CANCEL_FILE, privateDirOf } from "../fs/private-dir.js";
import { driverAlive } from "./liveness.js";
import { readRunState } from "./runs.js";

/** The file a run's driver watches; creating it cancels the run (docs/ARCHITECTURE.md: the private folder). */
export function cancelFileOf(runDir: string, runId: string): string {
  return join(privateDirOf(runDir, runId), CANCEL_FILE);
}

/** Drops the cancel file; the driver (a one-shot run, a resume or the daemon) picks it up through fs.watch. */
export async function requestCancel(state: RunState, by: { pid: number; now: number }): Promise<string> {
  const file = cancelFileOf(state.run_dir, state.run_id);
  await mkdir(join(state.run_dir, ".termorch", state.run_id), { recursive: true, mode: 0o700 });
  await writeJsonAtomic(file, { requested_at: new Date(by.now).toISOString(), by_pid: by.pid }, 0o600);
  return file;
}

/** How waiting for a cancelled run ended. */
export type CancelWait =
  | { outcome: "reported"; state: RunState }
  | { outcome: "driver_gone"; state: RunState }
  | { outcome: "timed_out"; state: RunState }
  | { outcome: "replaced"; runId: string }
  | { outcome: "aborted" };

/** What waitForReport needs. */
export interface WaitOptions {
  /** The run's state when the wait starts. */
  initial: RunState;
  timeoutMs: number;
  /** How often to call onProgress (and look at the driver's pid, whose death no file announces). */
  progressMs: number;
  onProgress: (state: RunState, elapsedMs: number) => void;
  signal?: AbortSignal;
}

/**
 * Waits until the run's state.json says `reported` (its report is written), watching the run
 * directory; bounded by `timeoutMs`. Ends early when the driver dies without a report.
 */
export function waitForReport(o: WaitOptions): Promise<CancelWait> {
  return new Promise<CancelWait>((resolve) => {
    const started = Date.now();
    const { run_dir: runDir, run_id: runId } = o.initial;
    let last: RunState = o.initial;
    let watcher: FSWatcher | null = null;
    let done = false;
    let checking = false;
    let again = false;
    const finish = (result: CancelWait): void => {
      if (done) return;
      done = true;
      watcher?.close();
      clearInterval(ticker);
      clearTimeout(timer);
      o.signal?.removeEventListener("abort", onAbort);
      resolve(result);
    };
    const onAbort = (): void => finish({ outcome: "aborted" });
    const check = async (): Promise<void> => {
      if (done) return;
      if (checking) {
        again = true;
        return;
      }
      checking = true;
      try {
        do {
          again = false;
          const read = await readRunState(runDir);
          if ("problem" in read) continue;
          if (read.state.run_id !== runId) return finish({ outcome: "replaced", runId: read.state.run_id });
          last = read.state;
          if (read.state.phase === "reported") return finish({ outcome: "reported", state: read.state });
        } while (again && !done);
      } finally {
        checking = false;
      }
    };
    const ticker = setInterval(() => {
      // The driver's death writes no file: look at its pid now and then, then read once more.
      if (!driverAlive(last.pid, last.updated_at)) {
        const state = last;
        void check().then(() => finish({ outcome: "driver_gone", state }));
        return;
      }
      o.onProgress(last, Date.now() - started);
    }, o.progressMs);
    const timer = setTimeout(() => {
      void check().then(() => finish({ outcome: "timed_out", state: last }));
    }, o.timeoutMs);
    if (o.signal?.aborted) return finish({ outcome: "aborted" });
    o.signal?.addEventListener("abort", onAbort, { once: true });
    try {
      // state.json is replaced by rename: the folder's watcher sees it, a watcher on the file would not.
      if (existsSync(runDir)) {
        watcher = watch(runDir, () => void check());
        watcher.on("error", () => {});
      }
    } catch {
      watcher = null;
    }
    void check();
  });
}
