import { execFileSync } from "node:child_process";
import { existsSync, symlinkSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { termorch, testFile, tmuxSessions, workspaceSnapshot, writeAssignments } from "./harness.js";

const { socket, workspace } = testFile("input-not-a-file");

// Found by the input campaign (test/reliability/input.mjs, category "files": "assignments is
// fifo", fast-check path 9:0:0 of seed 1 --smoke): a FIFO was read until a writer came, so
// validate and run hung for good; /dev/zero would be read until memory ran out.
describe("an input path that is not a regular file: exit 2 at once, naming it", () => {
  it("refuses a FIFO as the assignments file (validate and run)", async () => {
    const { dir, repo } = workspace();
    const fifo = join(dir, "assignments.json");
    execFileSync("mkfifo", [fifo]);
    const before = workspaceSnapshot(repo);
    for (const command of ["validate", "run"]) {
      const r = await termorch([command, fifo], { socket, timeoutMs: 20_000 });
      expect(r.exitCode, r.stderr).toBe(2);
      expect(r.stderr).toContain(`${fifo}: assignments file is a named pipe (FIFO), not a file`);
      expect(r.stderr).not.toMatch(/internal error|\n\s+at /);
    }
    expect(workspaceSnapshot(repo)).toBe(before);
    expect(tmuxSessions(socket)).toEqual([]);
    expect(existsSync(join(dir, "logs"))).toBe(false);
  });

  it("refuses a FIFO as the config file and a device as the assignments file", async () => {
    const { dir } = workspace();
    const file = writeAssignments(dir, [{ id: "A" }]);
    const fifo = join(dir, "config.json");
    execFileSync("mkfifo", [fifo]);
    const viaConfig = await termorch(["validate", file, "--config", fifo], { socket, timeoutMs: 20_000 });
    expect(viaConfig.exitCode, viaConfig.stderr).toBe(2);
    expect(viaConfig.stderr).toContain(`${fifo}: config file is a named pipe (FIFO), not a file`);
    const zero = join(dir, "zero.json");
    symlinkSync("/dev/zero", zero);
    const device = await termorch(["validate", zero], { socket, timeoutMs: 20_000 });
    expect(device.exitCode, device.stderr).toBe(2);
    expect(device.stderr).toContain(`${zero}: assignments file is a device, not a file`);
  });
});
