import type { Gate } from "../contract/report.js";
import { attemptEnv } from "./attempt.js";
import type { AttemptOutcome } from "./outcome.js";
import type { Ports } from "./ports.js";
import type { TaskRecorder } from "./recorder.js";
import type { RunPlan } from "./run-plan.js";
import { agentWork } from "./sandbox.js";
import type { RunStop } from "./stop.js";
import type { AgentPlan, TaskPlan } from "./task-plan.js";
import type { TaskRun } from "./task-run.js";
import { testsGate } from "./tests-gate.js";

/** A set-up that did not pass: the attempt ends here, without an agent (no exit record). */
export type SetupFailure = AttemptOutcome & { record: null };

/**
 * Runs the task's `setup_cmd` (its own, else the environment's) for the attempt about to start,
 * in its worktree (freshly prepared, or reset for a retry) or, for a plain folder, in the
 * workspace; through the shell gate, so its logs, timeout, cancel and a dead driver's leftovers
 * are handled as a tests_cmd's are. Its gate is put first in `t.gates`: the launch records it
 * in the task journal, so an adopted attempt still reports it. Answers null when there is
 * nothing to run or it passed (the agent may start), the failure, or "detached" (a daemon
 * shutdown: the resumed run sets up again, the gate's record ending what is left of this one).
 */
export async function runSetup(
  run: RunPlan,
  ports: Ports,
  stop: RunStop,
  recorder: TaskRecorder,
  t: Readonly<TaskRun>,
  p: TaskPlan,
  agent: AgentPlan,
): Promise<SetupFailure | null | "detached"> {
  const { cmd } = p.setup;
  if (cmd === null) return null;
  const { cwd } = p.workspace;
  await ports.ledger.append("task.setup_started", { attempt: t.attempts, cwd }, t.id);
  const gate = await testsGate(run, ports, stop, {
    name: "setup",
    command: cmd,
    cwd,
    env: attemptEnv(agent, t.attempts),
    timeoutS: p.setup.timeoutS ?? agent.timeoutS,
    logName: `setup-${t.id}`,
    ...(agent.sandbox ? { sandbox: { setting: agent.sandbox, work: agentWork(p, agent) } } : {}),
  });
  if (gate === "detached") return "detached";
  recorder.note(t.id, { result: { gates: [gate] } });
  await ports.ledger.append(
    "task.setup",
    { attempt: t.attempts, passed: gate.passed, detail: gate.detail },
    t.id,
  );
  if (gate.passed) return null;
  // A set-up the run's stop ended (cancel, --fail-fast) did not fail on its own.
  if (stop.ending)
    return { record: null, reason: "cancelled", detail: "the run was cancelled during its setup_cmd" };
  // Like a failed tests_cmd, the detail names the logs: output_log is the agent's, and none ran.
  return {
    record: null,
    reason: "setup",
    detail: `its setup_cmd failed (${gate.detail}); no agent was started`,
  };
}

/** The set-up gate of the attempt, to stay first in its gates: none when no setup_cmd ran. */
export function setupGates(t: Readonly<TaskRun>): Gate[] {
  return t.result.gates.filter((g) => g.name === "setup");
}
