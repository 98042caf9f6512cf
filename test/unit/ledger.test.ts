import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { canonicalJson } from "../../src/ledger/canonical.js";
import { Ledger, verifyLedger } from "../../src/ledger/ledger.js";
import { Redactor } from "../../src/redact/redactor.js";

const dir = mkdtempSync(join(tmpdir(), "termorch-ledger-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

async function ledgerWith(n: number, name: string) {
  const path = join(dir, name);
  const ledger = await Ledger.open(path, Redactor.from([], ["topsecret"]));
  await Promise.all(
    Array.from({ length: n }, (_, i) =>
      ledger.append(
        "task.launched",
        { attempt: i, session: null, logs: null, note: "key topsecret" },
        `T${i}`,
      ),
    ),
  );
  return path;
}

describe("ledger", () => {
  it("canonical JSON sorts keys at every level", () => {
    expect(canonicalJson({ b: 1, a: { d: [1, { z: 1, y: 2 }], c: null } })).toBe(
      '{"a":{"c":null,"d":[1,{"y":2,"z":1}]},"b":1}',
    );
  });

  it("appends a verifiable chain, in order, redacted", async () => {
    const path = await ledgerWith(50, "ok.jsonl");
    expect(await verifyLedger(path)).toEqual({ ok: true, events: 50 });
    const lines = readFileSync(path, "utf8")
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l));
    expect(lines.map((e) => e.seq)).toEqual(Array.from({ length: 50 }, (_, i) => i));
    expect(lines[0].data.note).toBe("key [REDACTED]");
  });

  it("continues the chain when reopened", async () => {
    const path = await ledgerWith(3, "reopen.jsonl");
    const again = await Ledger.open(path, Redactor.from([], []));
    await again.append("run.resumed", { pid: 1, tasks: [] });
    expect(await verifyLedger(path)).toEqual({ ok: true, events: 4 });
  });

  it("names the first broken line of a tampered ledger", async () => {
    const path = await ledgerWith(5, "tampered.jsonl");
    const lines = readFileSync(path, "utf8").split("\n");
    lines[2] = lines[2]!.replace('"attempt":2', '"attempt":9');
    writeFileSync(path, lines.join("\n"));
    expect(await verifyLedger(path)).toMatchObject({
      ok: false,
      line: 3,
      seq: 2,
      problem: expect.stringMatching(/altered/),
    });
  });

  it("detects a removed line and a torn last line", async () => {
    const path = await ledgerWith(5, "removed.jsonl");
    const lines = readFileSync(path, "utf8").split("\n");
    writeFileSync(path, [...lines.slice(0, 1), ...lines.slice(2)].join("\n"));
    expect(await verifyLedger(path)).toMatchObject({ ok: false, line: 2 });
    const torn = await ledgerWith(2, "torn.jsonl");
    writeFileSync(torn, `${readFileSync(torn, "utf8")}{"schema_ver`);
    expect(await verifyLedger(torn)).toMatchObject({
      ok: false,
      line: 3,
      problem: expect.stringMatching(/torn/),
    });
  });
});

describe("ledger recovery", () => {
  it("drops a torn last line on open and continues a valid chain", async () => {
    const path = await ledgerWith(3, "recover.jsonl");
    writeFileSync(path, `${readFileSync(path, "utf8")}{"schema_version":1,"se`);
    const again = await Ledger.open(path, Redactor.from([], []));
    await again.append("run.resumed", { pid: 1, tasks: [] });
    expect(await verifyLedger(path)).toEqual({ ok: true, events: 4 });
  });
});
