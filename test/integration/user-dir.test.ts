import {
  chmodSync,
  chownSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { TEST_TMP, termorch, testFile, writeAssignments } from "./harness.js";

// Each case gets a TMPDIR of its own: termorch's per-user folder is `$TMPDIR/termorch-<uid>`.
const { socket, workspace } = testFile("user-dir");
const uid = process.getuid?.() ?? 0;
const tmps: string[] = [];
afterAll(() => {
  for (const t of tmps) rmSync(t, { recursive: true, force: true });
});

function freshTmp(): { tmp: string; userDir: string } {
  const tmp = mkdtempSync(join(TEST_TMP, "tmpdir-"));
  tmps.push(tmp);
  return { tmp, userDir: join(tmp, `termorch-${uid}`) };
}

async function runWith(tmp: string) {
  const { dir } = workspace();
  const file = writeAssignments(dir, [{ id: "a" }]);
  return termorch(["run", file], { socket, env: { TMPDIR: tmp } });
}

const modeOf = (path: string): number => lstatSync(path).mode & 0o777;

describe("termorch's per-user folder", () => {
  it("is created mode 0700 by the first run, and holds the workspace locks and the tmux config", async () => {
    const { tmp, userDir } = freshTmp();
    const r = await runWith(tmp);
    expect(r.exitCode, r.stderr).toBe(0);
    expect(modeOf(userDir)).toBe(0o700);
    expect(lstatSync(userDir).uid).toBe(uid);
    expect(readdirSync(userDir)).toEqual(expect.arrayContaining(["locks"]));
    expect(readdirSync(userDir).some((n) => n.startsWith("tmux-") && n.endsWith(".conf"))).toBe(true);
  });

  it("is tightened to 0700 when an older version left it readable by others", async () => {
    const { tmp, userDir } = freshTmp();
    mkdirSync(userDir);
    chmodSync(userDir, 0o755);
    const r = await runWith(tmp);
    expect(r.exitCode, r.stderr).toBe(0);
    expect(modeOf(userDir)).toBe(0o700);
  });

  it("is refused when it is a symlink, and nothing is written where it points", async () => {
    const { tmp, userDir } = freshTmp();
    const elsewhere = join(tmp, "elsewhere");
    mkdirSync(elsewhere, { mode: 0o700 });
    symlinkSync(elsewhere, userDir);
    const r = await runWith(tmp);
    expect(r.exitCode).toBe(2);
    expect(r.stderr).toContain(`termorch's per-user folder ${userDir} is a symbolic link, not a folder`);
    expect(r.stderr).toMatch(/remove it .* or point TMPDIR elsewhere/);
    expect(readdirSync(elsewhere)).toEqual([]);
  });

  it("is refused when other users can write to it", async () => {
    const { tmp, userDir } = freshTmp();
    mkdirSync(userDir);
    chmodSync(userDir, 0o777);
    const r = await runWith(tmp);
    expect(r.exitCode).toBe(2);
    expect(r.stderr).toContain(`${userDir} can be written by other users (mode 777)`);
    expect(r.stderr).toContain(`chmod 700 ${userDir}`);
    expect(readdirSync(userDir)).toEqual([]);
  });

  it("is refused when the name is taken by a file", async () => {
    const { tmp, userDir } = freshTmp();
    writeFileSync(userDir, "");
    const r = await runWith(tmp);
    expect(r.exitCode).toBe(2);
    expect(r.stderr).toContain(`${userDir} is not a folder`);
  });

  // Only root can give a folder to another user.
  it.skipIf(uid !== 0)("is refused when it belongs to another user", async () => {
    const { tmp, userDir } = freshTmp();
    mkdirSync(userDir, { mode: 0o700 });
    chownSync(userDir, 4242, 4242);
    const r = await runWith(tmp);
    expect(r.exitCode).toBe(2);
    expect(r.stderr).toContain(`${userDir} belongs to uid 4242, not to you (uid ${uid})`);
    expect(readdirSync(userDir)).toEqual([]);
  });
});
