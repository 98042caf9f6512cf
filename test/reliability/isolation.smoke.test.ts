import { describe, expect, it } from "vitest";
import { runSmoke } from "./smoke.js";

describe("isolation campaign (smoke)", () => {
  it("lets no other user read termorch's private files or reach its tmux server, and follows no planted symlink", async () => {
    const r = await runSmoke("isolation");
    expect(r.failed, r.output).toEqual([]);
    expect(r.trials).toBeGreaterThan(0);
    // setpriv is part of util-linux; without it the other-user checks cannot run at all.
    expect(r.figures.skipped, r.output).toBeUndefined();
    expect(r.figures.owner_only_paths_checked).toBeGreaterThan(10);
    expect(r.figures.symlink_cases).toBeGreaterThanOrEqual(14);
    for (const k of [
      "blind_probes",
      "readable_by_others",
      "foreign_attach_success",
      "followed_symlinks",
      "symlinks_not_refused",
    ])
      expect(r.figures[k], k).toBe(0);
  }, 420_000);
});
