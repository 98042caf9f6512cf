import { realpathSync } from "node:fs";
import { posix, relative } from "node:path";
import { InputError, type InputProblem } from "../errors.js";
import { changedEntries, changedFiles, commitTaskChanges, diffPatch, pendingChanges } from "../git/commit.js";
import { normalizeInclude } from "../git/include.js";
import { dirtyTrackedFiles, isTracked, repoInfo, requireGitVersion } from "../git/repo.js";
import { bringHeadOntoTaskBranch } from "../git/task-head.js";
import { prepareTaskWorktree, resetWorktree } from "../git/worktree.js";
import { takeRefsSnapshot } from "./ref-watch.js";
import type { GitRun, TaskWorkspace } from "./workspace.js";

/**
 * Refuses what would make the run unsafe before anything starts; returns the git side or null.
 * `file`: the assignments file, named in the problems found; `copy`: `worktree_copy`.
 */
export async function inspectWorkspace(
  workspace: string,
  include: readonly string[],
  allowDirty: boolean,
  dryRun: boolean,
  file?: string,
  copy: readonly string[] = [],
): Promise<GitRun | null> {
  // The refs' time is taken before HEAD is read: a commit of the user's made after the base
  // commit was read is then always later than the list (see takeRefsSnapshot).
  const startedAt = Date.now();
  const info = await repoInfo(workspace);
  if (!info) {
    // Tasks run in the workspace itself: there is no worktree to copy into, and an agent would
    // edit the very files the copies were meant to keep from it.
    if (copy.length > 0)
      throw new InputError([
        {
          ...(file ? { file } : {}),
          field: "environment.worktree_copy",
          message: `the workspace ${workspace} is not a git repository, so tasks run in it directly and nothing can be copied for them; remove worktree_copy or make the workspace a repository`,
        },
      ]);
    return null;
  }
  await requireGitVersion();
  if (info.head === null) {
    throw new InputError([
      {
        message: `the workspace ${info.root} is a git repository without commits; commit something first (tasks branch off HEAD)`,
      },
    ]);
  }
  if (!allowDirty && !dryRun) {
    const dirty = await dirtyTrackedFiles(info.root);
    if (dirty.length > 0) {
      throw new InputError(
        [
          {
            message: `the workspace ${info.root} has uncommitted changes to tracked files: ${dirty.slice(0, 20).join(", ")}${dirty.length > 20 ? ` and ${dirty.length - 20} more` : ""}`,
          },
        ],
        "Commit or stash them, or pass --allow-dirty (the merge never overwrites uncommitted work).",
      );
    }
  }
  const prefix = relative(info.root, realpathSync(workspace));
  await checkInclude(info.root, prefix, include, copy, file);
  const git: GitRun = { root: info.root, baseCommit: info.head, targetRef: info.ref, prefix };
  // A dry run changes nothing, so there is nothing to compare against.
  if (!dryRun) git.refsAtStart = await takeRefsSnapshot(info.root, startedAt);
  return git;
}

/**
 * worktree_include paths are linked into every worktree, worktree_copy paths copied there, and
 * neither is ever committed, so they must be untracked: linking or copying a tracked path (or the
 * workspace itself) would make every task fail. A copy inside a link (or a link inside a copy)
 * would write into the user's files or be linked over: they must not overlap.
 */
async function checkInclude(
  root: string,
  prefix: string,
  include: readonly string[],
  copy: readonly string[],
  file: string | undefined,
): Promise<void> {
  const problems: InputProblem[] = [];
  const entries = [
    ...include.map((p, j) => ({ p, key: "worktree_include", field: `environment.worktree_include[${j}]` })),
    ...copy.map((p, j) => ({ p, key: "worktree_copy", field: `environment.worktree_copy[${j}]` })),
  ];
  const links: string[] = [];
  for (const { p, key, field } of entries) {
    let inRepo: string;
    try {
      // As linkIncludes will name it: `./x`, `a/../x` and `x/` are all `x`.
      inRepo = normalizeInclude([prefix ? posix.join(prefix, p) : p])[0]!;
    } catch {
      problems.push({
        ...(file ? { file } : {}),
        field,
        message: `"${p}" must name a path inside the workspace, not the workspace itself or .git`,
      });
      continue;
    }
    if (await isTracked(root, inRepo)) {
      problems.push({
        ...(file ? { file } : {}),
        field,
        message: `"${p}" is tracked by git; ${key} is for untracked paths such as node_modules or .env (tracked files are in every worktree already)`,
      });
    }
    if (key === "worktree_include") links.push(inRepo);
    else {
      const under = (a: string, b: string): boolean => a === b || a.startsWith(`${b}/`);
      const clash = links.find((l) => under(inRepo, l) || under(l, inRepo));
      if (clash !== undefined)
        problems.push({
          ...(file ? { file } : {}),
          field,
          message: `"${p}" overlaps the worktree_include path "${clash}" (a copy inside a link would write into your files); list it in one of the two only`,
        });
    }
  }
  if (problems.length > 0) throw new InputError(problems);
}

/** The workspace seam's real implementation: git's. */
export const gitWorkspace: TaskWorkspace = {
  inspect: inspectWorkspace,
  prepare: prepareTaskWorktree,
  reset: resetWorktree,
  commit: commitTaskChanges,
  takeHead: bringHeadOntoTaskBranch,
  changedFiles,
  changedEntries,
  diffPatch,
  pendingChanges,
};
