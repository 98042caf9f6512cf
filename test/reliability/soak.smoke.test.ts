import { describe, expect, it } from "vitest";
import { runSmoke } from "./smoke.js";

describe("soak campaign (smoke)", () => {
  it("answers every dropped file, keeps every ledger whole, leaks nothing, and stays flat", async () => {
    const r = await runSmoke("soak");
    expect(r.failed, r.output).toEqual([]);
    expect(r.trials).toBeGreaterThan(5);
    for (const k of [
      "unanswered_runs",
      "wrong_answers",
      "ledger_gaps",
      "leaked_sessions",
      "leaked_worktrees",
      "leaked_processes",
      "leaked_temp_files",
      "rss_growth_beyond_rule",
      "fd_growth_beyond_rule",
    ])
      expect(r.figures[k], k).toBe(0);
  }, 420_000);
});
