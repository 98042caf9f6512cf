import { existsSync } from "node:fs";
import type { FeedbackBlock } from "../contract/feedback-block.js";
import type { Reason } from "../contract/reason.js";
import { errorText } from "../errors.js";
import { taskBranch } from "../fs/names.js";
import { agentOutcome } from "./agent-output.js";
import { collectArtifacts } from "./artifacts.js";
import { type AttemptResult, type AttemptSide, adoptAttempt, runAttempt } from "./attempt.js";
import { amendedLast, closedHistory, countedAttempts, openRecord } from "./attempt-history.js";
import { takeDecision } from "./decision.js";
import { DETACHED, type TaskEnd, type TaskExecutor } from "./executor.js";
import { keepFailedWork, startNextFrom } from "./failed-work.js";
import { killPoint, prepareHooks } from "./faults.js";
import { type GateFindings, writeFeedback } from "./feedback-facts.js";
import { runGates } from "./gates.js";
import { type NextStep, nextAttempt } from "./next-attempt.js";
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
    reuse: resume && (t.git.startCommit !== null || !run.git),
    startedBefore: resume && t.current.dir !== null,
  });
  const opened = await openTask(run, ports, stop, recorder, p, start);
  if (opened !== "go") return opened;

  const side = { run, ports, stop, recorder };
  // The policy had chosen the next attempt when the earlier process died: it is carried out,
  // the last attempt is not judged again (its worktree may have moved since).
  let adopting = resume && t.current.dir !== null && t.next === null;
  const { worktree, keepInRepo } = p.workspace;
  if (resume && t.next) {
    if (t.current.session) await ports.runner.close([t.current.session]);
    if (worktree !== null && existsSync(worktree))
      await startNextFrom(ports, recorder, t, { worktree, keepInRepo }, t.next.from);
  }
  for (;;) {
    const found: GateFindings = {};
    const verdict = await attemptAndGate(side, t, p, adopting, found);
    adopting = false;
    if (verdict === "detached") return DETACHED;
    const { reason, detail } = verdict;
    // What its agent decided itself ($TERMORCH_DECISION): read once, kept and recorded.
    const { artifactsDir } = p.workspace;
    const { redactor, ledger } = ports;
    const decision = await takeDecision(
      { runDir: run.runDir, artifactsDir, taskId, attempt: t.attempts, redactor, ledger },
      p.workspace,
    );
    recorder.note(taskId, {
      history: closedHistory(t.history, ports.now(), { reason, detail, decision: decision.record }),
    });
    const step = nextAttempt(
      { reason, detail, decision: decision.seen },
      {
        counted: countedAttempts(t.history),
        allowed: p.attempts,
        agentIndex: t.current.agentIndex,
        agents: p.agents.length,
        retryFrom: agentOf(p, t.current.agentIndex).retryFrom,
        ending: stop.ending,
        // A worktree that is gone cannot be reset for another attempt.
        worktreeGone: worktree !== null && !existsSync(worktree),
      },
    );
    // The attempt's record says how it ended for the task: a decision can end one whose gates passed.
    const ended = attemptEnd(step, reason, detail);
    if (ended.reason !== reason) recorder.note(taskId, { history: amendedLast(t.history, ended) });
    if (step.kind === "done") {
      const artifacts = await collectArtifacts(run, ports, t, p);
      await recorder.transition(taskId, { to: "success" }, artifacts ? { result: { artifacts } } : {});
      await killPoint(run.fault, "kill-after-status", t.id, t.attempts);
      // Its work is on its branch: the worktree can serve the run's next tasks (the warm pool).
      if (ports.pool && worktree !== null && t.git.startCommit && !run.settings.keep_branches)
        ports.pool.giveLater(worktree, t.git.startCommit);
      return { kind: "done", ok: true };
    }
    if (step.kind === "failed" || step.kind === "blocked") {
      const artifacts = await collectArtifacts(run, ports, t, p);
      if (artifacts) recorder.note(taskId, { result: { artifacts } });
      const needsHuman = step.kind === "blocked" && step.needsHuman;
      return failTask(run, recorder, taskId, step.reason, step.detail, needsHuman);
    }
    // An escalation may follow an attempt that passed its gates: the agent asked all the same.
    const failed = {
      reason: ended.reason ?? "escalated",
      detail: ended.detail,
      found,
      decision: decision.feedback,
    };
    await prepareNext(side, t, p, failed, step);
  }
}

/** How an attempt ended for its task: its gates' verdict, or what its agent's decision made of it. */
function attemptEnd(
  step: NextStep,
  reason: Reason | null,
  detail: string | null,
): { reason: Reason | null; detail: string | null } {
  if (step.kind === "blocked" || step.kind === "failed") return { reason: step.reason, detail: step.detail };
  if (step.kind === "escalate" && reason === null)
    return { reason: "escalated", detail: "its agent asked for a stronger agent" };
  return { reason, detail };
}

/**
 * Carries out a retry or an escalation: the failed attempt's work kept (and its work ref), its
 * feedback section written, the choice recorded (TaskRun.next: a resume carries it out), the
 * worktree put where the next attempt starts, the failed attempt's session closed.
 */
async function prepareNext(
  side: AttemptSide,
  t: Readonly<TaskRun>,
  p: TaskPlan,
  failed: { reason: Reason; detail: string | null; found: GateFindings; decision: FeedbackBlock["decision"] },
  step: Extract<NextStep, { kind: "retry" | "escalate" }>,
): Promise<void> {
  const { run, ports, recorder } = side;
  const failed_ = agentOf(p, t.current.agentIndex);
  const failedAgent = failed_.name;
  const { worktree, keepInRepo } = p.workspace;
  const startCommit = t.git.startCommit;
  let work: { from: string; to: string } | null = null;
  if (worktree !== null && existsSync(worktree)) {
    const w = { worktree, agent: failedAgent, keepInRepo, scratch: failed_.scratch };
    const kept = await keepFailedWork(run, ports, recorder, t, w, step.from === "last_commit");
    if (kept.secrets.length) failed.found.secrets ??= kept.secrets;
    if (kept.ref) recorder.note(t.id, { history: amendedLast(t.history, { work_ref: kept.ref }) });
    if (startCommit && kept.commit) work = { from: startCommit, to: kept.commit };
  }
  const feedback = await writeFeedback(
    run,
    ports,
    p.workspace.artifactsDir,
    { t, agent: failedAgent, timeoutS: failed_.timeoutS, ...failed, work },
    { n: t.attempts + 1, from: step.from === "base" ? "base" : "last_work" },
  );
  ports.log.info(
    { task: t.id, attempt: t.attempts, reason: failed.reason, from: step.from },
    step.kind === "escalate"
      ? "its agent asked for a stronger one"
      : "task failed; retrying with its feedback",
  );
  await ports.ledger.append(
    "task.retrying",
    {
      attempt: t.attempts,
      reason: failed.reason,
      detail: failed.detail,
      agent: failedAgent,
      from: step.from,
      escalated: step.kind === "escalate",
      feedback,
    },
    t.id,
  );
  await killPoint(run.fault, "kill-after-feedback", t.id, t.attempts);
  const next = {
    agentIndex: step.agentIndex,
    from: step.from,
    escalated: step.kind === "escalate",
    feedback,
  };
  recorder.checkpoint(t.id, { detail: failed.detail, next });
  await killPoint(run.fault, "kill-after-next-chosen", t.id, t.attempts);
  if (worktree !== null && existsSync(worktree))
    await startNextFrom(ports, recorder, t, { worktree, keepInRepo }, step.from);
  await ports.runner.close([t.current.session!]);
}

/** What an attempt came to: null when it passed every gate, else why not. */
export interface Verdict {
  reason: Reason | null;
  detail: string | null;
}

/**
 * One attempt of a task, to its verdict: adopted (`adopting`: an earlier process launched it,
 * with the agent it was launched with), or counted and run by the agent the policy chose for it
 * (TaskRun.next; the first: the task's own), its set-up run and launched; then its agent's output
 * read and its gates run, what they found told to `found`. What follows is the caller's call.
 */
export async function attemptAndGate(
  side: AttemptSide,
  t: Readonly<TaskRun>,
  p: TaskPlan,
  adopting: boolean,
  found: GateFindings = {},
): Promise<Verdict | "detached"> {
  const { run, ports, stop, recorder } = side;
  // The daemon is shutting down: nothing new starts; the task stays as state.json has it.
  if (!adopting && stop.detaching) return "detached";
  // Journaled with the attempt's folder (runAttempt's checkpoint): a resume adopts it with its
  // agent. What the policy chose for it (TaskRun.next) is done with once it is counted.
  if (!adopting) {
    const next = t.next;
    const agentIndex = next?.agentIndex ?? t.current.agentIndex;
    recorder.note(t.id, {
      attempts: t.attempts + 1,
      current: { agentIndex },
      history: [
        ...t.history,
        openRecord(t.attempts + 1, agentOf(p, agentIndex).name, ports.now(), {
          from: next?.from ?? null,
          escalated: next?.escalated ?? false,
          feedback: next?.feedback ?? null,
        }),
      ],
      next: null,
    });
  }
  const agent = agentOf(p, t.current.agentIndex);
  let attempt: AttemptResult | "detached";
  if (adopting) {
    attempt = await adoptAttempt(side, t, p, agent);
  } else {
    const setup = await runSetup(run, ports, stop, recorder, t, p, agent);
    if (setup === "detached") return "detached";
    attempt = setup ?? (await runAttempt(side, t, p, agent));
  }
  if (attempt === "detached") return "detached";
  if (attempt.account) recorder.note(t.id, { result: attempt.account });
  let { reason, detail } = attempt;
  if (attempt.record && agent.output) {
    const said = agentOutcome(run.runDir, ports.redactor, t, agent, p.workspace.cwd, agent.output, attempt);
    recorder.note(t.id, { result: said.account });
    ({ reason, detail } = said.outcome);
  }
  if (reason === null) {
    const gated = await runGates({ run, ports, stop, recorder, t, p, agent }, found);
    if (gated === "detached") return "detached";
    ({ reason, detail } = gated);
  } else recorder.note(t.id, { result: { gates: [...setupGates(t), coreGate(attempt.record, reason)] } });
  recorder.note(t.id, { result: { exitCode: attempt.record?.exit_code ?? null } });
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
