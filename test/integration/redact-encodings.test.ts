import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { filesContaining, ROOT, readReport, termorch, testFile, writeAssignments } from "./harness.js";

const { socket, workspace } = testFile("redact-enc");
const AGENT = join(ROOT, "test", "fixtures", "agents", "print-encoded.mjs");

/** A secret with every character that encoders rewrite: quote, backslash, non-ASCII, space, slash, plus. */
const SECRET = 'pa"ss\\wörd é/x+1';
const json = JSON.stringify(SECRET).slice(1, -1);
const ascii = json.replace(/[\u007f-\uffff]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`);
const FORMS = {
  raw: SECRET,
  json,
  json_ascii: ascii,
  json_ascii_upper: ascii.replace(/\\u[0-9a-f]{4}/g, (m) => `\\u${m.slice(2).toUpperCase()}`),
  uri: encodeURIComponent(SECRET),
  uri_lower: encodeURIComponent(SECRET).replace(/%[0-9A-F]{2}/g, (m) => m.toLowerCase()),
  form: new URLSearchParams({ v: SECRET }).toString().slice(2),
};

describe("redaction of encoded secrets", () => {
  it("keeps a secret's JSON-escaped and URL-encoded forms out of logs, status, report and ledger", async () => {
    const { dir } = workspace();
    // The forms really differ from each other and from the raw value: each is its own check.
    expect(new Set(Object.values(FORMS)).size).toBe(Object.keys(FORMS).length);
    const config = join(dir, "config.json");
    writeFileSync(
      config,
      JSON.stringify({ agents: { tty: { command: [process.execPath, AGENT], tty: true } } }),
    );
    const file = writeAssignments(
      dir,
      [
        { id: "plain", command: [process.execPath, AGENT], env: { EXIT: "1" } },
        { id: "pane", agent: "tty", command: undefined },
      ],
      { environment: { workspace_dir: "repo", env_vars: ["SERVICE_TOKEN"] } },
    );
    const result = await termorch(["run", file, "--config", config], {
      socket,
      env: { SERVICE_TOKEN: SECRET },
    });
    expect(result.exitCode).toBe(1);
    const report = readReport(dir);
    const plain = report.tasks.find((t) => t.id === "plain")!;
    const expected = Object.keys(FORMS)
      .map((k) => `${k}: [REDACTED]\n`)
      .join("");
    expect(readFileSync(join(dir, plain.logs.stdout!), "utf8")).toBe(
      `${expected}last: {"token":"[REDACTED]"}\n`,
    );
    expect(readFileSync(join(dir, plain.logs.stderr!), "utf8")).toBe(expected);
    expect(readFileSync(join(dir, "artifacts", "plain", "leak.json"), "utf8")).toBe(
      '{"token":"[REDACTED]"}\n',
    );
    // The pane's log holds each line too, redacted, whatever the terminal did to it.
    const pane = readFileSync(join(dir, report.tasks.find((t) => t.id === "pane")!.logs.stdout!), "utf8");
    expect(pane).toContain("json_ascii: [REDACTED]");
    expect(pane).toContain("form: [REDACTED]");
    for (const [name, form] of Object.entries(FORMS)) {
      const leaks = filesContaining(dir, form).filter((f) => !f.startsWith("repo/"));
      expect(leaks, `${name} form ${form}`).toEqual([]);
      expect(result.stdout + result.stderr).not.toContain(form);
    }
    // What was searched: the ledger and the status files are among the files above.
    expect(existsSync(join(dir, "events.jsonl"))).toBe(true);
    expect(existsSync(join(dir, "status", "plain.failed"))).toBe(true);
  });
});
