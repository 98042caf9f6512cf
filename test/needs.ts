import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { describe } from "vitest";

/**
 * Tools some suites need beyond Node, tmux, git and perl (the README's fresh machine). Without
 * one, such a suite skips and says, in one line, which Debian package would run it; with
 * `CI=true` (as .ci/run sets) a missing tool fails the suite instead, so CI never passes by
 * skipping. `TERMORCH_TEST_WITHOUT=redis-server,chromium,pytest,bwrap` makes a machine that has them
 * behave as one without (to check the skips).
 */
export type Need = "redis-server" | "chromium" | "pytest" | "bwrap";

const PACKAGES: Record<Need, string> = {
  "redis-server": "redis-server",
  chromium: "chromium",
  pytest: "python3-pytest python3-freezegun",
  bwrap: "bubblewrap",
};

/** Debian's chromium, or the binary `$CHROMIUM` names. */
export const CHROMIUM =
  process.env.CHROMIUM ??
  ["/usr/bin/chromium", "/usr/bin/chromium-browser"].find((p) => existsSync(p)) ??
  "/usr/bin/chromium";

const runs = (command: string, args: string[]): boolean =>
  spawnSync(command, args, { stdio: "ignore", timeout: 10_000 }).status === 0;

const PRESENT: Record<Need, () => boolean> = {
  "redis-server": () => runs("redis-server", ["--version"]),
  chromium: () => existsSync(CHROMIUM),
  pytest: () => runs("/usr/bin/python3", ["-c", "import pytest, freezegun"]),
  // Able to make the sandbox, not only installed.
  bwrap: () => runs("bwrap", ["--ro-bind", "/", "/", "--unshare-pid", "--unshare-net", "--", "true"]),
};

const known = new Map<Need, boolean>();

/**
 * Whether this machine has `need` for `what` (a suite, named as its file and describe say it).
 * Without it: one line on stderr and false, or, with CI=true, an error.
 */
export function has(need: Need, what: string): boolean {
  const withheld = (process.env.TERMORCH_TEST_WITHOUT ?? "").split(",").includes(need);
  if (!known.has(need)) known.set(need, !withheld && PRESENT[need]());
  if (known.get(need)) return true;
  const line = `${what} needs ${need}: apt-get install ${PACKAGES[need]}`;
  if (process.env.CI === "true") throw new Error(`${line} (CI=true: a missing tool fails, it never skips)`);
  console.warn(`skipped: ${line}`);
  return false;
}

/** `describe` when this machine has `need`, else `describe.skip` (see has). */
export function describeWith(need: Need, what: string): typeof describe | typeof describe.skip {
  return has(need, what) ? describe : describe.skip;
}
