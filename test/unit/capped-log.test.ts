import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { CappedLog } from "../../src/fs/capped-log.js";
import { Redactor } from "../../src/redact/redactor.js";

const dir = mkdtempSync(join(tmpdir(), "capped-log-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("CappedLog", () => {
  it("keeps a UTF-8 character whose bytes arrive in two writes", async () => {
    const path = join(dir, "split.log");
    const log = new CappedLog(path, Redactor.from([], []), 0);
    const bytes = Buffer.from("héllo €uro\n", "utf8");
    // é is 2 bytes (cut after its first), € is 3 (cut after its second).
    const e = bytes.indexOf(0xc3) + 1;
    const euro = bytes.indexOf(0xe2) + 2;
    log.write(bytes.subarray(0, e));
    log.write(bytes.subarray(e, euro));
    log.write(bytes.subarray(euro));
    await log.close();
    expect(readFileSync(path, "utf8")).toBe("héllo €uro\n");
  });

  it("still redacts a secret whose character is split at the cut", async () => {
    const path = join(dir, "secret.log");
    const log = new CappedLog(path, Redactor.from([], ["pässword-42"]), 0);
    const bytes = Buffer.from("key=pässword-42 end\n", "utf8");
    const cut = bytes.indexOf(0xc3) + 1;
    log.write(bytes.subarray(0, cut));
    log.write(bytes.subarray(cut));
    await log.close();
    expect(readFileSync(path, "utf8")).toBe("key=[REDACTED] end\n");
  });

  it("writes a character cut short at the end as U+FFFD", async () => {
    const path = join(dir, "cut.log");
    const log = new CappedLog(path, Redactor.from([], []), 0);
    log.write(Buffer.from([0x61, 0xe2, 0x82]));
    await log.close();
    expect(readFileSync(path, "utf8")).toBe("a\uFFFD");
  });
});
