import { compareIds, type PlanNode } from "./graph.js";

export interface Plan {
  /** Longest-path levels from the roots: wave k holds tasks whose longest dependency chain has k edges. */
  waves: string[][];
  /** Wave index of every task. */
  level: Map<string, number>;
  /** Length (in tasks) of the longest chain from each task to a sink: the scheduler's tie-breaker. */
  remaining: Map<string, number>;
  /** One longest chain through the whole graph. */
  criticalPath: string[];
}

/** Computes waves and critical paths over a topological order (see graph.ts). */
export function planWaves(nodes: readonly PlanNode[], order: readonly string[]): Plan {
  const byId = new Map(nodes.map((n) => [n.id, n]));
  const level = new Map<string, number>();
  for (const id of order) {
    let l = 0;
    for (const dep of byId.get(id)!.dependencies) l = Math.max(l, level.get(dep)! + 1);
    level.set(id, l);
  }
  const waves: string[][] = [];
  for (const id of order) {
    const l = level.get(id)!;
    const wave = waves[l];
    if (wave) wave.push(id);
    else waves[l] = [id];
  }
  for (const w of waves) w.sort(compareIds);

  const dependents = new Map<string, string[]>();
  for (const n of nodes)
    for (const d of n.dependencies) (dependents.get(d) ?? dependents.set(d, []).get(d)!).push(n.id);
  const remaining = new Map<string, number>();
  const next = new Map<string, string | undefined>();
  for (let i = order.length - 1; i >= 0; i--) {
    const id = order[i]!;
    let best = 0;
    let bestNext: string | undefined;
    for (const d of (dependents.get(id) ?? []).sort(compareIds)) {
      const r = remaining.get(d)!;
      if (r > best) {
        best = r;
        bestNext = d;
      }
    }
    remaining.set(id, best + 1);
    next.set(id, bestNext);
  }
  let start: string | undefined;
  for (const id of order) {
    if (start === undefined || remaining.get(id)! > remaining.get(start)!) start = id;
  }
  const criticalPath: string[] = [];
  for (let id = start; id !== undefined; id = next.get(id)) criticalPath.push(id);
  return { waves, level, remaining, criticalPath };
}
