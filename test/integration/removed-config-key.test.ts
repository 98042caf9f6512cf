import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { readReport, termorch, testFile, tmuxSessions, writeAssignments } from "./harness.js";

const { socket, workspace } = testFile("removed-key");

const WARNING = "tmux.control_mode was removed";

describe("a config that still sets the removed tmux.control_mode", () => {
  it("runs as without it, and says once on stderr that the key is ignored and should go", async () => {
    const { dir } = workspace();
    const config = join(dir, "config.json");
    writeFileSync(config, JSON.stringify({ tmux: { control_mode: true } }));
    const file = writeAssignments(dir, [{ id: "a" }, { id: "b" }]);
    const result = await termorch(["run", file, "--config", config, "--json"], { socket });
    expect(result.exitCode, result.stderr).toBe(0);
    expect(JSON.parse(result.stdout).summary.completed).toBe(true);
    expect(readReport(dir).summary.completed).toBe(true);
    const warnings = result.stderr.split("\n").filter((l) => l.includes(WARNING));
    expect(warnings).toEqual([
      `termorch: warning: config ${config}: ${WARNING} (tmux <= 3.5 could crash with it) and is ignored; delete the key`,
    ]);
    // No control-mode client was started: it would have left a termorch-control-* placeholder.
    expect(tmuxSessions(socket).filter((s) => s.startsWith("termorch-control-"))).toEqual([]);
  });

  it("is still valid for `termorch validate`, and a config without it gets no warning", async () => {
    const { dir } = workspace();
    const config = join(dir, "config.json");
    writeFileSync(config, JSON.stringify({ tmux: { control_mode: false } }));
    const file = writeAssignments(dir, [{ id: "a" }]);
    expect((await termorch(["validate", file, "--config", config], { socket })).exitCode).toBe(0);
    writeFileSync(config, JSON.stringify({ tmux: {} }));
    const result = await termorch(["run", file, "--config", config], { socket });
    expect(result.exitCode, result.stderr).toBe(0);
    expect(result.stderr).not.toContain(WARNING);
  });
});
