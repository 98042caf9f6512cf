import PQueue from "p-queue";
import { compareIds } from "../plan/graph.js";
import type { TaskEnd, TaskExecutor } from "../task/executor.js";
import type { TaskRecorder } from "../task/recorder.js";
import type { RunPlan } from "../task/run-plan.js";
import type { RunStop } from "../task/stop.js";
import type { TaskRun } from "../task/task-run.js";
import { AgentSlots } from "./agent-slots.js";
import { Schedule } from "./schedule.js";

/**
 * Runs the schedule to its end through a p-queue bounded by max_parallel; returns the peak
 * parallelism. Two ways to stop early, kept apart: a stop (cancel, --fail-fast, internal error)
 * skips every task not yet started; a detach (the daemon shutting down) leaves them untouched,
 * pending for the next resume, and answers "detached" once nothing is in flight.
 */
export async function dispatch(
  run: Pick<RunPlan, "input" | "settings" | "waves">,
  stopper: RunStop,
  recorder: TaskRecorder,
  executor: TaskExecutor,
  hostQueue: PQueue | undefined,
): Promise<number | "detached"> {
  const plan = run.waves;
  const sched = new Schedule(run.input.assignments.tasks, {
    mode: run.settings.schedule,
    priority: plan.remaining,
    level: plan.level,
  });
  const queue = new PQueue({ concurrency: run.settings.max_parallel });
  const slots = new AgentSlots(run.input.config);
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
    for (const id of ids) await recorder.transition(id, { to: "skipped", reason, detail: why(id) });
  };

  // A resumed run: finished tasks stay finished; started ones are re-adopted, not relaunched;
  // pending ones whose dependency failed (the crash came between the two) are skipped now.
  const adopt = new Set<string>();
  for (const t of recorder.all()) {
    // Mid-redo: its task was done, and the merge stage goes on with its redo.
    if (t.redo.progress !== null) sched.restore(t.id, "success");
    else if (t.state === "success" || t.state === "failed" || t.state === "skipped")
      sched.restore(t.id, t.state);
    else if (t.state === "running" || t.current.dir !== null || t.git.startCommit !== null) adopt.add(t.id);
  }
  for (const t of recorder.all()) {
    if ((t.state === "failed" || t.state === "skipped") && !adopt.has(t.id)) {
      track(skip(sched.skipDependentsOf(t.id), "dependency_failed", (s) => dependencyFailed(recorder, s)));
    }
  }

  let failure: unknown = null;
  let active = 0;
  let peak = 0;
  let stopping = false;
  /** A task failed under --fail-fast: nothing starts any more, even before the stop is made. */
  let failedFast = false;
  // At a boundary nothing new starts either, and what has not started stays pending (a resume's).
  const leaving = (): boolean => stopping || stopper.detaching || stopper.atBoundary;
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
      const runOne = async (): Promise<TaskEnd> => {
        if (stopper.detaching || (stopper.atBoundary && !resuming)) return { kind: "detached" };
        if ((stopping || failedFast || stopper.ending) && !resuming) {
          await recorder.transition(id, {
            to: "skipped",
            reason: "cancelled",
            detail: "the run stopped before it started",
          });
          return { kind: "done", ok: false };
        }
        active++;
        peak = Math.max(peak, active);
        try {
          const execute = (): Promise<TaskEnd> => executor.execute(id, resuming);
          return await (hostQueue ? hostQueue.add(execute, { throwOnTimeout: true }) : execute());
        } finally {
          active--;
        }
      };
      const priority = resuming ? Number.MAX_SAFE_INTEGER : (plan.remaining.get(id) ?? 0);
      const inRunSlot = (): Promise<TaskEnd> =>
        queue.add(
          async (): Promise<TaskEnd> => {
            const end = await runOne();
            // Known before the task's slot frees, so a task waiting for it does not start; the
            // stop itself comes once its dependents are skipped (below).
            if (end.kind === "done" && !end.ok && run.settings.fail_fast) failedFast = true;
            return end;
          },
          { priority, throwOnTimeout: true },
        );
      // An attempt adopted alive holds no agent's slot: the bounds are for what starts (a task
      // with its next attempt chosen, or reopened, starts one).
      const t = recorder.get(id);
      const alive = resuming && t.state === "running" && t.next === null;
      // A task a person is to approve first waits for it before it takes any slot.
      const admitted = resuming ? Promise.resolve(null) : (executor.admit?.(id) ?? Promise.resolve(null));
      const outcome = admitted.then(
        (end) => end ?? (alive ? inRunSlot() : slots.run(t.agent, priority, inRunSlot)),
      );
      track(
        outcome
          .then(async (end) => {
            // Left for the next resume: the task stays as state.json has it.
            if (end === undefined || end.kind === "detached") return;
            const skipped = sched.complete(id, end.ok);
            await skip(skipped, "dependency_failed", (s) => dependencyFailed(recorder, s));
            if (!end.ok && run.settings.fail_fast) {
              stop(`--fail-fast: task ${id} failed`);
              stopper.request("fail-fast");
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
  const unsubscribe = stopper.onChange(() => {
    if (stopper.ending) stop("the run was cancelled before it started");
  });
  // Wait for every task, its completion handler (which skips dependents and releases more
  // work) and every skip: the queue alone goes idle before the handler of its last task ran.
  while (inflight.size > 0) await Promise.all([...inflight]);
  unsubscribe();
  if (stopper.detaching) return "detached";
  if (failure) throw failure;
  return peak;
}

/**
 * Names the root failures behind a skipped task, e.g. `a dependency failed: A (exit_code) via B`.
 * Walks the dependency graph rather than trusting the states of the other tasks being skipped in
 * the same batch: those may not be marked yet (the batch is in id order, not dependency order).
 */
function dependencyFailed(tasks: Pick<TaskRecorder, "get">, id: string): string {
  const isRoot = (t: Readonly<TaskRun>): boolean =>
    t.state === "failed" || (t.state === "skipped" && t.reason !== "dependency_failed");
  const rootsMemo = new Map<string, string[]>();
  // The tasks that did not succeed on their own account, upstream of `dep` (itself included).
  const rootsOf = (dep: string): string[] => {
    const known = rootsMemo.get(dep);
    if (known) return known;
    const t = tasks.get(dep);
    let roots: string[] = [];
    if (isRoot(t)) roots = [dep];
    else if (t.state !== "success" && t.state !== "running")
      roots = [...new Set(t.dependencies.flatMap(rootsOf))].sort(compareIds);
    rootsMemo.set(dep, roots);
    return roots;
  };
  const describe = (root: string): string => {
    const t = tasks.get(root);
    return `${root} (${t.reason ?? t.state})`;
  };
  const parts: string[] = [];
  for (const dep of tasks.get(id).dependencies) {
    const roots = rootsOf(dep);
    if (roots.length === 0) continue;
    parts.push(roots.includes(dep) ? describe(dep) : `${roots.map(describe).join(", ")} via ${dep}`);
  }
  if (parts.length === 0) return "a dependency did not succeed";
  return `${parts.length > 1 ? "dependencies failed" : "a dependency failed"}: ${parts.join("; ")}`;
}
