import type { RunStop } from "../task/stop.js";

/** Beyond the agents' kill grace, how long a cancelled task's worker has to answer before the run goes on without it. */
export const CANCEL_ANSWER_MS = 30_000;
/**
 * Beyond the kill grace, how long the cancel itself may take to reach Redis: one that has not
 * by then reaches no worker either, and waiting the whole answer bound for it only held the
 * cancelled run's report back (30 s with Redis gone).
 */
export const CANCEL_DELIVERY_MS = 5000;

/**
 * Follows the run's stop while one task's job is waited for on the workers. A detach leaves the
 * job to them at once (`leave(null)`); a cancel or --fail-fast is sent to the workers once, and
 * the wait is not kept past a bound: its worker, or Redis, may never answer (`leave(why)`).
 * Returns what ends the following (and its timers) once the job has answered.
 */
export function boundStoppedWait(o: {
  stop: RunStop;
  killGraceMs: number;
  cancel: () => Promise<void>;
  onCancelError: (error: unknown) => void;
  leave: (why: string | null) => void;
}): () => void {
  const timers: NodeJS.Timeout[] = [];
  const follow = (): void => {
    if (o.stop.detaching) o.leave(null);
    else if (o.stop.ending && timers.length === 0) {
      let delivered = false;
      o.cancel().then(() => {
        delivered = true;
      }, o.onCancelError);
      const undeliveredMs = o.killGraceMs + CANCEL_DELIVERY_MS;
      const answerMs = o.killGraceMs + CANCEL_ANSWER_MS;
      timers.push(
        setTimeout(() => {
          if (!delivered) o.leave(`the cancel did not reach Redis within ${seconds(undeliveredMs)} s`);
        }, undeliveredMs),
        setTimeout(() => o.leave(`not within ${seconds(answerMs)} s`), answerMs),
      );
    }
  };
  const unsubscribe = o.stop.onChange(follow);
  follow();
  return () => {
    unsubscribe();
    for (const timer of timers) clearTimeout(timer);
  };
}

function seconds(ms: number): number {
  return Math.round(ms / 1000);
}
