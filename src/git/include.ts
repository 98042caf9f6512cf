import { lstat, mkdir, symlink } from "node:fs/promises";
import path from "node:path";
import { InputError } from "../errors.js";

/**
 * Checks `worktree_include` entries and returns them normalised (POSIX, no trailing slash).
 * Each must be a relative path inside the repository and not inside `.git`.
 */
export function normalizeInclude(include: readonly string[]): string[] {
  const out: string[] = [];
  for (const raw of include) {
    const p = path.posix.normalize(raw.replaceAll("\\", "/")).replace(/\/+$/, "");
    const bad =
      raw.trim() === "" || path.posix.isAbsolute(p) || p === "." || p === ".." || p.startsWith("../");
    if (bad || p === ".git" || p.startsWith(".git/")) {
      throw new InputError([
        {
          field: "worktree_include",
          message: `"${raw}" must be a relative path inside the workspace (and not inside .git)`,
        },
      ]);
    }
    if (!out.includes(p)) out.push(p);
  }
  return out;
}

/**
 * Pathspecs matching exactly the given paths and everything below them, from the top of the
 * work tree and without glob interpretation; `exclude` turns them into exclusions.
 */
export function includePathspecs(paths: readonly string[], exclude: boolean): string[] {
  const magic = exclude ? "top,literal,exclude" : "top,literal";
  return paths.map((p) => `:(${magic})${p}`);
}

/**
 * Symlinks each include path of the workspace `root` into `worktree` (absolute targets, so the
 * link works wherever the agent looks from). A path missing from the workspace, or one the
 * worktree already has (it is tracked, so it is not "untracked workspace state"), is an input
 * error: silently skipping it would give the agent a different environment than asked for.
 */
export async function linkIncludes(
  root: string,
  worktree: string,
  include: readonly string[],
): Promise<void> {
  for (const p of normalizeInclude(include)) {
    const source = path.join(root, p);
    if (!(await lstat(source).catch(() => null))) {
      throw new InputError([
        { field: "worktree_include", message: `"${p}" does not exist in the workspace (${source})` },
      ]);
    }
    const dest = path.join(worktree, p);
    if (await lstat(dest).catch(() => null)) {
      throw new InputError([
        {
          field: "worktree_include",
          message: `"${p}" is tracked in the repository, so it is already in every worktree; remove it from worktree_include`,
        },
      ]);
    }
    await mkdir(path.dirname(dest), { recursive: true });
    await symlink(source, dest);
  }
}
