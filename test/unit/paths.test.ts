import { mkdirSync, mkdtempSync, rmSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { compactTimestamp, LogNames } from "../../src/fs/log-names.js";
import { resolveInside } from "../../src/fs/paths.js";

const root = mkdtempSync(join(tmpdir(), "termorch-paths-"));
const ws = join(root, "ws");
mkdirSync(join(ws, "sub"), { recursive: true });
symlinkSync(root, join(ws, "escape"));
afterAll(() => rmSync(root, { recursive: true, force: true }));

describe("path checks", () => {
  it("is exact about prefixes: the root itself is inside, a sibling sharing its name's start is not", () => {
    expect(resolveInside(ws, ".")).toEqual({ path: ws });
    expect(resolveInside(ws, "../wsx/file")).toHaveProperty("error");
    expect(resolveInside(ws, "..")).toHaveProperty("error");
    expect(resolveInside(ws, "sub/../sub/y")).toEqual({ path: join(ws, "sub/y") });
  });

  it("refuses .. and symlink escapes, accepts paths that do not exist yet", () => {
    expect(resolveInside(ws, "sub/x.md")).toEqual({ path: join(ws, "sub/x.md") });
    expect(resolveInside(ws, "../x")).toHaveProperty("error");
    expect(resolveInside(ws, "/etc/passwd")).toHaveProperty("error");
    const viaLink = resolveInside(ws, "escape/other");
    expect("error" in viaLink && viaLink.error).toMatch(/symlink/);
  });
});

describe("log names", () => {
  it("uses the compact UTC timestamp and stays unique per task", () => {
    expect(compactTimestamp(Date.UTC(2026, 0, 2, 3, 4, 5, 6))).toBe("20260102T030405006Z");
    const names = new LogNames(ws);
    const t = Date.UTC(2026, 0, 1);
    expect(names.next("echo agent", t)).toBe("echo_agent-20260101T000000000Z");
    expect(names.next("echo agent", t)).toBe("echo_agent-20260101T000000001Z");
  });
});
