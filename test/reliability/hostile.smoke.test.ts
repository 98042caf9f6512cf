import { describe, expect, it } from "vitest";
import { runSmoke } from "./smoke.js";

describe("hostile agents campaign (smoke)", () => {
  it("gives every hostile agent a clear outcome, keeps the good tasks intact, leaks no canary and leaves nothing running", async () => {
    const r = await runSmoke("hostile");
    expect(r.failed, r.output).toEqual([]);
    expect(r.trials).toBeGreaterThanOrEqual(12);
    for (const k of [
      "canaryInTermorchFiles",
      "canaryInTermorchCommits",
      "canaryInCliOutput",
      "goodTasksDamaged",
      "runsWithoutClearOutcome",
      "unexpectedOutcomes",
      "processesLeft",
      "userBranchDamage",
      "leftoversAfterClean",
    ])
      expect(r.figures[k], k).toBe(0);
    const outcomes = r.figures.outcomes as Record<string, string>;
    expect(outcomes["sigterm/a"]).toMatch(/^failed\/timeout/);
    expect(outcomes["segv/a"]).toMatch(/^failed\/signal/);
    expect(outcomes["canary/file"]).toMatch(
      /^failed\/validation: its changes hold the value of a secret .*; merge skipped$/,
    );
  }, 420_000);
});
