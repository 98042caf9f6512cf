import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { expectedGateRuns, nextBisectStep } from "../../src/merge/bisect-search.js";

/** Runs the search against a gate (k -> passed), as the merge does; the integration (k = n) is red. */
function search(n: number, gate: (k: number) => boolean) {
  const verdicts = new Map<number, boolean>();
  const probed: number[] = [];
  for (;;) {
    const step = nextBisectStep(n, verdicts);
    if (step.kind !== "probe") return { step, probed };
    expect(verdicts.has(step.k)).toBe(false);
    expect(step.k).toBeGreaterThanOrEqual(0);
    expect(step.k).toBeLessThan(n);
    probed.push(step.k);
    verdicts.set(step.k, gate(step.k));
  }
}

describe("nextBisectStep", () => {
  it("judges the base first; red there, it blames no task and probes nothing more", () => {
    expect(nextBisectStep(4, new Map())).toEqual({ kind: "probe", k: 0 });
    expect(search(4, () => false)).toEqual({ step: { kind: "red_on_base" }, probed: [0] });
  });

  it("four tasks, the third breaks the gate: the base, k = 2 (green), k = 3 (red): the culprit is task 3", () => {
    const r = search(4, (k) => k < 3);
    expect(r.step).toEqual({ kind: "culprit", k: 3 });
    expect(r.probed).toEqual([0, 2, 3]);
  });

  it("a single task: the base is green, so it is the culprit without a probe", () => {
    expect(search(1, () => true)).toEqual({ step: { kind: "culprit", k: 1 }, probed: [0] });
  });

  it("a monotonic gate: finds the first red k in at most 1 + ceil(log2 n) gate runs", () => {
    fc.assert(
      fc.property(
        fc
          .integer({ min: 1, max: 300 })
          .chain((n) => fc.tuple(fc.constant(n), fc.integer({ min: 1, max: n }))),
        ([n, culprit]) => {
          const r = search(n, (k) => k < culprit);
          expect(r.step).toEqual({ kind: "culprit", k: culprit });
          expect(r.probed.length).toBeLessThanOrEqual(expectedGateRuns(n));
        },
      ),
    );
  });

  it("any gate (flaky, not monotonic): ends at a red k whose k - 1 was judged green, or the base red", () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 64 }), fc.func(fc.boolean()), (n, gate) => {
        const verdicts = new Map<number, boolean>();
        const r = search(n, (k) => {
          const v = gate(k);
          verdicts.set(k, v);
          return v;
        });
        expect(r.probed.length).toBeLessThanOrEqual(expectedGateRuns(n));
        if (r.step.kind === "red_on_base") expect(verdicts.get(0)).toBe(false);
        else {
          expect(verdicts.get(r.step.k - 1)).toBe(true);
          if (r.step.k < n) expect(verdicts.get(r.step.k)).toBe(false);
        }
      }),
    );
  });

  it("goes on from the verdicts a killed driver left (a resume): the same next probe", () => {
    const all = search(32, (k) => k < 21).probed;
    const known = new Map(all.slice(0, 3).map((k) => [k, k < 21] as const));
    expect(nextBisectStep(32, known)).toEqual({ kind: "probe", k: all[3] });
  });

  it("refuses an empty merge", () => {
    expect(() => nextBisectStep(0, new Map())).toThrow(/at least one task/);
  });
});
