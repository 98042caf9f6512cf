/** How executing a task ended: done (it succeeded or failed), or left running for a later resume. */
export type TaskEnd = { kind: "done"; ok: boolean } | { kind: "detached" };

export const DETACHED: TaskEnd = { kind: "detached" };

/**
 * The task-executor seam: runs one task of the run to its end, recording every change through
 * the run's TaskRecorder. `resume`: the task was started by an earlier process (state.json says
 * so); what it started is picked up, never started a second time. Local (execute.ts: attempts
 * in this host's tmux) and remote (src/scale/remote-executor.ts: the task on a worker).
 */
export interface TaskExecutor {
  execute(taskId: string, resume: boolean): Promise<TaskEnd>;
  /**
   * Before a task not started yet takes a slot: null, it may start; else how it ended without
   * starting (a person's approval it waits for, src/task/approval.ts).
   */
  admit?(taskId: string): Promise<TaskEnd | null>;
}
