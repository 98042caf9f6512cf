import { createHash } from "node:crypto";
import { mkdirSync, realpathSync, utimesSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { readReport, TEST_TMP, termorch, testFile, writeAssignments } from "./harness.js";

// Found by the crash campaign (test/reliability/crash.mjs, seed 13013, trial 46, under load): a
// daemon SIGKILLed between creating a lock file and writing its holder into it left the file
// empty, and every later taker waited for that holder's line for ever (the restarted daemon
// never answered). A lock file is now never seen empty while held, and one left empty by a
// process that died is taken over like a stale lock. The workspace's lock is the middle tier's
// (test/middle/workspace-lock.test.ts); here the worktree pool's, which needs git.

const { socket, workspace } = testFile("empty-lock");

/** The per-user locks folder the CLIs of this test file use (their TMPDIR). */
function locksDir(): string {
  const dir = join(TEST_TMP, `termorch-${process.getuid?.() ?? "user"}`, "locks");
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  return dir;
}

const keyOf = (repo: string): string =>
  createHash("sha256").update(realpathSync(repo)).digest("hex").slice(0, 32);

/** An empty lock file, as a process killed right after creating it leaves it (a while ago). */
function emptyLock(name: string): void {
  const file = join(locksDir(), name);
  writeFileSync(file, "");
  const past = new Date(Date.now() - 60_000);
  utimesSync(file, past, past);
}

describe("a lock file left empty by a process killed while taking it", () => {
  it("does not hold the worktree pool: the run's worktrees still go into it and come out", async () => {
    const { dir, repo } = workspace();
    emptyLock(`pool-${keyOf(repo)}.lock`);
    // b depends on a: a's worktree goes into the pool, b's is taken from it (both under its lock).
    const file = writeAssignments(dir, [{ id: "a" }, { id: "b", dependencies: ["a"] }]);
    const result = await termorch(["run", file], { socket, timeoutMs: 40_000 });
    expect(result.exitCode).toBe(0);
    expect(readReport(dir).summary.completed).toBe(true);
  }, 60_000);
});
