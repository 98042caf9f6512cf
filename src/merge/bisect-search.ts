/** What a bisect of a red gate does next, given its verdicts so far. */
export type BisectStep =
  | { kind: "probe"; k: number }
  | { kind: "red_on_base" }
  | { kind: "culprit"; k: number };

/**
 * The search over k, the number of tasks (in merge order) a probe merges: n tasks whose whole
 * merge (k = n) is red. `verdicts` maps each judged k (0 is the base, nothing merged) to whether
 * the gate passed. The base is judged first: red there, no task is to blame. Then the gap between
 * the largest green k below the smallest red one is halved until it closes: the task at the red
 * end is the first whose merge turns the gate red. A gate that is not monotonic in k (a flaky one)
 * still ends the search at a green k followed by a red one.
 */
export function nextBisectStep(n: number, verdicts: ReadonlyMap<number, boolean>): BisectStep {
  if (!Number.isInteger(n) || n < 1) throw new Error(`a bisect needs at least one task, not ${n}`);
  const base = verdicts.get(0);
  if (base === undefined) return { kind: "probe", k: 0 };
  if (!base) return { kind: "red_on_base" };
  let hi = n;
  for (const [k, passed] of verdicts) if (!passed && k > 0 && k < hi) hi = k;
  let lo = 0;
  for (const [k, passed] of verdicts) if (passed && k > lo && k < hi) lo = k;
  if (hi - lo <= 1) return { kind: "culprit", k: hi };
  return { kind: "probe", k: Math.floor((lo + hi) / 2) };
}

/** About how many gate runs a bisect of n tasks takes: the base's, then one per halving. */
export function expectedGateRuns(n: number): number {
  return 1 + Math.ceil(Math.log2(Math.max(1, n)));
}
