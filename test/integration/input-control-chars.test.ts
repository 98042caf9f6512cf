import { describe, expect, it } from "vitest";
import { termorch, testFile, writeAssignments } from "./harness.js";

const { socket, workspace } = testFile("input-control-chars");

// biome-ignore lint/suspicious/noControlCharactersInRegex: finding them is the point
const RAW = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/;
const TITLE = "\u001b]0;pwned\u0007";

// Found by the input campaign (test/reliability/input.mjs: ids and operator commands): an id or
// run id with escape sequences was quoted raw in the error message, so `termorch validate` of
// someone's file could set the terminal's title, colours or clipboard.
describe("control characters quoted from the input are shown as escapes", () => {
  it("validate and run: a task id with an OSC sequence", async () => {
    const { dir } = workspace();
    const file = writeAssignments(dir, [{ id: `a${TITLE}` }]);
    for (const command of ["validate", "run"]) {
      const r = await termorch([command, file], { socket });
      expect(r.exitCode, r.stderr).toBe(2);
      expect(r.stderr).not.toMatch(RAW);
      expect(r.stderr).toContain("task a\\u001b]0;pwned\\u0007");
    }
  });

  it("status, logs and commander's own errors: a run id and an option with escapes", async () => {
    const status = await termorch(["status", `r${TITLE}`], { socket });
    expect(status.exitCode).toBe(2);
    expect(status.stderr).toContain('no run "r\\u001b]0;pwned\\u0007"');
    const logs = await termorch(["logs", "a", "--run", `\u001b[2J`], { socket });
    expect(logs.exitCode).toBe(2);
    const option = await termorch(["status", `--x${TITLE}`], { socket });
    expect(option.exitCode).toBe(2);
    for (const r of [status, logs, option]) expect(r.stderr).not.toMatch(RAW);
  });
});

// A quoted 1 MB id or path printed whole buried the message (the input campaign's 1 MB strings).
describe("a very long value quoted in a message", () => {
  it("loses its middle: the place and what is wrong stay", async () => {
    const { dir } = workspace();
    const file = writeAssignments(dir, [{ id: "a".repeat(1_000_000) }]);
    const r = await termorch(["validate", file], { socket });
    expect(r.exitCode).toBe(2);
    expect(r.stderr.length).toBeLessThan(5000);
    expect(r.stderr).toContain("field tasks[0].id");
    expect(r.stderr).toMatch(/…\(\d+ characters\)…a+: must match/);
  });
});
