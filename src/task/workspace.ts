import type { RefsSnapshot } from "../contract/merge-journal.js";
import type {
  changedEntries,
  changedFiles,
  commitTaskChanges,
  diffPatch,
  pendingChanges,
} from "../git/commit.js";
import type { bringHeadOntoTaskBranch } from "../git/task-head.js";
import type { prepareTaskWorktree, resetWorktree } from "../git/worktree.js";

/** The git side of a run, when the workspace is a repository. */
export interface GitRun {
  root: string;
  /** Workspace HEAD at run start: every task without dependencies starts here. */
  baseCommit: string;
  /** The branch checked out at start (`refs/heads/...`), or null when HEAD was detached. */
  targetRef: string | null;
  /** Where the workspace sits inside the repository ("" at its root, else e.g. "packages/app"). */
  prefix: string;
  /**
   * The repository's refs, listed together with `baseCommit` (a new run; a resume reads them
   * back from the run's refs.json instead).
   */
  refsAtStart?: RefsSnapshot;
}

/**
 * The workspace seam: the git operations a run does on the user's repository before and around
 * its tasks, behind one interface. `gitWorkspace` (workspace.ts) is the real one; the middle
 * test tier (test/middle/) injects a workspace that is not a repository, so no git process runs.
 * The merge stage works on the repository only when `inspect` found one.
 */
export interface TaskWorkspace {
  /**
   * The workspace's git side, or null when it is not a repository (tasks then run in place).
   * Throws InputError when running there would be unsafe. `file`: the assignments file, named
   * in the problems found; `copy`: the `worktree_copy` paths (checked like `include`).
   */
  inspect(
    workspace: string,
    include: readonly string[],
    allowDirty: boolean,
    dryRun: boolean,
    file?: string,
    copy?: readonly string[],
  ): Promise<GitRun | null>;
  /** A task's branch and worktree, from the base commit merged with its dependencies' branches. */
  prepare: typeof prepareTaskWorktree;
  /** Puts a task's worktree back to its start commit before a retry. */
  reset: typeof resetWorktree;
  /** Commits what the agent left in its worktree on its task branch. */
  commit: typeof commitTaskChanges;
  /** Brings an agent's work done on a branch of its own (or a detached HEAD) onto its task branch. */
  takeHead: typeof bringHeadOntoTaskBranch;
  changedFiles: typeof changedFiles;
  /** Paths and modes of what a task's commit adds or changes (the git_control_files gate). */
  changedEntries: typeof changedEntries;
  diffPatch: typeof diffPatch;
  /** What the agent changed in its worktree since its start, before termorch commits it (the secrets gate). */
  pendingChanges: typeof pendingChanges;
}
