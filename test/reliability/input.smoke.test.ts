import { describe, expect, it } from "vitest";
import { runSmoke } from "./smoke.js";

describe("reliability campaign: malformed input (smoke)", () => {
  it("answers every generated input with its documented exit code, its place, and no trace, hang or side effect", async () => {
    const r = await runSmoke("input");
    expect(r.failed, r.output).toEqual([]);
    expect(r.trials).toBeGreaterThan(150);
    const f = r.figures as {
      by_command: Record<string, number>;
      validate_exit: Record<string, number>;
      run_exit: Record<string, number>;
    };
    // Every command that reads these files was reached, and both answers occurred.
    for (const c of ["validate", "run", "run_launched", "config_flag", "config_env", "daemon", "real_binary"])
      expect(f.by_command[c], c).toBeGreaterThan(0);
    expect(f.validate_exit["0"]).toBeGreaterThan(0);
    expect(f.validate_exit["2"]).toBeGreaterThan(0);
    expect(f.run_exit["2"]).toBeGreaterThan(0);
  }, 420_000);
});
