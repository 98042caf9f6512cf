import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { TEST_TMP, termorch, testFile, writeAssignments } from "./harness.js";

// A symlink planted where termorch writes must be refused, not followed (found by the isolation
// campaign, test/reliability/isolation.mjs): before, a run wrote its ledger, logs, status files
// and private folder through such links, and worktrees, locks, pooled worktrees and registry
// entries through links in the per-user folder.
const { socket, workspace } = testFile("planted-links");
const uid = process.getuid?.() ?? 0;
const tmps: string[] = [];
afterAll(() => {
  for (const t of tmps) rmSync(t, { recursive: true, force: true });
});

/** A run of one task whose run folder is `<ws>/run`, and an empty folder and a file to point links at. */
function setUp() {
  const ws = workspace();
  const tmp = mkdtempSync(join(TEST_TMP, "tmpdir-"));
  tmps.push(tmp);
  const victimDir = join(ws.dir, "victim-dir");
  mkdirSync(victimDir);
  const victimFile = join(ws.dir, "victim-file");
  writeFileSync(victimFile, "untouched\n");
  const file = writeAssignments(ws.dir, [{ id: "a", env: { WRITE: "a.txt=a" } }]);
  const runDir = join(ws.dir, "run");
  const run = () => termorch(["run", file, "--out", runDir], { socket, env: { TMPDIR: tmp } });
  return { ws, tmp, userDir: join(tmp, `termorch-${uid}`), victimDir, victimFile, runDir, run };
}

describe("a symlink planted where termorch writes", () => {
  it("as the run directory: refused, nothing written where it points", async () => {
    const s = setUp();
    symlinkSync(s.victimDir, s.runDir);
    const r = await s.run();
    expect(r.exitCode).toBe(2);
    expect(r.stderr).toContain(`${s.runDir} (a symbolic link to ${s.victimDir})`);
    expect(r.stderr).toContain("termorch does not write its run files through symbolic links");
    expect(readdirSync(s.victimDir)).toEqual([]);
    expect(existsSync(join(s.ws.repo, "a.txt"))).toBe(false);
  });

  it.each([
    ["events.jsonl", "file"],
    ["state.json", "file"],
    ["execution_report.json", "file"],
    ["logs", "dir"],
    ["status", "dir"],
    [".termorch", "dir"],
  ])("as %s in the run directory: refused, its target untouched", async (name, kind) => {
    const s = setUp();
    mkdirSync(s.runDir);
    const victim = kind === "dir" ? s.victimDir : s.victimFile;
    symlinkSync(victim, join(s.runDir, name));
    const r = await s.run();
    expect(r.exitCode).toBe(2);
    expect(r.stderr).toContain(`${join(s.runDir, name)} (a symbolic link to ${victim})`);
    expect(readdirSync(s.victimDir)).toEqual([]);
    expect(readFileSync(s.victimFile, "utf8")).toBe("untouched\n");
  });

  it.each(["locks", "pool", "worktrees", "runs"])(
    "as the per-user folder's %s: refused, nothing written where it points",
    async (name) => {
      const s = setUp();
      mkdirSync(s.userDir, { mode: 0o700 });
      symlinkSync(s.victimDir, join(s.userDir, name));
      const r = await s.run();
      expect(r.exitCode).toBe(2);
      expect(r.stderr).toContain(
        `termorch's per-user folder ${s.userDir} holds ${join(s.userDir, name)}, which is a symbolic link (to ${s.victimDir})`,
      );
      expect(readdirSync(s.victimDir)).toEqual([]);
      expect(existsSync(join(s.runDir, "state.json"))).toBe(false);
    },
  );
});
