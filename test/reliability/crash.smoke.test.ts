import { describe, expect, it } from "vitest";
import { runSmoke } from "./smoke.js";

// CI's share of the crash campaign (test/reliability/crash.mjs --smoke): SIGKILLs at a task
// point, in a gate, inside a merge-stage redo and a bisect's fix, mid-merge, after the report (by `termorch run`,
// then resume), once in the daemon, once at random, and of the tmux server; every figure that
// must be 0 is.
describe("crash campaign (smoke)", () => {
  it("loses nothing, runs nothing beyond its attempts and leaves nothing behind", async () => {
    const r = await runSmoke("crash");
    expect(r.failed, r.output).toEqual([]);
    expect(r.trials).toBeGreaterThanOrEqual(8);
    for (const k of r.must_be_zero) expect(r.figures[k], `${k}\n${r.output}`).toBe(0);
    expect(Object.keys(r.figures.trials_by_point as object).length).toBeGreaterThanOrEqual(7);
  }, 420_000);
});
