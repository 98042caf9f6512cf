import { existsSync } from "node:fs";
import type { Reason } from "../contract/reason.js";
import { errorText } from "../errors.js";
import { taskBranch } from "../fs/names.js";
import { agentOutcome } from "./agent-output.js";
import { collectArtifacts } from "./artifacts.js";
import { type AttemptResult, type AttemptSide, adoptAttempt, runAttempt } from "./attempt.js";
import { DETACHED, type TaskEnd, type TaskExecutor } from "./executor.js";
import { killPoint, prepareHooks } from "./faults.js";
import { runGates } from "./gates.js";
import { failTask, openTask, type StartMade, type TaskStart } from "./opening.js";
import { coreGate } from "./outcome.js";
import type { Ports } from "./ports.js";
import type { TaskRecorder } from "./recorder.js";
import { type RunPlan, trailersOf } from "./run-plan.js";
import { runSetup, setupGates } from "./setup.js";
import type { RunStop } from "./stop.js";
import { agentOf, type TaskPlan } from "./task-plan.js";
import type { TaskRun } from "./task-run.js";

/** The local executor: every attempt in this host's task runner (tmux), in a worktree prepared here. */
export function localExecutor(
  run: RunPlan,
  ports: Ports,
  stop: RunStop,
  recorder: TaskRecorder,
): TaskExecutor {
  return { execute: (taskId, resume) => executeTask(run, ports, stop, recorder, taskId, resume) };
}

/**
 * Runs one task to its end: worktree, every attempt in a fresh session, gates, artifacts.
 * `resume`: the task was started by an earlier process (state.json says so); its worktree is
 * reused and its live or finished attempt is adopted, never launched a second time.
 */
export async function executeTask(
  run: RunPlan,
  ports: Ports,
  stop: RunStop,
  recorder: TaskRecorder,
  taskId: string,
  resume = false,
): Promise<TaskEnd> {
  const t = recorder.get(taskId);
  const p = run.plans.get(taskId)!;
  const start = worktreeStart(run, ports, p, {
    // An earlier process made its start (or there is none to make): its worktree is taken as it is.
    reuse: resume && (t.startCommit !== null || !run.git),
    startedBefore: resume && t.attemptDir !== null,
  });
  const opened = await openTask(run, ports, stop, recorder, p, start);
  if (opened !== "go") return opened;

  const side = { run, ports, stop, recorder };
  let adopting = resume && t.attemptDir !== null;
  let agentIndex = t.agentIndex;
  for (;;) {
    const verdict = await attemptAndGate(side, t, p, adopting, agentIndex);
    adopting = false;
    if (verdict === "detached") return DETACHED;
    const { reason, detail } = verdict;
    if (reason === null) {
      const artifacts = await collectArtifacts(run, ports, t, p);
      await recorder.transition(taskId, { to: "success" }, artifacts ? { artifacts } : {});
      await killPoint(run.fault, "kill-after-status", t.id, t.attempts);
      // Its work is on its branch: the worktree can serve the run's next tasks (the warm pool).
      const { worktree } = p.workspace;
      if (ports.pool && worktree !== null && t.startCommit && !run.settings.keep_branches)
        ports.pool.giveLater(worktree, t.startCommit);
      return { kind: "done", ok: true };
    }
    // A worktree that is gone cannot be reset for another attempt.
    const gone = p.workspace.worktree !== null && !existsSync(p.workspace.worktree);
    if (reason === "cancelled" || stop.ending || t.attempts >= p.attempts || gone) {
      const artifacts = await collectArtifacts(run, ports, t, p);
      if (artifacts) recorder.note(taskId, { artifacts });
      return failTask(run, recorder, taskId, reason, detail);
    }
    // The next attempt's agent: the next of its escalation list; the last one runs every further attempt.
    agentIndex = Math.min(t.agentIndex + 1, p.agents.length - 1);
    recorder.note(taskId, { detail });
    ports.log.info({ task: taskId, attempt: t.attempts, reason }, "task failed; retrying in a fresh session");
    await ports.ledger.append("task.retrying", { attempt: t.attempts, reason, detail }, taskId);
    await ports.runner.close([t.session!]);
  }
}

/** What an attempt came to: null when it passed every gate, else why not. */
export interface Verdict {
  reason: Reason | null;
  detail: string | null;
}

/**
 * One attempt of a task, to its verdict: adopted (`adopting`: an earlier process launched it,
 * with the agent it was launched with), or counted, run by its `agentIndex`th agent, its worktree
 * reset to the task's start when it is not the first, its set-up run and launched; then its
 * agent's output read and its gates run. Retrying is the caller's call.
 */
export async function attemptAndGate(
  side: AttemptSide,
  t: Readonly<TaskRun>,
  p: TaskPlan,
  adopting: boolean,
  agentIndex = t.agentIndex,
): Promise<Verdict | "detached"> {
  const { run, ports, stop, recorder } = side;
  // The daemon is shutting down: nothing new starts; the task stays as state.json has it.
  if (!adopting && stop.detaching) return "detached";
  // Journaled with the attempt's folder (runAttempt's checkpoint): a resume adopts it with its agent.
  if (!adopting) recorder.note(t.id, { attempts: t.attempts + 1, agentIndex });
  const agent = agentOf(p, t.agentIndex);
  let attempt: AttemptResult | "detached";
  if (adopting) {
    attempt = await adoptAttempt(side, t, p, agent);
  } else {
    const { worktree, keepInRepo } = p.workspace;
    if (t.attempts > 1 && run.git && worktree !== null && t.startCommit) {
      // A retry starts from the same base: drop what the failed attempt left in the worktree.
      await ports.workspace.reset(worktree, t.startCommit, keepInRepo);
      recorder.note(t.id, { commit: null });
    }
    const setup = await runSetup(run, ports, stop, recorder, t, p, agent);
    if (setup === "detached") return "detached";
    attempt = setup ?? (await runAttempt(side, t, p, agent));
  }
  if (attempt === "detached") return "detached";
  if (attempt.account) recorder.note(t.id, attempt.account);
  let { reason, detail } = attempt;
  if (attempt.record && agent.output) {
    const said = agentOutcome(run.runDir, ports.redactor, t, agent, p.workspace.cwd, agent.output, attempt);
    recorder.note(t.id, said.account);
    ({ reason, detail } = said.outcome);
  }
  if (reason === null) {
    const gated = await runGates({ run, ports, stop, recorder, t, p, agent });
    if (gated === "detached") return "detached";
    ({ reason, detail } = gated);
  } else recorder.note(t.id, { gates: [...setupGates(t), coreGate(attempt.record, reason)] });
  recorder.note(t.id, { exitCode: attempt.record?.exit_code ?? null });
  return { reason, detail };
}

/** The local start: the task's branch and worktree, from the base commit merged with its dependencies' branches. */
function worktreeStart(
  run: RunPlan,
  ports: Ports,
  p: TaskPlan,
  { reuse, startedBefore }: { reuse: boolean; startedBefore: boolean },
): TaskStart {
  const git = run.git;
  return {
    needed: git !== null && p.workspace.worktree !== null && p.workspace.branch !== null && !reuse,
    startedBefore,
    lost:
      reuse && p.workspace.worktree !== null && !existsSync(p.workspace.worktree)
        ? `its worktree ${p.workspace.worktree} vanished while termorch was not running`
        : null,
    make: async (): Promise<StartMade> => {
      const prepared = await ports.workspace
        .prepare({
          repo: git!.root,
          path: p.workspace.worktree!,
          branch: p.workspace.branch!,
          base: git!.baseCommit,
          start: p.workspace.startCommit ?? undefined,
          deps: p.dependencies.map((d) => ({ task: d, branch: taskBranch(run.runId, d) })),
          include: [...p.workspace.includeInRepo],
          copy: [...p.workspace.copyInRepo],
          identity: run.identity,
          trailers: trailersOf(run.runId, p.id),
          // An earlier process of this run may have died while preparing this task, before it
          // recorded the start commit (so nothing was launched): its branch and worktree are taken
          // over when they provably hold nothing else.
          reclaim: run.resumed,
          pool: ports.pool ?? undefined,
          hooks: prepareHooks(run.fault, p.id),
        })
        .catch((error: unknown) => ({ ok: false as const, error }));
      if (prepared.ok)
        return {
          ok: true,
          startCommit: prepared.startCommit,
          branch: p.workspace.branch!,
          event: {
            type: "task.worktree",
            data: {
              branch: p.workspace.branch!,
              start_commit: prepared.startCommit,
              path: p.workspace.worktree!,
              reused: prepared.reused,
            },
          },
        };
      if ("conflict" in prepared)
        return { ok: false, conflict: prepared.conflict, branch: p.workspace.branch };
      return {
        ok: false,
        branch: null,
        detail: `could not prepare its worktree: ${ports.redactor.redact(errorText(prepared.error))}`,
      };
    },
  };
}
