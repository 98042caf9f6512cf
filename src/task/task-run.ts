import type { TaskRun } from "../contract/state.js";

export type { TaskRun } from "../contract/state.js";

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
    refsCreated: [],
    gitControls: [],
    logs: null,
    artifacts: [],
    gates: [],
    argv,
    agentIndex: 0,
    attemptDir: null,
    attemptStartedAt: null,
    agentResult: null,
    usage: null,
    waitingSince: null,
    waitingFor: null,
    waitingAnswers: [],
    stateFrom: null,
    hosts: [],
    redo: null,
    redone: [],
    history: [],
    next: null,
  };
}
