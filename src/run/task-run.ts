import type { Reason, TaskState } from "../contract/reason.js";
import type { Gate } from "../contract/report.js";

/** Everything the run knows about one task; the report and the status files are views of it. */
export interface TaskRun {
  id: string;
  agent: string;
  dependencies: string[];
  /** `pending` until the task starts or is skipped. */
  state: TaskState | "pending";
  reason: Reason | null;
  detail: string | null;
  exitCode: number | null;
  attempts: number;
  startedAt: number | null;
  finishedAt: number | null;
  session: string | null;
  branch: string | null;
  /** The commit the task's worktree started from. */
  startCommit: string | null;
  /** The task branch's tip after its work was committed. */
  commit: string | null;
  /** Log paths relative to the run directory. */
  logs: { stdout: string; stderr: string } | null;
  artifacts: string[];
  gates: Gate[];
  argv: string[];
}

export function newTaskRun(id: string, agent: string, dependencies: string[], argv: string[]): TaskRun {
  return {
    id,
    agent,
    dependencies,
    state: "pending",
    reason: null,
    detail: null,
    exitCode: null,
    attempts: 0,
    startedAt: null,
    finishedAt: null,
    session: null,
    branch: null,
    startCommit: null,
    commit: null,
    logs: null,
    artifacts: [],
    gates: [],
    argv,
  };
}
