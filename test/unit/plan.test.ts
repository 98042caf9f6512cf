import { alg } from "@dagrejs/graphlib";
import { describe, expect, it } from "vitest";
import { buildGraph, graphProblems } from "../../src/plan/graph.js";
import { planWaves } from "../../src/plan/waves.js";

const n = (id: string, ...dependencies: string[]) => ({ id, dependencies });

describe("graph checks", () => {
  it("names duplicates, unknown and self dependencies with their fields", () => {
    const problems = graphProblems([n("A"), n("A"), n("B", "Z"), n("C", "C")], "a.json");
    expect(problems.map((p) => p.field)).toEqual([
      "tasks[1].id",
      "tasks[2].dependencies[0]",
      "tasks[3].dependencies[0]",
    ]);
    expect(problems[1]).toMatchObject({ file: "a.json", task: "B", message: 'depends on unknown task "Z"' });
  });

  it("reports a cycle with its members in order", () => {
    const nodes = [n("A", "C"), n("B", "A"), n("C", "B"), n("D")];
    const [problem] = graphProblems(nodes);
    expect(problem?.message).toBe("dependency cycle: A -> C -> B -> A");
    expect(problem?.task).toBe("A");
  });

  it("finds no cycle in a diamond, and graphlib agrees", () => {
    const nodes = [n("A"), n("B", "A"), n("C", "A"), n("D", "B", "C")];
    expect(graphProblems(nodes)).toEqual([]);
    expect(alg.isAcyclic(buildGraph(nodes).graph)).toBe(true);
  });
});

describe("waves and critical path", () => {
  it("levels by longest path, ties by id", () => {
    const nodes = [n("E", "D"), n("D", "B", "C"), n("C", "A"), n("B", "A"), n("A"), n("X")];
    const { order } = buildGraph(nodes);
    expect(order).toEqual(["A", "B", "C", "D", "E", "X"]);
    const plan = planWaves(nodes, order);
    expect(plan.waves).toEqual([["A", "X"], ["B", "C"], ["D"], ["E"]]);
    expect(plan.criticalPath).toEqual(["A", "B", "D", "E"]);
    expect(plan.remaining.get("A")).toBe(4);
    expect(plan.remaining.get("X")).toBe(1);
  });

  it("puts a task after its deepest dependency, not its shallowest", () => {
    const nodes = [n("A"), n("B", "A"), n("C", "B"), n("D", "A", "C")];
    expect(planWaves(nodes, buildGraph(nodes).order).waves).toEqual([["A"], ["B"], ["C"], ["D"]]);
  });

  it("plans 10,000 tasks", () => {
    const nodes = Array.from({ length: 10_000 }, (_, i) =>
      n(`t${i}`, ...[i - 1, i - 7, i - 100].filter((j) => j >= 0).map((j) => `t${j}`)),
    );
    const plan = planWaves(nodes, buildGraph(nodes).order);
    expect(plan.waves.length).toBe(10_000);
  });
});

describe("deep graphs", () => {
  it("checks a 50,000-task chain without overflowing the stack", () => {
    const nodes = Array.from({ length: 50_000 }, (_, i) => n(`t${i}`, ...(i > 0 ? [`t${i - 1}`] : [])));
    expect(graphProblems(nodes)).toEqual([]);
    nodes[0] = n("t0", "t49999");
    expect(graphProblems(nodes)[0]?.message).toMatch(/^dependency cycle: t0 -> t49999 -> t49998/);
  });
});
