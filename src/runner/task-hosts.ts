import type { LogChunk, TaskJob, TaskJobProgress, TaskJobResult } from "../contract/task-job.js";

/**
 * The task-hosts seam: other hosts that run whole tasks (scale-out, docs/SCALING.md). Where the
 * task-runner seam (task-runner.ts) runs one attempt in a worktree the pipeline prepared, a host
 * runs the task's whole local pipeline (worktree, attempts, gates, commit) on its own disk: the
 * agent's work has to be committed where it ran. A worker does that through this same pipeline
 * and the local tmux runner; the coordinator sees only jobs, progress and results.
 * `BullmqHosts` (src/scale/) is the implementation; the middle test tier can inject another.
 */
export interface TaskHosts {
  /** What status and the log name the backend by, e.g. `bullmq redis://127.0.0.1:6379` (no password). */
  readonly name: string;
  /**
   * Runs one task job on some host, or picks up the job of that id if it exists already (a
   * resumed run): the same id is the same job, delivered at least once. Resolves with its
   * result, or "detached" when `detach` aborts first (the job goes on without a watcher).
   * Rejects only when the backend itself failed, never for the task's own failure.
   */
  run(
    jobId: string,
    job: TaskJob,
    o: {
      onProgress: (progress: TaskJobProgress) => void;
      /** Pieces of the running attempt's logs, in order (some may be missing: the result has them all). */
      onLog: (chunk: LogChunk) => void;
      detach: AbortSignal;
    },
  ): Promise<TaskJobResult | "detached">;
  /** Drops a finished job and its result, once the task's end is recorded here (a resume no longer needs it). */
  forget(jobId: string): Promise<void>;
  /** Tells the workers to end a run's tasks (cancel, --fail-fast): they end them as a local run would. */
  cancel(runId: string): Promise<void>;
  /** Drops what the backend keeps of a run that ended (its cancel mark): its tasks' ends are recorded here. */
  forgetRun(runId: string): Promise<void>;
  /** Lets go of the connections. */
  close(): Promise<void>;
  /**
   * Calls `listener` with what the operator should know about the hosts (no worker takes the
   * jobs), and with null once it no longer holds.
   */
  onNotice(listener: (notice: string | null) => void): void;
}

/** Where a scale-out run's tasks go: the hosts, and the git remote between them and the user's repository. */
export interface RemoteBackend {
  hosts: TaskHosts;
  remote: string;
}
