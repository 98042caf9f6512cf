import { Graph } from "@dagrejs/graphlib";
import type { InputProblem } from "../errors.js";

/** The minimum the planner needs to know about a task. */
export interface PlanNode {
  id: string;
  dependencies: readonly string[];
}

/** A validated dependency graph: edges point from a dependency to its dependent. */
export interface TaskGraph {
  graph: Graph;
  /** Topological order, ties broken by id so that plans are reproducible. */
  order: string[];
}

/**
 * Checks ids, duplicates, unknown dependencies and cycles, and returns every problem found
 * (not just the first) so the user can fix the file in one pass.
 */
export function graphProblems(
  /** `index`: the task's place in the file, when the list leaves out tasks that have no usable id. */
  nodes: readonly (PlanNode & { index?: number })[],
  file?: string,
): InputProblem[] {
  const problems: InputProblem[] = [];
  const index = new Map<string, number>();
  nodes.forEach((node, n) => {
    const i = node.index ?? n;
    if (index.has(node.id)) {
      problems.push({
        file,
        field: `tasks[${i}].id`,
        task: node.id,
        message: `duplicate task id "${node.id}" (also tasks[${index.get(node.id)}]); ids must be unique`,
      });
    } else index.set(node.id, i);
  });
  nodes.forEach((node, n) => {
    const i = node.index ?? n;
    node.dependencies.forEach((dep, j) => {
      if (!index.has(dep)) {
        problems.push({
          file,
          field: `tasks[${i}].dependencies[${j}]`,
          task: node.id,
          message: `depends on unknown task "${dep}"`,
        });
      } else if (dep === node.id) {
        problems.push({
          file,
          field: `tasks[${i}].dependencies[${j}]`,
          task: node.id,
          message: "a task cannot depend on itself",
        });
      }
    });
  });
  // Searched for even when other problems were found, so that one pass shows them all: among the
  // first task of each id (as above), without self-dependencies (reported above); unknown ids
  // are not followed.
  const firsts = new Map<string, PlanNode>();
  for (const n of nodes) if (!firsts.has(n.id)) firsts.set(n.id, n);
  const cycle = findCycle(
    [...firsts.values()].map((n) => ({ id: n.id, dependencies: n.dependencies.filter((d) => d !== n.id) })),
  );
  if (cycle) {
    const first = cycle[0]!;
    problems.push({
      file,
      field: `tasks[${index.get(first)}].dependencies`,
      task: first,
      message: `dependency cycle: ${[...cycle, first].join(" -> ")}`,
    });
  }
  return problems.map((p) => (p.file === undefined ? withoutFile(p) : p));
}

function withoutFile(p: InputProblem): InputProblem {
  const { file: _file, ...rest } = p;
  return rest;
}

/**
 * Finds one cycle and returns its members in dependency order (A depends on B depends on ... A),
 * or null. graphlib's findCycles gives strongly connected components without an order, so the
 * path is recovered with a depth-first search.
 */
function findCycle(nodes: readonly PlanNode[]): string[] | null {
  const deps = new Map(nodes.map((n) => [n.id, [...n.dependencies].sort()]));
  const state = new Map<string, "open" | "done">();
  // Iterative depth-first search: chains of tens of thousands of tasks would overflow the stack.
  for (const root of [...deps.keys()].sort()) {
    if (state.has(root)) continue;
    const path: string[] = [root];
    const cursor: number[] = [0];
    state.set(root, "open");
    while (path.length > 0) {
      const id = path[path.length - 1]!;
      const list = deps.get(id) ?? [];
      const i = cursor[cursor.length - 1]!;
      if (i >= list.length) {
        state.set(id, "done");
        path.pop();
        cursor.pop();
        continue;
      }
      cursor[cursor.length - 1] = i + 1;
      const dep = list[i]!;
      if (!deps.has(dep)) continue;
      const s = state.get(dep);
      if (s === "open") return path.slice(path.indexOf(dep));
      if (s === undefined) {
        state.set(dep, "open");
        path.push(dep);
        cursor.push(0);
      }
    }
  }
  return null;
}

/** Builds the graph of an already-checked node list. */
export function buildGraph(nodes: readonly PlanNode[]): TaskGraph {
  const graph = new Graph({ directed: true });
  for (const node of [...nodes].sort((a, b) => compareIds(a.id, b.id))) graph.setNode(node.id);
  for (const node of nodes) for (const dep of node.dependencies) graph.setEdge(dep, node.id);
  return { graph, order: topologicalOrder(nodes) };
}

/** Kahn's algorithm with an id-ordered frontier: deterministic, and the merge order too. */
function topologicalOrder(nodes: readonly PlanNode[]): string[] {
  const indegree = new Map<string, number>();
  const dependents = new Map<string, string[]>();
  for (const n of nodes) {
    indegree.set(n.id, n.dependencies.length);
    for (const d of n.dependencies) {
      const list = dependents.get(d);
      if (list) list.push(n.id);
      else dependents.set(d, [n.id]);
    }
  }
  const frontier = nodes
    .filter((n) => n.dependencies.length === 0)
    .map((n) => n.id)
    .sort(compareIds);
  const order: string[] = [];
  while (frontier.length > 0) {
    const id = frontier.shift()!;
    order.push(id);
    const released: string[] = [];
    for (const next of dependents.get(id) ?? []) {
      const left = indegree.get(next)! - 1;
      indegree.set(next, left);
      if (left === 0) released.push(next);
    }
    if (released.length > 0) {
      frontier.push(...released);
      frontier.sort(compareIds);
    }
  }
  return order;
}

export function compareIds(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
