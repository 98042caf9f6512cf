// `termorch validate` on input that is not what it seems: exit 2 naming the place, and what is
// fine accepted. That `run` refuses the same input before anything starts (no attempt, nothing
// written but the report) is tested in the middle tier, in-process: test/middle/invalid-input.test.ts.
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { termorch, testFile, writeAssignments } from "./harness.js";

const { socket, workspace } = testFile("input-bytes");

describe("input that is not what it seems: exit 2 naming the place", () => {
  it("refuses a NUL byte in a config redact pattern (was exit 70)", async () => {
    const { dir } = workspace();
    const file = writeAssignments(dir, [{ id: "A" }]);
    const config = join(dir, "config.json");
    writeFileSync(config, JSON.stringify({ redact: ["fine-[0-9]+", "a\u0000b"] }));
    const validate = await termorch(["validate", file, "--config", config], { socket });
    expect(validate.exitCode).toBe(2);
    expect(validate.stderr).toMatch(/config\.json, field redact\[1\]: must not contain a NUL byte/);
    expect(validate.stderr).not.toMatch(/internal error|\n\s+at /);
  });

  it("refuses invalid UTF-8 in an assignments file instead of running a changed command", async () => {
    const { dir } = workspace();
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
  });

  it("refuses a lone surrogate escape (\\ud800), which would run as U+FFFD; accepts a surrogate pair", async () => {
    const { dir } = workspace();
    const file = writeAssignments(dir, [{ id: "A", success_criteria: { tests_cmd: "echo PAIRED" } }]);
    const original = readFileSync(file, "utf8");
    writeFileSync(file, original.replace("PAIRED", "x\\ud800y"));
    const validate = await termorch(["validate", file], { socket });
    expect(validate.exitCode).toBe(2);
    expect(validate.stderr).toMatch(
      /field tasks\[0\]\.success_criteria\.tests_cmd: a \\uD800-\\uDFFF escape/,
    );
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
    writeFileSync(file, `\uFEFF${text}`);
    expect((await termorch(["validate", file], { socket })).exitCode).toBe(0);
  });

  it("refuses a tmux socket name that is no plain name, in the config", async () => {
    const { dir } = workspace();
    const file = writeAssignments(dir, [{ id: "A" }]);
    const config = join(dir, "config.json");
    writeFileSync(config, JSON.stringify({ tmux: { socket: ".." } }));
    const validate = await termorch(["validate", file, "--config", config], { socket });
    expect(validate.exitCode).toBe(2);
    expect(validate.stderr).toMatch(/config\.json, field tmux\.socket: must be 1-64 letters/);
  });
});
