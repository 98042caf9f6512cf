import PQueue from "p-queue";
import type { LiveRun, RunContext } from "./context.js";
import { Schedule } from "./schedule.js";
import { Detached, executeTask, skipTask } from "./task-exec.js";

/** Runs the schedule to its end through a p-queue bounded by max_parallel; returns the peak parallelism. */
export async function dispatch(ctx: LiveRun, hostQueue: PQueue | undefined): Promise<number> {
  const plan = ctx.plan;
  const sched = new Schedule(ctx.input.assignments.tasks, {
    mode: ctx.settings.schedule,
    priority: plan.remaining,
    level: plan.level,
  });
  const queue = new PQueue({ concurrency: ctx.settings.max_parallel });
  // A resumed run: finished tasks stay finished; started ones are re-adopted, not relaunched.
  const adopt = new Set<string>();
  for (const t of ctx.tasks.values()) {
    if (t.state === "success" || t.state === "failed" || t.state === "skipped") sched.restore(t.id, t.state);
    else if (t.state === "running" || t.attemptDir !== null || t.startCommit !== null) adopt.add(t.id);
  }
  let detached: Detached | null = null;
  let active = 0;
  let peak = 0;
  let stopping = false;

  const skip = async (
    ids: string[],
    reason: "dependency_failed" | "cancelled",
    why: (id: string) => string,
  ): Promise<void> => {
    for (const id of ids) await skipTask(ctx, ctx.tasks.get(id)!, reason, why(id));
  };
  const stop = async (why: string): Promise<void> => {
    if (stopping) return;
    stopping = true;
    await skip(sched.skipPending(), "cancelled", () => why);
  };

  let failure: unknown = null;
  const inflight = new Set<Promise<void>>();
  const release = (): void => {
    if (stopping) return;
    for (const id of [...adopt, ...sched.ready().filter((r) => !adopt.has(r))]) {
      sched.start(id);
      const resuming = adopt.delete(id);
      const chain: Promise<void> = queue
        .add(
          async () => {
            if ((stopping || ctx.signal.aborted) && !resuming) {
              await skipTask(ctx, ctx.tasks.get(id)!, "cancelled", "the run stopped before it started");
              return { ok: false };
            }
            active++;
            peak = Math.max(peak, active);
            try {
              const run = (): Promise<{ ok: boolean }> => executeTask(ctx, id, resuming);
              return await (hostQueue ? hostQueue.add(run, { throwOnTimeout: true }) : run());
            } finally {
              active--;
            }
          },
          { priority: resuming ? Number.MAX_SAFE_INTEGER : (plan.remaining.get(id) ?? 0) },
        )
        .then(async (outcome) => {
          const ok = outcome?.ok ?? false;
          const skipped = sched.complete(id, ok);
          await skip(
            skipped,
            "dependency_failed",
            (s) => `a dependency failed (${failedDepsOf(ctx, s).join(", ") || id})`,
          );
          if (!ok && ctx.settings.fail_fast) {
            await stop(`--fail-fast: task ${id} failed`);
            ctx.stopper.abort();
          }
          release();
        })
        .catch((error: unknown) => {
          if (error instanceof Detached) {
            // Stop launching; live agents stay in tmux for the next resume.
            detached = error;
            stopping = true;
            return;
          }
          failure ??= error;
          void stop("internal error");
        })
        .finally(() => inflight.delete(chain));
      inflight.add(chain);
    }
  };
  const onAbort = (): void => void stop("the run was cancelled before it started");
  ctx.signal.addEventListener("abort", onAbort, { once: true });
  release();
  // Wait for every task *and* its completion handler (which skips dependents and releases more
  // work): the queue alone goes idle before the handler of its last task has run.
  while (inflight.size > 0) await Promise.all([...inflight]);
  ctx.signal.removeEventListener("abort", onAbort);
  if (detached) throw detached;
  if (failure) throw failure;
  return peak;
}

function failedDepsOf(ctx: RunContext, id: string): string[] {
  return ctx.tasks.get(id)!.dependencies.filter((d) => {
    const s = ctx.tasks.get(d)!.state;
    return s === "failed" || s === "skipped";
  });
}
