import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { pastRunsDir } from "../../src/fs/names.js";
import { pastRunDirs, registeredRuns, registerRun, unregisterRun } from "../../src/fs/registry.js";

// The past runs' list (sandboxes hide those folders): kept by unregisterRun, dropped once a folder
// holds no run. The per-user folder follows TMPDIR, set here to a folder of this test.
const root = mkdtempSync(join(tmpdir(), "termorch-past-runs-"));
const saved = process.env.TMPDIR;
process.env.TMPDIR = join(root, "tmp");
mkdirSync(process.env.TMPDIR);
const env = { TERMORCH_REGISTRY: join(root, "registry") };
afterAll(() => {
  // Unset before: unset again (assigning undefined would set the string "undefined").
  if (saved === undefined) delete process.env.TMPDIR;
  else process.env.TMPDIR = saved;
  rmSync(root, { recursive: true, force: true });
});

describe("the past runs' list", () => {
  it("keeps an unregistered run's folder while it holds a run, under one entry per folder", async () => {
    const runDir = join(root, "run");
    mkdirSync(runDir);
    writeFileSync(join(runDir, "state.json"), "{}");
    const entry = {
      run_id: "r1",
      run_dir: runDir,
      socket: "s",
      pid: 1,
      started_at: new Date().toISOString(),
    };
    await registerRun(entry, env);
    expect(await pastRunDirs()).toEqual([]);
    await unregisterRun("r1", env);
    expect(await registeredRuns(env)).toEqual([]);
    expect(await pastRunDirs()).toEqual([runDir]);
    // The same id again, in the same folder: still one entry.
    await registerRun(entry, env);
    await unregisterRun("r1", env);
    expect(readdirSync(pastRunsDir())).toHaveLength(1);
    // Its run files gone: the entry goes too.
    rmSync(join(runDir, "state.json"));
    expect(await pastRunDirs()).toEqual([]);
    expect(readdirSync(pastRunsDir())).toEqual([]);
  });
});
