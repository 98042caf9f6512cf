import { createHash } from "node:crypto";
import { mkdirSync, realpathSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { readReport, TEST_TMP, termorch, testFile, writeAssignments } from "./harness.js";

const { socket, workspace } = testFile("damaged-lock");

/** The lock file of a workspace, in the per-user folder the CLIs of this test file use (their TMPDIR). */
function lockFileOf(repo: string): string {
  const dir = join(TEST_TMP, `termorch-${process.getuid?.() ?? "user"}`, "locks");
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const key = createHash("sha256").update(realpathSync(repo)).digest("hex").slice(0, 32);
  return join(dir, `${key}.lock`);
}

describe("a damaged workspace lock", () => {
  // JSON, but not a holder: it names no live process, so it holds nothing.
  for (const [what, text] of [
    ["an empty object", "{}"],
    [
      "a holder whose pid is text",
      '{"pid":"12","pid_start":null,"host":"h","run_id":"x","run_dir":"/x","acquired_at":"t"}',
    ],
    ["a list", "[1,2]"],
  ] as const) {
    it(`is taken over like a stale one: ${what}`, async () => {
      const { dir, repo } = workspace();
      writeFileSync(lockFileOf(repo), text);
      const file = writeAssignments(dir, [{ id: "a" }]);
      const result = await termorch(["run", file], { socket });
      expect(result.stderr).not.toMatch(/locked by run/);
      expect(result.exitCode).toBe(0);
      expect(readReport(dir).summary.completed).toBe(true);
    });
  }
});
