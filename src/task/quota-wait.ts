import type { OnRateLimit } from "../contract/assignments.js";
import type { AttemptRecord } from "../contract/attempt-record.js";
import type { AttemptSide } from "./attempt.js";
import { waitedFor } from "./attempt-history.js";
import type { TaskStanding } from "./next-attempt.js";
import type { TaskRun } from "./task-run.js";

// Waiting out the rate limits and usage caps agents' CLIs meet: a task's own (the policy's
// `wait`), and another task's of the same agent, which a task about to start waits for too.

/** Where the task stands against its `rate_limit`: its setting, and its waits so far. */
export function limitStanding(
  setting: OnRateLimit,
  history: readonly AttemptRecord[],
  now: number,
): TaskStanding["rateLimit"] {
  return {
    on: setting.on,
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
  side: Pick<AttemptSide, "ports" | "stop" | "recorder">,
  t: Readonly<TaskRun>,
  until: number | null,
): Promise<void> {
  const { ports, stop, recorder } = side;
  if (until === null || until <= ports.now()) return;
  await recorder.markWaitingQuota(t.id, until);
  await new Promise<void>((resolve) => {
    let unsubscribe = (): void => {};
    const timer = setTimeout(() => {
      unsubscribe();
      resolve();
    }, until - ports.now());
    unsubscribe = stop.onChange(() => {
      clearTimeout(timer);
      unsubscribe();
      resolve();
    });
  });
  await recorder.markWaitingQuota(t.id, null);
}

/**
 * Until when `agent` is limited, as the tasks waiting for its limits to lift say (each the agent
 * of its last attempt); null when none is (`self`, the task asking, aside).
 */
export function limitedUntil(
  tasks: readonly Readonly<TaskRun>[],
  agent: string,
  self: string,
  now: number,
): number | null {
  let until: number | null = null;
  for (const t of tasks) {
    const lifts = t.waiting.quotaUntil;
    if (t.id === self || lifts === null || lifts <= now || t.history.at(-1)?.agent !== agent) continue;
    until = Math.max(until ?? 0, lifts);
  }
  return until;
}
