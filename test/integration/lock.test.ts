import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { execa } from "execa";
import { afterAll, describe, expect, it } from "vitest";
import { LockedError } from "../../src/errors.js";
import { acquireLock } from "../../src/fs/lock.js";
import { lockPath } from "../../src/fs/names.js";

const dir = mkdtempSync(join(tmpdir(), "termorch-lock-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("workspace lock", () => {
  it("is exclusive, names its holder, and is free again once released", async () => {
    const lock = await acquireLock(dir, { run_id: "first", run_dir: "/runs/first" });
    await expect(acquireLock(dir, { run_id: "second", run_dir: "/runs/second" })).rejects.toThrow(
      LockedError,
    );
    await expect(acquireLock(dir, { run_id: "second", run_dir: "/runs/second" })).rejects.toThrow(
      /locked by run first \(pid \d+/,
    );
    await lock.release();
    const again = await acquireLock(dir, { run_id: "second", run_dir: "/runs/second" });
    await again.release();
  });

  it("takes over the lock of a dead process", async () => {
    const dead = await execa("bash", ["-c", "echo $$"]);
    const pid = Number(dead.stdout);
    writeFileSync(
      lockPath(dir),
      JSON.stringify({
        pid,
        pid_start: null,
        host: (await import("node:os")).hostname(),
        run_id: "ghost",
        run_dir: "/x",
        acquired_at: "2026-01-01T00:00:00Z",
      }),
    );
    const lock = await acquireLock(dir, { run_id: "heir", run_dir: "/runs/heir" });
    expect(JSON.parse(readFileSync(lockPath(dir), "utf8"))).toMatchObject({
      run_id: "heir",
      pid: process.pid,
    });
    await lock.release();
  });

  it("does not mistake a recycled pid for the holder", async () => {
    writeFileSync(
      lockPath(dir),
      JSON.stringify({
        pid: process.pid,
        pid_start: "1",
        host: (await import("node:os")).hostname(),
        run_id: "old",
        run_dir: "/x",
        acquired_at: "2026-01-01T00:00:00Z",
      }),
    );
    const lock = await acquireLock(dir, { run_id: "new", run_dir: "/runs/new" });
    expect(JSON.parse(readFileSync(lockPath(dir), "utf8")).run_id).toBe("new");
    await lock.release();
  });

  it("waits for the holder with wait: true", async () => {
    const first = await acquireLock(dir, { run_id: "a", run_dir: "/a" });
    const waiting = acquireLock(dir, { run_id: "b", run_dir: "/b" }, { wait: true, pollMs: 20 });
    let got = false;
    void waiting.then(() => {
      got = true;
    });
    await new Promise((r) => setImmediate(r));
    expect(got).toBe(false);
    await first.release();
    const second = await waiting;
    expect(JSON.parse(readFileSync(lockPath(dir), "utf8")).run_id).toBe("b");
    await second.release();
  });
});
