import { cp, lstat, mkdir, realpath } from "node:fs/promises";
import path from "node:path";
import { InputError } from "../errors.js";
import { normalizeInclude } from "./include.js";

/**
 * Copies each `worktree_copy` path of the workspace `root` into `worktree` (files or folders),
 * so that an agent's edit of its copy never reaches the user's. Like an include, a path missing
 * from the workspace or already in the worktree (tracked) is an input error. A path that is
 * itself a symlink is copied as what it points to (validation keeps that inside the workspace):
 * copying the link would hand the agent the user's file again. Symlinks inside a copied folder
 * are copied as they are (verbatim: `node_modules/.bin` links stay relative to the copy).
 */
export async function copyIntoWorktree(
  root: string,
  worktree: string,
  paths: readonly string[],
): Promise<void> {
  for (const p of normalizeInclude(paths)) {
    const source = path.join(root, p);
    const found = await lstat(source).catch(() => null);
    if (!found) {
      throw new InputError([
        { field: "worktree_copy", message: `"${p}" does not exist in the workspace (${source})` },
      ]);
    }
    const dest = path.join(worktree, p);
    if (await lstat(dest).catch(() => null)) {
      throw new InputError([
        {
          field: "worktree_copy",
          message: `"${p}" is tracked in the repository, so it is already in every worktree; remove it from worktree_copy`,
        },
      ]);
    }
    await mkdir(path.dirname(dest), { recursive: true });
    const from = found.isSymbolicLink() ? await realpath(source) : source;
    await cp(from, dest, {
      recursive: true,
      errorOnExist: true,
      force: false,
      preserveTimestamps: true,
      verbatimSymlinks: true,
    });
  }
}
