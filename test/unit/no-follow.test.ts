import {
  chmodSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import {
  copyFresh,
  kindInside,
  Refused,
  readInside,
  resolveInside,
  walkInside,
  writeFresh,
} from "../../src/fs/no-follow.js";
import { redactFile } from "../../src/redact/redact-file.js";
import { Redactor } from "../../src/redact/redactor.js";

// src/fs/no-follow.ts: what termorch reads and writes where an agent could write (issue 35).
const base = mkdtempSync(join(tmpdir(), "termorch-nofollow-"));
afterAll(() => rmSync(base, { recursive: true, force: true }));
let n = 0;
/** A root an agent could write, and a victim file and folder outside it. */
function world() {
  const dir = join(base, String(n++));
  const root = join(dir, "root");
  mkdirSync(root, { recursive: true });
  mkdirSync(join(dir, "victim-dir"));
  writeFileSync(join(dir, "victim"), "untouched\n");
  return { dir, root, victim: join(dir, "victim"), victimDir: join(dir, "victim-dir") };
}

describe("no-follow", () => {
  it("writeFresh replaces a link at the name, and refuses a linked folder on the way", () => {
    const w = world();
    symlinkSync(w.victim, join(w.root, "changes.patch"));
    writeFresh(w.root, "changes.patch", "patch\n");
    expect(readFileSync(w.victim, "utf8")).toBe("untouched\n");
    expect(lstatSync(join(w.root, "changes.patch")).isFile()).toBe(true);
    symlinkSync(w.victimDir, join(w.root, "files"));
    expect(() => writeFresh(w.root, "files/a.txt", "a")).toThrow(Refused);
    expect(() => writeFresh(w.root, "../escape", "a")).toThrow(/leads outside/);
    expect(readFileSync(w.victim, "utf8")).toBe("untouched\n");
  });

  it("readInside and copyFresh read no link, at the end or on the way", () => {
    const w = world();
    symlinkSync(w.victim, join(w.root, "handoff.md"));
    expect(() => readInside(w.root, "handoff.md")).toThrow(/symbolic link/);
    mkdirSync(join(w.root, "moved"));
    symlinkSync(w.dir, join(w.root, "via"));
    expect(() => readInside(w.root, "via/victim")).toThrow(
      /^via\/victim: a symbolic link on its way .*\(via\)$/,
    );
    writeFileSync(join(w.root, "real.txt"), "real\n");
    copyFresh(w.root, "real.txt", w.root, "files/real.txt");
    expect(readFileSync(join(w.root, "files", "real.txt"), "utf8")).toBe("real\n");
    expect(() => copyFresh(w.root, "handoff.md", w.root, "files/h.md")).toThrow(Refused);
  });

  it("walkInside names links and files apart and never enters a linked folder", () => {
    const w = world();
    writeFileSync(join(w.victimDir, "secret"), "s");
    symlinkSync(w.victimDir, join(w.root, "dir"));
    mkdirSync(join(w.root, "sub"));
    writeFileSync(join(w.root, "sub", "a"), "a");
    expect(walkInside(w.root)).toEqual({ files: ["sub/a"], folders: ["sub"], links: ["dir"], others: [] });
    expect(kindInside(w.root, "dir/secret")).toBe("link");
    expect(kindInside(w.root, "sub/a/b")).toBe("missing");
  });

  it("resolveInside takes a link that stays inside and refuses one that leaves", () => {
    const w = world();
    writeFileSync(join(w.root, "a.txt"), "a");
    symlinkSync("a.txt", join(w.root, "b.txt"));
    symlinkSync(w.victim, join(w.root, "c.txt"));
    symlinkSync(join(w.dir, "nowhere"), join(w.root, "d.txt"));
    expect(resolveInside(w.root, "b.txt")).toBe("a.txt");
    expect(() => resolveInside(w.root, "c.txt")).toThrow(/leads outside/);
    expect(() => resolveInside(w.root, "d.txt")).toThrow(/symbolic link/);
  });

  it("redactFile leaves a link's target alone and redacts a read-only file by replacing it", async () => {
    const w = world();
    const key =
      "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW\n-----END OPENSSH PRIVATE KEY-----\n";
    writeFileSync(w.victim, key);
    symlinkSync(w.victim, join(w.root, "key"));
    const redactor = Redactor.from([], []);
    expect(await redactFile(join(w.root, "key"), redactor)).toBe(false);
    expect(readFileSync(w.victim, "utf8")).toBe(key);
    writeFileSync(join(w.root, "ro"), key);
    chmodSync(join(w.root, "ro"), 0o444);
    expect(await redactFile(join(w.root, "ro"), redactor)).toBe(true);
    expect(readFileSync(join(w.root, "ro"), "utf8")).not.toContain("b3BlbnNzaC1rZXktdjEAAAAABG5vbmU");
  });
});
