import { compareIds, type PlanNode } from "../plan/graph.js";

export type ScheduleMode = "eager" | "waves";
type Phase = "pending" | "started" | "succeeded" | "failed" | "skipped";

/**
 * The pure scheduling decisions: which tasks may start now, and which dependents a failure
 * takes down. No I/O, no clock; the runner feeds it `start` and `complete` and asks `ready`.
 */
export class Schedule {
  private readonly phase = new Map<string, Phase>();
  private readonly deps = new Map<string, readonly string[]>();
  private readonly dependents = new Map<string, string[]>();

  constructor(
    nodes: readonly PlanNode[],
    private readonly opts: {
      mode: ScheduleMode;
      /** Higher first: the remaining critical path length. */
      priority: ReadonlyMap<string, number>;
      /** Wave index per task, used by `waves` mode barriers. */
      level: ReadonlyMap<string, number>;
    },
  ) {
    for (const n of nodes) {
      this.phase.set(n.id, "pending");
      this.deps.set(n.id, n.dependencies);
      for (const d of n.dependencies) {
        const list = this.dependents.get(d);
        if (list) list.push(n.id);
        else this.dependents.set(d, [n.id]);
      }
    }
  }

  /** Tasks that may start now, most urgent first (longest remaining critical path, then id). */
  ready(): string[] {
    const barrier = this.opts.mode === "waves" ? this.currentWave() : Number.POSITIVE_INFINITY;
    const out: string[] = [];
    for (const [id, phase] of this.phase) {
      if (phase !== "pending") continue;
      if ((this.opts.level.get(id) ?? 0) > barrier) continue;
      if (this.deps.get(id)!.every((d) => this.phase.get(d) === "succeeded")) out.push(id);
    }
    return out.sort(
      (a, b) => (this.opts.priority.get(b) ?? 0) - (this.opts.priority.get(a) ?? 0) || compareIds(a, b),
    );
  }

  /** The lowest wave that still has unfinished tasks; later waves wait for it. */
  private currentWave(): number {
    let lowest = Number.POSITIVE_INFINITY;
    for (const [id, phase] of this.phase) {
      if (phase === "pending" || phase === "started") lowest = Math.min(lowest, this.opts.level.get(id) ?? 0);
    }
    return lowest;
  }

  /** Marks a task that finished in an earlier process (resume). */
  restore(id: string, state: "success" | "failed" | "skipped"): void {
    this.phase.set(id, state === "success" ? "succeeded" : state);
  }

  start(id: string): void {
    if (this.phase.get(id) !== "pending") throw new Error(`schedule: ${id} is not pending`);
    this.phase.set(id, "started");
  }

  /** Records an outcome; on failure returns the transitive dependents that are now skipped. */
  complete(id: string, ok: boolean): string[] {
    if (this.phase.get(id) !== "started") throw new Error(`schedule: ${id} was not started`);
    this.phase.set(id, ok ? "succeeded" : "failed");
    return ok ? [] : this.skipDependentsOf(id);
  }

  /** Marks a task that will never run because the run is stopping (cancel, fail-fast). */
  skipPending(): string[] {
    const skipped: string[] = [];
    for (const [id, phase] of this.phase) {
      if (phase === "pending") {
        this.phase.set(id, "skipped");
        skipped.push(id);
      }
    }
    return skipped;
  }

  /** Skips the pending transitive dependents of a task that did not succeed; returns them. */
  skipDependentsOf(id: string): string[] {
    const skipped: string[] = [];
    const stack = [...(this.dependents.get(id) ?? [])];
    while (stack.length > 0) {
      const next = stack.pop()!;
      if (this.phase.get(next) !== "pending") continue;
      this.phase.set(next, "skipped");
      skipped.push(next);
      stack.push(...(this.dependents.get(next) ?? []));
    }
    return skipped.sort(compareIds);
  }

  /** True when nothing is pending or started. */
  finished(): boolean {
    for (const phase of this.phase.values()) if (phase === "pending" || phase === "started") return false;
    return true;
  }

  running(): number {
    let n = 0;
    for (const phase of this.phase.values()) if (phase === "started") n++;
    return n;
  }
}
