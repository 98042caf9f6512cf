import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { SnapshotWriter } from "../../src/fs/state-store.js";

const dir = mkdtempSync(join(tmpdir(), "termorch-snap-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("SnapshotWriter", () => {
  it("coalesces bursts and always ends with the newest snapshot on disk", async () => {
    let n = 0;
    let taken = 0;
    const path = join(dir, "state.json");
    const writer = new SnapshotWriter(path, () => {
      taken++;
      return { n };
    });
    const saves: Promise<void>[] = [];
    for (let i = 0; i < 100; i++) {
      n = i;
      saves.push(writer.save());
    }
    await Promise.all(saves);
    expect(JSON.parse(readFileSync(path, "utf8"))).toEqual({ n: 99 });
    expect(taken).toBeLessThanOrEqual(3);
    n = 100;
    await writer.save();
    expect(JSON.parse(readFileSync(path, "utf8"))).toEqual({ n: 100 });
  });
});
