// The one policy that decides what follows an attempt (src/task/next-attempt.ts), over every
// combination that matters of reason, settings, decision and attempts left. Pure: milliseconds.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { Reason } from "../../src/contract/reason.js";
import {
  type AttemptEnded,
  type DecisionSeen,
  type NextStep,
  nextAttempt,
  type TaskStanding,
} from "../../src/task/next-attempt.js";

const standing = (over: Partial<TaskStanding> = {}): TaskStanding => ({
  counted: 1,
  allowed: 3,
  agentIndex: 0,
  agents: 1,
  retryFrom: "last_work",
  ending: false,
  worktreeGone: false,
  budgetSpent: null,
  rateLimit: {
    on: "wait",
    fallback: null,
    maxWaitMs: 3_600_000,
    backoffMs: 60_000,
    waits: 0,
    waitedMs: 0,
    now: 0,
  },
  ...over,
});
const none: DecisionSeen = { kind: "none" };
const said = (status: "completed" | "escalate_to_max" | "blocked", human = false): DecisionSeen => ({
  kind: "valid",
  status,
  reason: "because",
  human,
});
const ended = (reason: Reason | null, decision: DecisionSeen = none): AttemptEnded => ({
  reason,
  detail: reason ? `it ended: ${reason}` : null,
  decision,
});

describe("the next-attempt policy", () => {
  it("a spent budget ends a task that would try again, with reason budget, naming the budget and the failure", () => {
    const spent = "the run's budget of $2.00 is spent: $2.13";
    expect(nextAttempt(ended("validation"), standing({ budgetSpent: spent }))).toEqual({
      kind: "failed",
      reason: "budget",
      detail: `${spent}; its attempt failed: validation (it ended: validation)`,
    });
    expect(
      nextAttempt(ended(null, said("escalate_to_max")), standing({ agents: 2, budgetSpent: spent })),
    ).toEqual({
      kind: "failed",
      reason: "budget",
      detail: `${spent}; its agent asked for a stronger agent (because)`,
    });
  });

  it("a spent budget does not undo work that passed, nor outrank the agent's own block or a task out of attempts", () => {
    const s = standing({ budgetSpent: "the task's budget of 1,000 tokens is spent: 1,200" });
    expect(nextAttempt(ended(null), s)).toEqual({ kind: "done" });
    expect(nextAttempt(ended("exit_code", said("blocked")), s)).toMatchObject({
      kind: "blocked",
      reason: "blocked",
    });
    expect(nextAttempt(ended("exit_code"), { ...s, counted: 3 })).toMatchObject({
      kind: "failed",
      reason: "exit_code",
    });
    expect(nextAttempt(ended("cancelled"), s)).toMatchObject({ kind: "failed", reason: "cancelled" });
  });

  it("passing gates with no decision, or `completed`, is done", () => {
    expect(nextAttempt(ended(null), standing())).toEqual({ kind: "done" });
    expect(nextAttempt(ended(null, said("completed")), standing())).toEqual({ kind: "done" });
  });

  it("`completed` does not override the gates: a failed gate is retried", () => {
    expect(nextAttempt(ended("validation", said("completed")), standing())).toEqual({
      kind: "retry",
      agentIndex: 0,
      from: "last_work",
      reason: "validation",
      detail: "it ended: validation",
    });
  });

  it.each([
    ["exit_code", "last_work", "last_work"],
    ["validation", "last_work", "last_work"],
    ["no_changes", "last_work", "last_work"],
    ["agent_error", "last_work", "last_work"],
    ["prompt_not_delivered", "last_work", "last_work"],
    ["timeout", "last_work", "last_commit"],
    ["signal", "last_work", "last_commit"],
    ["lost", "last_work", "last_commit"],
    ["launch_error", "last_work", "last_commit"],
    ["setup", "last_work", "last_commit"],
    ["exit_code", "base", "base"],
    ["timeout", "base", "base"],
  ] as const)("%s with retry_from %s retries from %s", (reason, retryFrom, from) => {
    expect(nextAttempt(ended(reason), standing({ retryFrom }))).toEqual({
      kind: "retry",
      agentIndex: 0,
      from,
      reason,
      detail: `it ended: ${reason}`,
    });
  });

  it("attempts used up: the task fails with the attempt's own reason and detail", () => {
    expect(nextAttempt(ended("exit_code"), standing({ counted: 3, allowed: 3 }))).toEqual({
      kind: "failed",
      reason: "exit_code",
      detail: "it ended: exit_code",
    });
  });

  it("a cancelled attempt, a run that is ending or a worktree that is gone: no other attempt", () => {
    expect(nextAttempt(ended("cancelled"), standing()).kind).toBe("failed");
    expect(nextAttempt(ended("exit_code"), standing({ ending: true })).kind).toBe("failed");
    expect(nextAttempt(ended("exit_code"), standing({ worktreeGone: true })).kind).toBe("failed");
    expect(
      nextAttempt(ended(null, said("escalate_to_max")), standing({ agents: 2, ending: true })),
    ).toMatchObject({
      kind: "failed",
      reason: "escalated",
    });
  });

  it("each retry runs the next agent of the escalation list; the last one is kept", () => {
    const s = standing({ agents: 3, allowed: 5 });
    expect(nextAttempt(ended("exit_code"), { ...s, agentIndex: 0 })).toMatchObject({
      kind: "retry",
      agentIndex: 1,
    });
    expect(nextAttempt(ended("exit_code"), { ...s, agentIndex: 1 })).toMatchObject({
      kind: "retry",
      agentIndex: 2,
    });
    expect(nextAttempt(ended("exit_code"), { ...s, agentIndex: 2 })).toMatchObject({
      kind: "retry",
      agentIndex: 2,
    });
  });

  it("escalate_to_max runs the next agent even with no retries left; with none left the task fails `escalated`", () => {
    expect(
      nextAttempt(ended(null, said("escalate_to_max")), standing({ agents: 2, counted: 1, allowed: 1 })),
    ).toEqual({
      kind: "escalate",
      agentIndex: 1,
      from: "last_work",
      // It passed its gates: the next attempt is told its agent asked for a stronger one.
      reason: "escalated",
      detail: "its agent asked for a stronger agent",
    });
    // It failed them: the next attempt is told how.
    expect(
      nextAttempt(
        ended("validation", said("escalate_to_max")),
        standing({ agents: 2, counted: 1, allowed: 1 }),
      ),
    ).toEqual({
      kind: "escalate",
      agentIndex: 1,
      from: "last_work",
      reason: "validation",
      detail: "it ended: validation",
    });
    expect(
      nextAttempt(ended("exit_code", said("escalate_to_max")), standing({ agents: 2, agentIndex: 1 })),
    ).toMatchObject({
      kind: "failed",
      reason: "escalated",
    });
  });

  it("blocked ends the task whatever its gates said, and says when a person is needed", () => {
    expect(nextAttempt(ended(null, said("blocked")), standing())).toMatchObject({
      kind: "blocked",
      reason: "blocked",
      needsHuman: false,
    });
    expect(nextAttempt(ended("exit_code", said("blocked", true)), standing())).toMatchObject({
      kind: "blocked",
      reason: "blocked",
      needsHuman: true,
    });
  });

  it("an invalid decision is treated as blocked (invalid_decision), its problems named", () => {
    const step = nextAttempt(
      ended(null, { kind: "invalid", problems: ["decision.confidence: too big"] }),
      standing(),
    );
    expect(step).toMatchObject({ kind: "blocked", reason: "invalid_decision", needsHuman: false });
    expect((step as { detail: string }).detail).toContain("decision.confidence: too big");
  });

  const reasons = fc.constantFrom(null, ...Reason.options);
  const decisions: fc.Arbitrary<DecisionSeen> = fc.oneof(
    fc.constant(none),
    fc.record({
      kind: fc.constant("valid" as const),
      status: fc.constantFrom("completed" as const, "escalate_to_max" as const, "blocked" as const),
      reason: fc.string({ minLength: 1 }),
      human: fc.boolean(),
    }),
    fc.record({ kind: fc.constant("invalid" as const), problems: fc.array(fc.string(), { minLength: 1 }) }),
  );
  const standings: fc.Arbitrary<TaskStanding> = fc
    .record({
      allowed: fc.integer({ min: 1, max: 6 }),
      agents: fc.integer({ min: 1, max: 4 }),
      retryFrom: fc.constantFrom("base" as const, "last_work" as const),
      ending: fc.boolean(),
      worktreeGone: fc.boolean(),
      budgetSpent: fc.constantFrom(null, "the run's budget of $1.0000 is spent: $1.2000"),
      rateLimit: fc.record({
        on: fc.constantFrom("wait" as const, "fallback" as const, "fail" as const),
        fallback: fc.constantFrom(null, 1, 2),
        maxWaitMs: fc.integer({ min: 1, max: 10_000_000 }),
        backoffMs: fc.integer({ min: 1, max: 100_000 }),
        waits: fc.constant(0),
        waitedMs: fc.constant(0),
        now: fc.integer({ min: 0, max: 2 ** 40 }),
      }),
    })
    .chain((s) =>
      fc.record({
        counted: fc.integer({ min: 1, max: s.allowed }),
        agentIndex: fc.integer({ min: 0, max: s.agents - 1 }),
        allowed: fc.constant(s.allowed),
        agents: fc.constant(s.agents),
        retryFrom: fc.constant(s.retryFrom),
        ending: fc.constant(s.ending),
        worktreeGone: fc.constant(s.worktreeGone),
        budgetSpent: fc.constant(s.budgetSpent),
        rateLimit: fc.constant(s.rateLimit),
      }),
    );

  it("whatever comes: nothing new starts once the run ends, an agent index stays in its list, a retry has attempts left", () => {
    fc.assert(
      fc.property(reasons, decisions, standings, (reason, decision, s) => {
        const step: NextStep = nextAttempt({ reason, detail: null, decision }, s);
        if (step.kind === "retry" || step.kind === "escalate") {
          expect(s.ending || s.worktreeGone).toBe(false);
          expect(step.agentIndex).toBeGreaterThanOrEqual(0);
          expect(step.agentIndex).toBeLessThan(s.agents);
          if (step.kind === "retry") expect(s.counted).toBeLessThan(s.allowed);
          // Nothing is left to pay for another attempt: none starts.
          expect(s.budgetSpent).toBeNull();
          if (step.kind === "escalate") expect(step.agentIndex).toBe(s.agentIndex + 1);
        }
        if (step.kind === "fallback") {
          // Only a rate limit hands the attempt over, to the fallback the task has next.
          expect(reason).toBe("rate_limited");
          expect(s.ending || s.worktreeGone || s.budgetSpent !== null).toBe(false);
          expect(s.rateLimit.on).toBe("fallback");
          expect(step.agentIndex).toBe(s.rateLimit.fallback);
        }
        if (step.kind === "wait") {
          // Only a rate limit waits (a fallback list once used up), within the task's bound.
          expect(reason).toBe("rate_limited");
          expect(s.ending || s.worktreeGone || s.budgetSpent !== null).toBe(false);
          expect(s.rateLimit.on === "wait" || s.rateLimit.fallback === null).toBe(true);
          expect(s.rateLimit.on).not.toBe("fail");
          expect(step.until).toBeGreaterThanOrEqual(s.rateLimit.now);
          expect(s.rateLimit.waitedMs + step.until - s.rateLimit.now).toBeLessThanOrEqual(
            s.rateLimit.maxWaitMs,
          );
          expect(step.agentIndex).toBe(s.agentIndex);
        }
        if (step.kind === "done") expect(reason).toBeNull();
        if (decision.kind === "invalid" && reason !== "cancelled")
          expect(step).toMatchObject({ reason: "invalid_decision" });
        if (reason === "cancelled") expect(step).toMatchObject({ kind: "failed", reason: "cancelled" });
      }),
    );
  });

  it("a task always ends: attempts are bounded by retries + the escalation list", () => {
    fc.assert(
      fc.property(
        fc.array(fc.tuple(reasons, decisions), { minLength: 30, maxLength: 30 }),
        standings,
        (seq, s0) => {
          let s = { ...s0, counted: 1, agentIndex: 0, ending: false, worktreeGone: false };
          let attempts = 1;
          for (const [reason, decision] of seq) {
            const step = nextAttempt({ reason, detail: null, decision }, s);
            if (step.kind === "fallback") {
              // No try either: the list runs out (here, after one).
              s = { ...s, agentIndex: step.agentIndex, rateLimit: { ...s.rateLimit, fallback: null } };
              continue;
            }
            if (step.kind === "wait") {
              // A wait is no try; the waits' total is bounded instead.
              const r = s.rateLimit;
              s = {
                ...s,
                rateLimit: {
                  ...r,
                  waits: r.waits + 1,
                  waitedMs: r.waitedMs + step.until - r.now,
                  now: step.until,
                },
              };
              expect(s.rateLimit.waitedMs).toBeLessThanOrEqual(r.maxWaitMs);
              continue;
            }
            if (step.kind !== "retry" && step.kind !== "escalate") return;
            attempts++;
            s = { ...s, agentIndex: step.agentIndex, counted: s.counted + (step.kind === "retry" ? 1 : 0) };
            expect(attempts).toBeLessThanOrEqual(s.allowed + s.agents);
          }
        },
      ),
    );
  });
});
