import type { PredictedCollision } from "../contract/collision.js";
import { globsOverlap } from "./glob-overlap.js";

/** A task as the prediction reads it. */
export interface CollisionNode {
  id: string;
  dependencies: readonly string[];
  /** Its `allowed_paths`; undefined: no restriction (it is compared with no other). */
  allowed_paths?: readonly string[] | undefined;
}

/**
 * Every pair of tasks that may run in parallel (no dependency path between them, either way)
 * whose allowed_paths overlap (glob-overlap.ts). Pure; `order` is a topological order of the ids.
 */
export function predictCollisions(
  nodes: readonly CollisionNode[],
  order: readonly string[],
): PredictedCollision[] {
  const byId = new Map(nodes.map((n) => [n.id, n]));
  // Each task's ancestors, built in dependency order.
  const ancestors = new Map<string, Set<string>>();
  for (const id of order) {
    const own = new Set<string>();
    for (const dep of byId.get(id)?.dependencies ?? []) {
      own.add(dep);
      for (const a of ancestors.get(dep) ?? []) own.add(a);
    }
    ancestors.set(id, own);
  }
  const restricted = nodes.filter((n) => n.allowed_paths !== undefined);
  const found: PredictedCollision[] = [];
  for (const [i, a] of restricted.entries())
    for (const b of restricted.slice(i + 1)) {
      if (ancestors.get(a.id)?.has(b.id) || ancestors.get(b.id)?.has(a.id)) continue;
      const paths: [string, string][] = [];
      for (const pa of a.allowed_paths!)
        for (const pb of b.allowed_paths!) if (globsOverlap(pa, pb)) paths.push([pa, pb]);
      if (paths.length > 0) found.push({ tasks: [a.id, b.id], paths });
    }
  return found;
}

/** A predicted collision in words, and what to do about it. */
export function collisionText(c: PredictedCollision): string {
  const [a, b] = c.tasks;
  const where = c.paths.map(([x, y]) => (x === y ? x : `${x} and ${y}`)).join(", ");
  return `${a} and ${b} may both change ${where}; give one a dependency on the other or split the paths`;
}
