import { describe, expect, it } from "vitest";
import { buildGraph } from "../../src/plan/graph.js";
import { planWaves } from "../../src/plan/waves.js";
import { Schedule } from "../../src/run/schedule.js";

const n = (id: string, ...dependencies: string[]) => ({ id, dependencies });

function scheduleOf(nodes: ReturnType<typeof n>[], mode: "eager" | "waves" = "eager") {
  const plan = planWaves(nodes, buildGraph(nodes).order);
  return new Schedule(nodes, { mode, priority: plan.remaining, level: plan.level });
}

describe("schedule", () => {
  it("releases a task only when all its dependencies succeeded", () => {
    const s = scheduleOf([n("A"), n("B"), n("C", "A", "B")]);
    expect(s.ready()).toEqual(["A", "B"]);
    s.start("A");
    s.start("B");
    expect(s.ready()).toEqual([]);
    s.complete("A", true);
    expect(s.ready()).toEqual([]);
    s.complete("B", true);
    expect(s.ready()).toEqual(["C"]);
  });

  it("gives ties to the longest remaining critical path", () => {
    const s = scheduleOf([n("short"), n("long"), n("long2", "long"), n("long3", "long2")]);
    expect(s.ready()).toEqual(["long", "short"]);
  });

  it("skips every transitive dependent of a failure, and nothing else", () => {
    const s = scheduleOf([n("A"), n("B", "A"), n("C", "B"), n("D")]);
    s.start("A");
    s.start("D");
    expect(s.complete("A", false)).toEqual(["B", "C"]);
    expect(s.ready()).toEqual([]);
    expect(s.finished()).toBe(false);
    s.complete("D", true);
    expect(s.finished()).toBe(true);
  });

  it("enforces wave barriers in waves mode but not in eager mode", () => {
    const nodes = [n("A"), n("slow"), n("B", "A")];
    const eager = scheduleOf(nodes);
    eager.start("A");
    eager.start("slow");
    eager.complete("A", true);
    expect(eager.ready()).toEqual(["B"]);
    const waves = scheduleOf(nodes, "waves");
    waves.start("A");
    waves.start("slow");
    waves.complete("A", true);
    expect(waves.ready()).toEqual([]);
    waves.complete("slow", true);
    expect(waves.ready()).toEqual(["B"]);
  });

  it("skipPending stops everything not yet started", () => {
    const s = scheduleOf([n("A"), n("B", "A"), n("C")]);
    s.start("A");
    expect(s.skipPending()).toEqual(["B", "C"]);
    expect(s.running()).toBe(1);
  });

  it("refuses to start a task twice", () => {
    const s = scheduleOf([n("A")]);
    s.start("A");
    expect(() => s.start("A")).toThrow(/not pending/);
  });
});
