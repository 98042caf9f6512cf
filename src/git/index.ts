/** termorch's git adapter: isolation in worktrees, in-memory conflict checks, topological merge. */
export { type AdvanceResult, type AdvanceTargetOptions, advanceTarget } from "./advance.js";
export {
  type ChangedEntry,
  type ChangeStatus,
  type CommitTaskChangesOptions,
  changedEntries,
  changedFiles,
  commitTaskChanges,
  diffPatch,
} from "./commit.js";
export { GitError, type GitFailure, GitVersionError } from "./errors.js";
export { normalizeInclude } from "./include.js";
export {
  checkMerge,
  createIntegrationCommit,
  type IntegrationCommitOptions,
  type MergeCheck,
  type MergeItem,
  type MovedTargetOptions,
  type MovedTargetResult,
  mergeOntoMovedTarget,
} from "./merge.js";
export {
  dirtyTrackedFiles,
  type GitOptions,
  type GitResult,
  type GitVersion,
  git,
  gitVersion,
  MIN_GIT_VERSION,
  type RepoInfo,
  repoInfo,
  requireGitVersion,
  TERMORCH_IDENTITY,
} from "./repo.js";
export {
  type DeleteBranchResult,
  deleteBranch,
  listWorktrees,
  type PrepareDetachedWorktreeOptions,
  type PrepareTaskWorktreeOptions,
  type PrepareTaskWorktreeResult,
  prepareDetachedWorktree,
  prepareTaskWorktree,
  removeWorktree,
  type TaskDep,
  type WorktreeEntry,
} from "./worktree.js";
