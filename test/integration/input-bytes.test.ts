import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { Report } from "../../src/contract/report.js";
import { termorch, testFile, tmuxSessions, workspaceSnapshot, writeAssignments } from "./harness.js";

const { socket, workspace } = testFile("input-bytes");

/** `run` of an invalid input: exit 2 naming `where`, no stack trace, nothing started or touched. */
async function refusedRun(
  dir: string,
  repo: string,
  args: string[],
  where: RegExp[],
  env: Record<string, string> = {},
): Promise<void> {
  const before = workspaceSnapshot(repo);
  const result = await termorch(["run", ...args], { socket, env });
  expect(result.exitCode, result.stderr).toBe(2);
  for (const re of where) expect(result.stderr).toMatch(re);
  expect(result.stderr).not.toMatch(/internal error|\n\s+at /);
  expect(workspaceSnapshot(repo)).toBe(before);
  expect(tmuxSessions(socket)).toEqual([]);
  for (const d of ["logs", "status", ".termorch"]) expect(existsSync(join(dir, d))).toBe(false);
  const report = Report.parse(JSON.parse(readFileSync(join(dir, "execution_report.json"), "utf8")));
  expect(report.exit_code).toBe(2);
}

describe("input that is not what it seems: exit 2 naming the place", () => {
  it("refuses a NUL byte in a config redact pattern (was exit 70)", async () => {
    const { dir, repo } = workspace();
    const file = writeAssignments(dir, [{ id: "A" }]);
    const config = join(dir, "config.json");
    writeFileSync(config, JSON.stringify({ redact: ["fine-[0-9]+", "a\u0000b"] }));
    const validate = await termorch(["validate", file, "--config", config], { socket });
    expect(validate.exitCode).toBe(2);
    expect(validate.stderr).toMatch(/config\.json, field redact\[1\]: must not contain a NUL byte/);
    await refusedRun(dir, repo, [file, "--config", config], [/field redact\[1\]/, /NUL byte/]);
  });

  it("refuses invalid UTF-8 in an assignments file instead of running a changed command", async () => {
    const { dir, repo } = workspace();
    const file = writeAssignments(dir, [{ id: "A", success_criteria: { tests_cmd: "trXue" } }]);
    // "tr\x80ue": decoded leniently it became "tr\uFFFDue" and ran as something else.
    const bytes = Buffer.from(readFileSync(file, "utf8").replace("trXue", "tr\u0000ue"), "utf8");
    const at = bytes.indexOf(0);
    bytes[at] = 0x80;
    writeFileSync(file, bytes);
    const line = bytes.subarray(0, at).toString("latin1").split("\n").length;
    const validate = await termorch(["validate", file], { socket });
    expect(validate.exitCode).toBe(2);
    expect(validate.stderr).toContain(`assignments.json: not valid UTF-8: byte 0x80 at line ${line}, byte`);
    expect(validate.stderr).toContain(`(offset ${at} in the file)`);
    await refusedRun(dir, repo, [file], [/not valid UTF-8/, new RegExp(`line ${line}`)]);
  });

  it("refuses a lone surrogate escape (\\ud800), which would run as U+FFFD; accepts a surrogate pair", async () => {
    const { dir, repo } = workspace();
    const file = writeAssignments(dir, [{ id: "A", success_criteria: { tests_cmd: "echo PAIRED" } }]);
    const original = readFileSync(file, "utf8");
    writeFileSync(file, original.replace("PAIRED", "x\\ud800y"));
    const validate = await termorch(["validate", file], { socket });
    expect(validate.exitCode).toBe(2);
    expect(validate.stderr).toMatch(
      /field tasks\[0\]\.success_criteria\.tests_cmd: a \\uD800-\\uDFFF escape/,
    );
    await refusedRun(dir, repo, [file], [/tests_cmd/, /surrogate pair/]);
    // Every such string is named, a key with its surrogate escaped.
    const both = JSON.parse(original);
    both.tasks[0].env = { "X\udc00": "v", Y: "\ud800" };
    writeFileSync(file, JSON.stringify(both));
    const named = await termorch(["validate", file], { socket });
    expect(named.stderr).toContain("field tasks[0].env.X\\uDC00: a ");
    expect(named.stderr).toContain("field tasks[0].env.Y: a ");
    // An emoji written as its escaped pair is a character like any other.
    writeFileSync(file, original.replace("PAIRED", "\\ud83d\\ude00"));
    expect((await termorch(["validate", file], { socket })).exitCode).toBe(0);
  });

  it("refuses invalid UTF-8 in a config file and a UTF-16 file; accepts a UTF-8 byte order mark", async () => {
    const { dir } = workspace();
    const file = writeAssignments(dir, [{ id: "A" }]);
    const config = join(dir, "config.json");
    writeFileSync(
      config,
      Buffer.concat([Buffer.from('{"redact": ["caf'), Buffer.from([0xe9]), Buffer.from('"]}')]),
    );
    const bad = await termorch(["validate", file, "--config", config], { socket });
    expect(bad.exitCode).toBe(2);
    expect(bad.stderr).toMatch(/config\.json: not valid UTF-8: byte 0xE9 at line 1, byte 17 \(offset 16/);
    const text = readFileSync(file, "utf8");
    writeFileSync(file, Buffer.concat([Buffer.from([0xff, 0xfe]), Buffer.from(text, "utf16le")]));
    const utf16 = await termorch(["validate", file], { socket });
    expect(utf16.exitCode).toBe(2);
    expect(utf16.stderr).toMatch(/assignments\.json: encoded as UTF-16/);
    writeFileSync(file, Buffer.from(text, "utf16le"));
    expect((await termorch(["validate", file], { socket })).stderr).toMatch(/NUL byte at line 1.*UTF-16/);
    writeFileSync(file, `\uFEFF${text}`);
    expect((await termorch(["validate", file], { socket })).exitCode).toBe(0);
  });

  it("refuses a NUL byte in tests_cmd and allowed_paths", async () => {
    const { dir } = workspace();
    const file = writeAssignments(dir, [
      { id: "A", allowed_paths: ["src/\u0000"], success_criteria: { tests_cmd: "tr\u0000ue" } },
    ]);
    const result = await termorch(["validate", file], { socket });
    expect(result.exitCode).toBe(2);
    expect(result.stderr).toMatch(
      /field tasks\[0\]\.allowed_paths\[0\], task A: must not contain a NUL byte/,
    );
    expect(result.stderr).toMatch(
      /field tasks\[0\]\.success_criteria\.tests_cmd, task A: must not contain a NUL byte/,
    );
  });

  for (const name of [".", "..", "-x", ".hidden", "a/b", "x".repeat(65)]) {
    it(`refuses the tmux socket name ${JSON.stringify(name.slice(0, 8))} in the config and in TERMORCH_TMUX_SOCKET`, async () => {
      const { dir, repo } = workspace();
      const file = writeAssignments(dir, [{ id: "A" }]);
      const config = join(dir, "config.json");
      writeFileSync(config, JSON.stringify({ tmux: { socket: name } }));
      const validate = await termorch(["validate", file, "--config", config], { socket });
      expect(validate.exitCode).toBe(2);
      expect(validate.stderr).toMatch(/config\.json, field tmux\.socket: must be 1-64 letters/);
      await refusedRun(dir, repo, [file, "--config", config], [/field tmux\.socket/]);
      await refusedRun(dir, repo, [file], [/environment variable TERMORCH_TMUX_SOCKET=/, /not \. or \.\./], {
        TERMORCH_TMUX_SOCKET: name,
      });
    });
  }
});
