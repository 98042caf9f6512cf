import PQueue from "p-queue";
import { compareIds } from "../plan/graph.js";
import type { LiveRun, RunContext } from "./context.js";
import { executeRemoteTask } from "./remote-task.js";
import { Schedule } from "./schedule.js";
import { executeTask, type TaskEnd } from "./task-exec.js";
import type { TaskRun } from "./task-run.js";
import { transition } from "./transition.js";

/**
 * Runs the schedule to its end through a p-queue bounded by max_parallel; returns the peak
 * parallelism. Two ways to stop early, kept apart: a stop (cancel, --fail-fast, internal error)
 * skips every task not yet started; a detach (the daemon shutting down) leaves them untouched,
 * pending for the next resume, and answers "detached" once nothing is in flight.
 */
export async function dispatch(ctx: LiveRun, hostQueue: PQueue | undefined): Promise<number | "detached"> {
  const plan = ctx.plan;
  const sched = new Schedule(ctx.input.assignments.tasks, {
    mode: ctx.settings.schedule,
    priority: plan.remaining,
    level: plan.level,
  });
  const queue = new PQueue({ concurrency: ctx.settings.max_parallel });
  const inflight = new Set<Promise<unknown>>();
  const track = (work: Promise<unknown>): void => {
    inflight.add(work);
    void work.finally(() => inflight.delete(work));
  };
  const skip = async (
    ids: string[],
    reason: "dependency_failed" | "cancelled",
    why: (id: string) => string,
  ): Promise<void> => {
    for (const id of ids)
      await transition(ctx, ctx.tasks.get(id)!, { to: "skipped", reason, detail: why(id) });
  };

  // A resumed run: finished tasks stay finished; started ones are re-adopted, not relaunched;
  // pending ones whose dependency failed (the crash came between the two) are skipped now.
  const adopt = new Set<string>();
  for (const t of ctx.tasks.values()) {
    if (t.state === "success" || t.state === "failed" || t.state === "skipped") sched.restore(t.id, t.state);
    else if (t.state === "running" || t.attemptDir !== null || t.startCommit !== null) adopt.add(t.id);
  }
  for (const t of ctx.tasks.values()) {
    if ((t.state === "failed" || t.state === "skipped") && !adopt.has(t.id)) {
      track(skip(sched.skipDependentsOf(t.id), "dependency_failed", (s) => dependencyFailed(ctx, s)));
    }
  }

  let failure: unknown = null;
  let active = 0;
  let peak = 0;
  let stopping = false;
  const leaving = (): boolean => stopping || ctx.stop.detaching;
  const stop = (why: string): void => {
    if (stopping) return;
    stopping = true;
    track(skip(sched.skipPending(), "cancelled", () => why));
  };

  const release = (): void => {
    if (leaving()) return;
    for (const id of [...adopt, ...sched.ready().filter((r) => !adopt.has(r))]) {
      sched.start(id);
      const resuming = adopt.delete(id);
      const outcome = queue.add(
        async (): Promise<TaskEnd> => {
          if (ctx.stop.detaching) return { kind: "detached" };
          if ((stopping || ctx.stop.ending) && !resuming) {
            const t = ctx.tasks.get(id)!;
            await transition(ctx, t, {
              to: "skipped",
              reason: "cancelled",
              detail: "the run stopped before it started",
            });
            return { kind: "done", ok: false };
          }
          active++;
          peak = Math.max(peak, active);
          try {
            const remote = ctx.remote;
            const run = (): Promise<TaskEnd> =>
              remote ? executeRemoteTask(ctx, remote, id, resuming) : executeTask(ctx, id, resuming);
            return await (hostQueue ? hostQueue.add(run, { throwOnTimeout: true }) : run());
          } finally {
            active--;
          }
        },
        { priority: resuming ? Number.MAX_SAFE_INTEGER : (plan.remaining.get(id) ?? 0) },
      );
      track(
        outcome
          .then(async (end) => {
            // Left for the next resume: the task stays as state.json has it.
            if (end === undefined || end.kind === "detached") return;
            const skipped = sched.complete(id, end.ok);
            await skip(skipped, "dependency_failed", (s) => dependencyFailed(ctx, s));
            if (!end.ok && ctx.settings.fail_fast) {
              stop(`--fail-fast: task ${id} failed`);
              ctx.stop.request("fail-fast");
            }
            release();
          })
          .catch((error: unknown) => {
            failure ??= error;
            stop("internal error");
          }),
      );
    }
  };
  // Released first: a resumed run that was cancelled meanwhile still adopts its live attempts
  // (and ends them); then cancel and fail-fast skip what has not started; a detach leaves it pending.
  release();
  const unsubscribe = ctx.stop.onChange(() => {
    if (ctx.stop.ending) stop("the run was cancelled before it started");
  });
  // Wait for every task, its completion handler (which skips dependents and releases more
  // work) and every skip: the queue alone goes idle before the handler of its last task ran.
  while (inflight.size > 0) await Promise.all([...inflight]);
  unsubscribe();
  if (ctx.stop.detaching) return "detached";
  if (failure) throw failure;
  return peak;
}

/**
 * Names the root failures behind a skipped task, e.g. `a dependency failed: A (exit_code) via B`.
 * Walks the dependency graph rather than trusting the states of the other tasks being skipped in
 * the same batch: those may not be marked yet (the batch is in id order, not dependency order).
 */
function dependencyFailed(ctx: RunContext, id: string): string {
  const isRoot = (t: TaskRun): boolean =>
    t.state === "failed" || (t.state === "skipped" && t.reason !== "dependency_failed");
  const rootsMemo = new Map<string, string[]>();
  // The tasks that did not succeed on their own account, upstream of `dep` (itself included).
  const rootsOf = (dep: string): string[] => {
    const known = rootsMemo.get(dep);
    if (known) return known;
    const t = ctx.tasks.get(dep)!;
    let roots: string[] = [];
    if (isRoot(t)) roots = [dep];
    else if (t.state !== "success" && t.state !== "running")
      roots = [...new Set(t.dependencies.flatMap(rootsOf))].sort(compareIds);
    rootsMemo.set(dep, roots);
    return roots;
  };
  const describe = (root: string): string => {
    const t = ctx.tasks.get(root)!;
    return `${root} (${t.reason ?? t.state})`;
  };
  const parts: string[] = [];
  for (const dep of ctx.tasks.get(id)!.dependencies) {
    const roots = rootsOf(dep);
    if (roots.length === 0) continue;
    parts.push(roots.includes(dep) ? describe(dep) : `${roots.map(describe).join(", ")} via ${dep}`);
  }
  if (parts.length === 0) return "a dependency did not succeed";
  return `${parts.length > 1 ? "dependencies failed" : "a dependency failed"}: ${parts.join("; ")}`;
}
