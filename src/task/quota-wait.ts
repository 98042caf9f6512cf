import type { OnRateLimit } from "../contract/assignments.js";
import type { AttemptRecord } from "../contract/attempt-record.js";
import type { AttemptSide } from "./attempt.js";
import { waitedFor } from "./attempt-history.js";
import { killPoint } from "./faults.js";
import type { TaskStanding } from "./next-attempt.js";
import type { TaskPlan } from "./task-plan.js";
import type { TaskRun } from "./task-run.js";

// Waiting out the rate limits and usage caps agents' CLIs meet: a task's own (the policy's
// `wait`), and another task's of the same agent, which a task about to start waits for too.

/** Where the task stands against its `rate_limit`: its setting, and the time it lost to limits so far. */
export function limitStanding(
  setting: OnRateLimit,
  history: readonly AttemptRecord[],
  now: number,
  fallback: number | null,
): TaskStanding["rateLimit"] {
  return {
    on: setting.on,
    fallback,
    maxWaitMs: setting.max_wait_s * 1000,
    backoffMs: setting.backoff_s * 1000,
    waits: history.filter((r) => r.waited_until !== null).length,
    waitedMs: waitedFor(history),
    now,
  };
}

/**
 * Waits until a rate limit lifts (`until`: the one its last attempt met, TaskRun.next.notBefore,
 * or another task's of the same agent), shown as waiting_quota; a stop of the run ends the wait
 * early (the next attempt then sees it).
 */
export async function waitForLimit(
  side: Pick<AttemptSide, "run" | "ports" | "stop" | "recorder">,
  t: Readonly<TaskRun>,
  until: number | null,
): Promise<void> {
  const { ports, stop, recorder } = side;
  if (until === null || until <= ports.now()) {
    // A wait a killed driver left shown, whose end has passed meanwhile.
    if (t.waiting.quotaUntil !== null) await recorder.markWaitingQuota(t.id, null);
    return;
  }
  await recorder.markWaitingQuota(t.id, until);
  await killPoint(side.run.fault, "kill-while-waiting-quota", t.id);
  await new Promise<void>((resolve) => {
    let timer: NodeJS.Timeout | undefined;
    let over = false;
    let unsubscribe = (): void => {};
    const done = (): void => {
      if (over) return;
      over = true;
      clearTimeout(timer);
      unsubscribe();
      resolve();
    };
    // In steps: a timer cannot be set further than about 24.8 days ahead.
    const next = (): void => {
      const left = until - ports.now();
      if (left <= 0) done();
      else timer = setTimeout(next, Math.min(left, 2 ** 31 - 1));
    };
    // A stop already asked for ends it at once (onChange calls back at once then).
    unsubscribe = stop.onChange(done);
    if (over) unsubscribe();
    else next();
  });
  await recorder.markWaitingQuota(t.id, null);
}

/**
 * Until when `agent` is limited, as the run's tasks say: those waiting for its limit to lift
 * (each the agent of its last attempt), and the attempts of it that met one (until the reset
 * their CLI gave, else `backoffMs` after they ended); null when it is not (`self`, the task
 * asking, aside).
 */
export function limitedUntil(
  tasks: readonly Readonly<TaskRun>[],
  agent: string,
  self: string,
  at: { now: number; backoffMs: number },
): number | null {
  // Only what is still to come counts: a limit that lifted is no limit.
  let until: number | null = null;
  const limitedTill = (lifts: number | null): void => {
    if (lifts !== null && lifts > at.now) until = Math.max(until ?? 0, lifts);
  };
  for (const t of tasks) {
    if (t.id === self) continue;
    if (t.history.at(-1)?.agent === agent) limitedTill(t.waiting.quotaUntil);
    for (const r of t.history)
      if (r.agent === agent && r.reason === "rate_limited" && r.finished_at)
        limitedTill(r.resets_at ? Date.parse(r.resets_at) : Date.parse(r.finished_at) + at.backoffMs);
  }
  return until;
}

/** The agentIndex of the fallback after the agent at `agentIndex` (its escalation list's: the first); null: none left. */
export function nextFallback(p: Pick<TaskPlan, "agents" | "fallbacks">, agentIndex: number): number | null {
  const next = agentIndex < p.agents.length ? p.agents.length : agentIndex + 1;
  return next < p.agents.length + p.fallbacks.length ? next : null;
}
