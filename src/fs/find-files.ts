import { lstat, readdir } from "node:fs/promises";
import { join, relative, sep } from "node:path";
import picomatch from "picomatch";

const GLOB_CHARS = /[*?[\]{}!]/;

/**
 * Files under `root` matching a workspace-relative path or glob. `.git` and the given
 * excluded top-level entries (worktree_include symlinks) are never walked.
 */
export async function findMatches(
  root: string,
  pattern: string,
  exclude: readonly string[] = [],
): Promise<string[]> {
  if (!GLOB_CHARS.test(pattern)) {
    try {
      await lstat(join(root, pattern));
      return [pattern.replace(/\/+$/, "")];
    } catch {
      return [];
    }
  }
  const isMatch = picomatch(pattern, { dot: true });
  const skip = new Set([".git", ...exclude.map((e) => e.replace(/\/+$/, ""))]);
  const out: string[] = [];
  const walk = async (dir: string): Promise<void> => {
    const entries = await readdir(dir, { withFileTypes: true }).catch(() => []);
    for (const entry of entries) {
      const path = join(dir, entry.name);
      const rel = relative(root, path).split(sep).join("/");
      if (skip.has(rel)) continue;
      if (isMatch(rel)) out.push(rel);
      if (entry.isDirectory()) await walk(path);
    }
  };
  await walk(root);
  return out.sort();
}

/** True when `path` matches one of the globs (workspace-relative, dotfiles included). */
export function matchesAny(path: string, globs: readonly string[]): boolean {
  return globs.some(
    (g) =>
      picomatch.isMatch(path, g, { dot: true }) ||
      picomatch.isMatch(path, `${g.replace(/\/+$/, "")}/**`, { dot: true }),
  );
}
