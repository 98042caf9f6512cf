import type { Reason } from "../contract/reason.js";

/** Where a retry's working tree starts (`retry_from`). */
export type RetryFrom = "base" | "last_work";

/**
 * Failures whose worktree holds no work to go on from: torn mid-write (ended by a timeout or a
 * signal, lost) or no agent ran (its launch or its setup failed, and a setup's leftovers must
 * go). Their retry starts from the last committed state instead.
 */
const NO_WORK_TO_KEEP: ReadonlySet<Reason> = new Set(["timeout", "signal", "lost", "launch_error", "setup"]);

/** What the agent decided itself ($TERMORCH_DECISION), as the policy reads it. */
export type DecisionSeen =
  | { kind: "none" }
  | {
      kind: "valid";
      status: "completed" | "escalate_to_max" | "blocked";
      reason: string;
      /** routing.recommended_next_actor is "human". */
      human: boolean;
    }
  | { kind: "invalid"; problems: readonly string[] };

/** How an attempt ended, after its gates. */
export interface AttemptEnded {
  /** null: it passed every gate. */
  reason: Reason | null;
  detail: string | null;
  decision: DecisionSeen;
  /** Reason rate_limited: when the limit lifts (epoch ms), as its CLI said; null or absent: not said. */
  resetsAt?: number | null;
}

/** What a rate limit does to the task (its `rate_limit`), and its waits so far. */
export interface LimitStanding {
  on: "wait" | "fallback" | "fail";
  /** The agentIndex of the next fallback agent (after the one that ran, in its list); null: none left. */
  fallback: number | null;
  maxWaitMs: number;
  backoffMs: number;
  /** The waits it made so far, and how long they took together. */
  waits: number;
  waitedMs: number;
  now: number;
}

/** Where the task stands once that attempt ended. */
export interface TaskStanding {
  /** Attempts that count against `retries` (an escalation asked for by the agent does not), this one included. */
  counted: number;
  /** retries + 1. */
  allowed: number;
  /** The agent this attempt ran, in the task's list `[agent, ...escalation]`, and the list's length. */
  agentIndex: number;
  agents: number;
  retryFrom: RetryFrom;
  /** The run is ending (cancelled, --fail-fast, a stop): nothing new starts. */
  ending: boolean;
  /** Its worktree is gone: it cannot be reset for another attempt. */
  worktreeGone: boolean;
  /** Why a budget (the task's or the run's) allows no new attempt; null: it allows one. */
  budgetSpent: string | null;
  rateLimit: LimitStanding;
}

/**
 * Where the next attempt starts: the task's start, the failed attempt's work as it left it, or
 * the last committed state (a torn attempt's work is not trusted, the last commit of it is).
 */
export type StartFrom = RetryFrom | "last_commit";

/**
 * How the attempt ended for its task when another one follows: the failure the next attempt's
 * feedback section tells, or `escalated` when it passed its gates and its agent asked for a
 * stronger one all the same.
 */
export interface EndedAs {
  reason: Reason;
  detail: string | null;
}

/** What follows an attempt (docs/ARCHITECTURE.md, "What a run does with a failure"). */
export type NextStep =
  | { kind: "done" }
  | ({ kind: "retry"; agentIndex: number; from: StartFrom } & EndedAs)
  /** The agent asked for a stronger one: the next attempt runs it, and is not counted against retries. */
  | ({ kind: "escalate"; agentIndex: number; from: StartFrom } & EndedAs)
  /** Its CLI met a rate limit: the next attempt starts once it lifts (`until`), not counted against retries. */
  | ({ kind: "wait"; until: number; agentIndex: number; from: StartFrom } & EndedAs)
  /** Its CLI met a rate limit: a fallback agent runs the next attempt at once, not counted against retries. */
  | ({ kind: "fallback"; agentIndex: number; from: StartFrom } & EndedAs)
  | { kind: "blocked"; reason: "blocked" | "invalid_decision"; detail: string; needsHuman: boolean }
  | { kind: "failed"; reason: Reason; detail: string | null };

/**
 * The one place that decides what follows an attempt: done, another attempt (which agent, from
 * where), or the task's end and why. Pure: the attempt loop (execute.ts) only carries it out.
 * The order matters: the run's own stop first, then the agent's decision, then the gates.
 */
export function nextAttempt(ended: AttemptEnded, s: TaskStanding): NextStep {
  const { reason, detail, decision } = ended;
  if (reason === "cancelled") return { kind: "failed", reason, detail };
  if (decision.kind === "invalid")
    return {
      kind: "blocked",
      reason: "invalid_decision",
      detail: `its decision ($TERMORCH_DECISION) is invalid, so the task is blocked: ${decision.problems.join("; ")}`,
      needsHuman: false,
    };
  if (decision.kind === "valid" && decision.status === "blocked")
    return {
      kind: "blocked",
      reason: "blocked",
      detail: `its agent says it is blocked: ${decision.reason}`,
      needsHuman: decision.human,
    };
  const from: StartFrom =
    s.retryFrom === "last_work" && reason !== null && NO_WORK_TO_KEEP.has(reason)
      ? "last_commit"
      : s.retryFrom;
  if (decision.kind === "valid" && decision.status === "escalate_to_max") {
    const next = s.agentIndex + 1;
    if (next >= s.agents)
      return {
        kind: "failed",
        reason: "escalated",
        detail: `its agent asked for a stronger agent (${decision.reason}), and its escalation list has none left`,
      };
    if (s.ending || s.worktreeGone)
      return {
        kind: "failed",
        reason: "escalated",
        detail: `its agent asked for a stronger agent (${decision.reason}); the run ended before one ran`,
      };
    if (s.budgetSpent !== null)
      return {
        kind: "failed",
        reason: "budget",
        detail: `${s.budgetSpent}; its agent asked for a stronger agent (${decision.reason})`,
      };
    const endedAs: EndedAs =
      reason === null
        ? { reason: "escalated", detail: "its agent asked for a stronger agent" }
        : { reason, detail };
    return { kind: "escalate", agentIndex: next, from, ...endedAs };
  }
  if (reason === null) return { kind: "done" };
  // Ended at a budget (by termorch, or by its CLI at the cap it was given): nothing is left to pay
  // for another try, and the task's end names the budget and the spend.
  if (reason === "budget")
    return {
      kind: "failed",
      reason,
      detail: s.budgetSpent === null ? detail : `${s.budgetSpent}; ${detail ?? "its attempt ended at it"}`,
    };
  if (s.ending || s.worktreeGone) return { kind: "failed", reason, detail };
  // Not a try of the task: whether it goes on is the limit's call, not `retries`'.
  if (reason === "rate_limited") return afterLimit(ended, s, from);
  if (s.counted >= s.allowed) return { kind: "failed", reason, detail };
  // Another try could fix it, but nothing is left to pay for one.
  if (s.budgetSpent !== null)
    return {
      kind: "failed",
      reason: "budget",
      detail: `${s.budgetSpent}; its attempt failed: ${reason}${detail ? ` (${detail})` : ""}`,
    };
  // A fallback agent (past the escalation list) keeps the task until its attempts are used up.
  const agentIndex = s.agentIndex >= s.agents ? s.agentIndex : Math.min(s.agentIndex + 1, s.agents - 1);
  return { kind: "retry", agentIndex, from, reason, detail };
}

/**
 * After a rate limit or a usage cap its CLI gave up on: hand the attempt to the next fallback
 * agent, or wait until the limit lifts (when the CLI said, else a backoff that doubles with each
 * wait) and run it again, within the task's `max_wait_s` over all its waits; or fail, as its
 * `rate_limit.on` says. A spent budget still ends it first.
 */
function afterLimit(ended: AttemptEnded, s: TaskStanding, from: StartFrom): NextStep {
  const { detail } = ended;
  const r = s.rateLimit;
  const failed = (why: string): NextStep => ({
    kind: "failed",
    reason: "rate_limited",
    detail: `${detail ?? "its CLI met a rate limit"}${why}`,
  });
  if (r.on === "fail") return failed("");
  if (s.budgetSpent !== null)
    return { kind: "failed", reason: "budget", detail: `${s.budgetSpent}; its attempt met a rate limit` };
  // The next agent of the fallback list; once it is used up, the limit is waited for.
  if (r.on === "fallback" && r.fallback !== null)
    return { kind: "fallback", agentIndex: r.fallback, from, reason: "rate_limited", detail };
  const until = Math.max(r.now, ended.resetsAt ?? r.now + r.backoffMs * 2 ** r.waits);
  if (r.waitedMs + (until - r.now) > r.maxWaitMs)
    return failed(
      `; waiting until it lifts would take it past its rate_limit.max_wait_s (${Math.round(r.maxWaitMs / 1000)} s, ${Math.round(r.waitedMs / 1000)} s waited)`,
    );
  return { kind: "wait", until, agentIndex: s.agentIndex, from, reason: "rate_limited", detail };
}
