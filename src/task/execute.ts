import { existsSync } from "node:fs";
import { addUsage } from "../contract/agent-result.js";
import type { FeedbackBlock } from "../contract/feedback-block.js";
import type { Reason } from "../contract/reason.js";
import { errorText } from "../errors.js";
import { taskBranch } from "../fs/names.js";
import { type AgentAccount, agentOutcome } from "./agent-output.js";
import { admitTask } from "./approval.js";
import { collectArtifacts } from "./artifacts.js";
import { type AttemptResult, type AttemptSide, adoptAttempt, runAttempt } from "./attempt.js";
import { amendedLast, closedHistory, countedAttempts, openRecord, waitedFor } from "./attempt-history.js";
import { type TakenDecision, takeDecision } from "./decision.js";
import { DETACHED, type TaskEnd, type TaskExecutor } from "./executor.js";
import { keepFailedWork, startNextFrom } from "./failed-work.js";
import { killPoint, prepareHooks } from "./faults.js";
import { type GateFindings, writeFeedback } from "./feedback-facts.js";
import { runGates } from "./gates.js";
import { type NextStep, nextAttempt } from "./next-attempt.js";
import { failTask, openTask, type StartMade, type TaskStart } from "./opening.js";
import { coreGate } from "./outcome.js";
import type { Ports } from "./ports.js";
import { limitedUntil, limitStanding, nextFallback, waitForLimit } from "./quota-wait.js";
import type { TaskRecorder } from "./recorder.js";
import { type RunPlan, trailersOf } from "./run-plan.js";
import { runSetup, setupGates } from "./setup.js";
import { outOfBudget } from "./spend.js";
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
  return {
    execute: (taskId, resume) => executeTask(run, ports, stop, recorder, taskId, resume),
    admit: (taskId) => admitTask({ run, ports, stop, recorder }, taskId),
  };
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
  // Its start was approved (approval "start"): it starts now, nothing of that wait is left.
  if (t.waiting.approval?.approved) await recorder.markWaitingApproval(taskId, null);
  const opened = await openTask(run, ports, stop, recorder, p, start);
  if (opened !== "go") return opened;

  const side = { run, ports, stop, recorder };
  const { worktree, keepInRepo } = p.workspace;
  // The policy had chosen the next attempt when the earlier process died: it is carried out,
  // the last attempt is not judged again (its worktree may have moved since).
  if (resume && t.next) {
    if (t.current.session) await ports.runner.close([t.current.session]);
    if (worktree !== null && existsSync(worktree))
      await startNextFrom(ports, recorder, t, { worktree, keepInRepo }, t.next.from);
    // A wait for a rate limit is kept across the interruption: its end is where it was.
    await waitForLimit(side, t, t.next.notBefore);
  }
  let adopting = resume && t.current.dir !== null && t.next === null;
  for (;;) {
    const found: GateFindings = {};
    const verdict = await attemptAndGate(side, t, p, adopting, found);
    adopting = false;
    if (verdict === "detached") return DETACHED;
    const { step, decision, worktreeHere } = await judgeAttempt(side, t, p, verdict);
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
    await prepareNextAttempt(side, t, p, step, {
      found,
      decision: decision.feedback,
      worktree: worktreeHere,
    });
    // Stopped while it waited for a rate limit (or wrote its feedback): no attempt starts to be ended.
    if (stop.ending)
      return failTask(run, recorder, taskId, "cancelled", "the run stopped before its next attempt");
    // Stopped at the boundary during its wait for a limit: the rest of the wait is its resume's.
    if (stop.atBoundary && (t.next?.notBefore ?? 0) > ports.now()) return DETACHED;
  }
}

/**
 * What follows an attempt, as the policy (nextAttempt) decides it from the attempt's verdict and
 * its agent's own decision ($TERMORCH_DECISION: read once, kept, and recorded in the attempt's
 * record, which then says how the attempt ended for the task). The worktree is looked at once
 * here: `worktreeHere` is it when it is there, else null.
 */
async function judgeAttempt(
  side: AttemptSide,
  t: Readonly<TaskRun>,
  p: TaskPlan,
  verdict: Verdict,
): Promise<{ step: NextStep; decision: TakenDecision; worktreeHere: string | null }> {
  const { run, ports, stop, recorder } = side;
  const { worktree, artifactsDir } = p.workspace;
  const decision = await takeDecision(
    {
      runDir: run.runDir,
      artifactsDir,
      taskId: t.id,
      attempt: t.attempts,
      redactor: ports.redactor,
      ledger: ports.ledger,
    },
    p.workspace,
  );
  const { resetsAt, ...end } = verdict;
  recorder.note(t.id, {
    history: amendedLast(closedHistory(t.history, ports.now(), { ...end, decision: decision.record }), {
      resets_at: resetsAt ? new Date(resetsAt).toISOString() : null,
    }),
  });
  const worktreeHere = worktree !== null && existsSync(worktree) ? worktree : null;
  const step = nextAttempt(
    { ...verdict, decision: decision.seen },
    {
      counted: countedAttempts(t.history),
      allowed: p.attempts,
      agentIndex: t.current.agentIndex,
      agents: p.agents.length,
      retryFrom: agentOf(p, t.current.agentIndex).retryFrom,
      ending: stop.ending,
      // A worktree that is gone cannot be reset for another attempt.
      worktreeGone: worktree !== null && worktreeHere === null,
      budgetSpent: outOfBudget(run, recorder, p),
      rateLimit: limitStanding(p.rateLimit, t.history, ports.now(), nextFallback(p, t.current.agentIndex)),
    },
  );
  // A decision can end an attempt whose gates passed, or block one that failed them.
  if (step.kind !== "done" && step.reason !== verdict.reason)
    recorder.note(t.id, { history: amendedLast(t.history, { reason: step.reason, detail: step.detail }) });
  return { step, decision, worktreeHere };
}

/**
 * Carries out a retry or an escalation: the failed attempt's work kept (and its work ref), its
 * feedback section written, the choice recorded (TaskRun.next: a resume carries it out), the
 * worktree (`worktree`: there, else null) put where the next attempt starts, the failed
 * attempt's session closed.
 */
async function prepareNextAttempt(
  side: Pick<AttemptSide, "run" | "ports" | "stop" | "recorder">,
  t: Readonly<TaskRun>,
  p: TaskPlan,
  step: Extract<NextStep, { kind: "retry" | "escalate" | "wait" | "fallback" }>,
  seen: { found: GateFindings; decision: FeedbackBlock["decision"]; worktree: string | null },
): Promise<void> {
  const { run, ports, recorder } = side;
  const { worktree, found } = seen;
  const { keepInRepo } = p.workspace;
  const agent = agentOf(p, t.current.agentIndex);
  let work: { from: string; to: string } | null = null;
  if (worktree !== null) {
    const w = { worktree, agent: agent.name, keepInRepo, scratch: agent.scratch };
    const kept = await keepFailedWork(run, ports, recorder, t, w, step.from === "last_commit");
    if (kept.secrets.length) found.secrets ??= kept.secrets;
    if (kept.ref) recorder.note(t.id, { history: amendedLast(t.history, { work_ref: kept.ref }) });
    if (t.git.startCommit && kept.commit) work = { from: t.git.startCommit, to: kept.commit };
  }
  const { reason, detail } = step;
  const feedback = await writeFeedback(
    run,
    ports,
    p.workspace.artifactsDir,
    { t, agent: agent.name, timeoutS: agent.timeoutS, reason, detail, found, decision: seen.decision, work },
    { n: t.attempts + 1, from: step.from === "base" ? "base" : "last_work" },
  );
  const escalated = step.kind === "escalate";
  const notBefore = step.kind === "wait" ? step.until : null;
  const fallbackFor = step.kind === "fallback" ? agent.name : null;
  ports.log.info(
    { task: t.id, attempt: t.attempts, reason, from: step.from },
    escalated
      ? "its agent asked for a stronger one"
      : notBefore !== null
        ? "its CLI met a rate limit; waiting for it to lift"
        : fallbackFor !== null
          ? "its CLI met a rate limit; a fallback agent runs the next attempt"
          : "task failed; retrying with its feedback",
  );
  await ports.ledger.append(
    "task.retrying",
    {
      attempt: t.attempts,
      reason,
      detail,
      agent: agent.name,
      from: step.from,
      escalated,
      feedback,
      ...(notBefore !== null ? { not_before: new Date(notBefore).toISOString() } : {}),
      ...(fallbackFor !== null ? { fallback_to: agentOf(p, step.agentIndex).name } : {}),
    },
    t.id,
  );
  await killPoint(run.fault, "kill-after-feedback", t.id, t.attempts);
  recorder.checkpoint(t.id, {
    detail,
    next: { agentIndex: step.agentIndex, from: step.from, escalated, feedback, notBefore, fallbackFor },
  });
  await killPoint(run.fault, "kill-after-next-chosen", t.id, t.attempts);
  if (worktree !== null) await startNextFrom(ports, recorder, t, { worktree, keepInRepo }, step.from);
  await ports.runner.close([t.current.session!]);
  await waitForLimit(side, t, notBefore);
}

/** What an attempt came to: null when it passed every gate, else why not. */
export interface Verdict {
  reason: Reason | null;
  detail: string | null;
  /** Reason rate_limited: when the limit lifts (epoch ms), as its CLI said; null or absent: not said. */
  resetsAt?: number | null;
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
  if (!adopting) {
    // Another task's attempt met a limit of the agent this one runs that has not lifted: it
    // waits for it too, or starts on its first fallback (the switch holds until the limit lifts),
    // rather than meet the limit again.
    const index = t.next?.agentIndex ?? t.current.agentIndex;
    const next = agentOf(p, index);
    const { on, backoff_s } = p.rateLimit;
    const limited =
      on === "fail"
        ? null
        : limitedUntil(recorder.all(), next.name, t.id, { now: ports.now(), backoffMs: backoff_s * 1000 });
    const fallback =
      limited !== null && on === "fallback" && index < p.agents.length ? nextFallback(p, index) : null;
    // Within what its max_wait_s leaves: past it, it starts and meets the limit itself.
    const room = p.rateLimit.max_wait_s * 1000 - waitedFor(t.history);
    const wait = limited !== null && fallback === null && limited - ports.now() <= room ? limited : null;
    if (wait !== null) await waitForLimit(side, t, wait);
    // The daemon is shutting down, or the run stops at its boundary during a wait for a limit:
    // nothing new starts; the task stays as state.json has it, for its resume.
    if (stop.detaching || (wait !== null && stop.atBoundary)) return "detached";
    countAttempt(recorder, t, p, ports.now(), {
      ...(fallback === null ? {} : { fallback: { agentIndex: fallback, fallbackFor: next.name } }),
      ...(wait === null ? {} : { waitedUntil: wait }),
    });
  }
  const agent = agentOf(p, t.current.agentIndex);
  let attempt: AttemptResult | "detached";
  if (adopting) attempt = await adoptAttempt(side, t, p, agent);
  else {
    const setup = await runSetup(run, ports, stop, recorder, t, p, agent);
    if (setup === "detached") return "detached";
    attempt = setup ?? (await runAttempt(side, t, p, agent));
  }
  if (attempt === "detached") return "detached";
  if (attempt.account) noteAccount(recorder, t, attempt.account);
  let { reason, detail } = attempt;
  let resetsAt = attempt.resetsAt ?? null;
  if (attempt.record && agent.output) {
    const said = agentOutcome(
      run.runDir,
      ports.redactor,
      t,
      agent,
      p.workspace.cwd,
      agent.output,
      attempt,
      ports.now(),
    );
    noteAccount(recorder, t, said.account);
    ({ reason, detail } = said.outcome);
    if (said.outcome.resetsAt) resetsAt = said.outcome.resetsAt;
  }
  // Streamed while it ran, and no account said more at its end.
  if (t.current.usage !== null) noteAccount(recorder, t, { agentResult: t.result.agentResult, usage: null });
  if (reason === null) {
    const gated = await runGates({ run, ports, stop, recorder, t, p, agent }, found);
    if (gated === "detached") return "detached";
    ({ reason, detail } = gated);
  } else recorder.note(t.id, { result: { gates: [...setupGates(t), coreGate(attempt.record, reason)] } });
  recorder.note(t.id, { result: { exitCode: attempt.record?.exit_code ?? null } });
  return reason === "rate_limited" ? { reason, detail, resetsAt } : { reason, detail };
}

/**
 * An attempt's account: its usage (else what it streamed while it ran) on its record, and added
 * to the task's in place of what it streamed.
 */
function noteAccount(recorder: TaskRecorder, t: Readonly<TaskRun>, account: AgentAccount): void {
  // An adopted attempt whose account the journal has already (its record's usage, noted with the
  // task's in one change): read again, not counted again.
  const noted = t.history.at(-1)?.usage ?? null;
  const usage = noted ?? account.usage ?? t.current.usage;
  recorder.spent(t.id, {
    result: {
      agentResult: account.agentResult,
      usage: noted === null ? addUsage([t.result.usage, usage]) : t.result.usage,
    },
    current: { usage: null },
    history: amendedLast(t.history, { usage }),
  });
}

/**
 * Counts a new attempt, run by the agent the policy chose for it (TaskRun.next; the first: the
 * task's own), and opens its record. Journaled with the attempt's folder (runAttempt's
 * checkpoint): a resume adopts it with its agent. The policy's choice is done with once counted.
 */
function countAttempt(
  recorder: TaskRecorder,
  t: Readonly<TaskRun>,
  p: TaskPlan,
  now: number,
  /**
   * Another task's limit of its agent decided how it starts: on a fallback agent, or after
   * waiting for the limit to lift (until then).
   */
  shared: { fallback?: { agentIndex: number; fallbackFor: string }; waitedUntil?: number } = {},
): void {
  const next = t.next;
  const { fallback } = shared;
  const agentIndex = fallback?.agentIndex ?? next?.agentIndex ?? t.current.agentIndex;
  recorder.note(t.id, {
    attempts: t.attempts + 1,
    current: { agentIndex },
    history: [
      ...t.history,
      openRecord(t.attempts + 1, agentOf(p, agentIndex).name, now, {
        from: next?.from ?? null,
        escalated: next?.escalated ?? false,
        feedback: next?.feedback ?? null,
        waitedUntil: shared.waitedUntil ?? next?.notBefore ?? null,
        fallbackFor: fallback?.fallbackFor ?? next?.fallbackFor ?? null,
      }),
    ],
    next: null,
  });
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
