import type { TaskRun } from "../contract/state.js";

export type { TaskRun } from "../contract/state.js";

export function newTaskRun(id: string, agent: string, dependencies: string[], argv: string[]): TaskRun {
  return {
    id,
    agent,
    dependencies,
    argv,
    state: "pending",
    reason: null,
    detail: null,
    needsHuman: false,
    attempts: 0,
    startedAt: null,
    finishedAt: null,
    git: { branch: null, startCommit: null, commit: null, refsCreated: [], controls: [] },
    current: { agentIndex: 0, dir: null, startedAt: null, session: null, usage: null },
    waiting: { since: null, for: null, answers: [], stateFrom: null, quotaUntil: null, approval: null },
    result: { exitCode: null, logs: null, artifacts: [], gates: [], agentResult: null, usage: null },
    hosts: [],
    redo: { progress: null, done: [] },
    history: [],
    next: null,
  };
}
