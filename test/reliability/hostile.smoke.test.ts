import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { execa } from "execa";
import { describe, expect, it } from "vitest";
import { type CampaignResult, runSmoke } from "./smoke.js";

const ROOT = resolve(import.meta.dirname, "..", "..");

/** The figures every hostile trial must keep at 0, sandboxed or not. */
const ZERO = [
  "canaryInTermorchFiles",
  "canaryInTermorchCommits",
  "canaryInCliOutput",
  "goodTasksDamaged",
  "runsWithoutClearOutcome",
  "unexpectedOutcomes",
  "processesLeft",
  "userBranchDamage",
  "leftoversAfterClean",
];

/** `hostile.mjs --smoke --sandbox`, as runSmoke runs a campaign's smoke (its output attached). */
async function sandboxSmoke(): Promise<CampaignResult & { output: string }> {
  const dir = mkdtempSync(join(tmpdir(), "termorch-rel-smoke-"));
  try {
    const file = join(dir, "result.json");
    const r = await execa(
      process.execPath,
      [join(ROOT, "test", "reliability", "hostile.mjs"), "--smoke", "--sandbox", "--json", file],
      { reject: false, cwd: ROOT, all: true, timeout: 200_000 },
    );
    let result: CampaignResult;
    try {
      result = JSON.parse(readFileSync(file, "utf8")) as CampaignResult;
    } catch {
      throw new Error(`the hostile sandbox pass wrote no result (exit ${r.exitCode}):\n${r.all}`);
    }
    return { ...result, output: String(r.all) };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

describe("hostile agents campaign (smoke)", () => {
  it("gives every hostile agent a clear outcome, keeps the good tasks intact, leaks no canary and leaves nothing running", async () => {
    const r = await runSmoke("hostile");
    expect(r.failed, r.output).toEqual([]);
    expect(r.trials).toBeGreaterThanOrEqual(12);
    for (const k of ZERO) expect(r.figures[k], k).toBe(0);
    const outcomes = r.figures.outcomes as Record<string, string>;
    expect(outcomes["sigterm/a"]).toMatch(/^failed\/timeout/);
    expect(outcomes["segv/a"]).toMatch(/^failed\/signal/);
    expect(outcomes["canary/file"]).toMatch(
      /^failed\/validation: its changes hold the value of a secret .*; merge skipped$/,
    );
  }, 420_000);

  // The sandbox pass (issue 25), sandbox on: one case per mechanism (the hidden ~/.ssh, the agent's
  // own view of .git, its pid namespace, the network allowlist; issue 35's /proc/sys covered, the
  // seccomp filter's TIOCSTI and keyrings, other runs' folders hidden; links it plants for termorch
  // to follow after it), every check of each held.
  it("sandboxed, stops a hostile agent at the key, the user's branch, termorch's environment, a port off its allowlist, the kernel's settings, its terminal, the keyrings, an earlier run's artifacts and links it plants", async () => {
    const r = await sandboxSmoke();
    expect(r.failed, r.output).toEqual([]);
    for (const k of [...ZERO, "sandboxNotHeld", "allowedServerNotReached"]) expect(r.figures[k], k).toBe(0);
    const cases = r.figures.sandbox as Record<
      string,
      { on: { trials: number; held: number; total: number } }
    >;
    expect(Object.keys(cases).sort()).toEqual([
      "connect/a",
      "earlier/a",
      "kernel/a",
      "keyring/a",
      "links/b",
      "links/c",
      "movebranch/a",
      "procenv/a",
      "readkey/a",
      "tty/a",
    ]);
    for (const [name, { on }] of Object.entries(cases)) {
      expect(on.trials, name).toBe(1);
      expect(on.total, name).toBeGreaterThan(0);
      expect(on.held, `${name}: checks held with the sandbox on\n${r.output}`).toBe(on.total);
    }
  }, 220_000);
});
