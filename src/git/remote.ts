import { existsSync } from "node:fs";
import { mkdir, stat } from "node:fs/promises";
import { GitError } from "./errors.js";
import { branchRef, git, resolveCommit } from "./repo.js";
import { removeWorktree } from "./worktree.js";

/**
 * The git remote of the scale-out backend (docs/SCALING.md): the coordinator publishes each
 * task's base there, workers fetch it and push the task branch, the coordinator fetches that.
 * Every transfer names its refs exactly (no remote is configured in anyone's repository, no
 * tags, no other branches), so a shared remote carries nothing but the runs' own refs.
 */

/** `refs/termorch/<run>/base/<task>`: where a task's start commit is published. */
export function baseRefOf(runId: string, taskId: string): string {
  return `refs/termorch/${runId}/base/${taskId}`;
}

/** A remote as it may be shown: a URL's password is dropped. */
export function shownRemote(remote: string): string {
  return remote.replace(/^([a-z][a-z0-9+.-]*:\/\/[^/@:]*):[^/@]*@/i, "$1:***@");
}

// Transfers never prompt (a remote asking for a password fails at once) and never run the
// remote's hooks on our side; the "--" keeps a remote that starts with "-" from being an option.
async function transfer(repo: string, args: readonly string[], what: string, remote: string): Promise<void> {
  const r = await git(repo, args, { allowExit: [0, 1, 128], retryOnLock: true });
  if (r.exitCode !== 0) {
    const said = r.stderr.trim().split("\n").slice(-3).join("; ");
    throw new GitError(
      `could not ${what} the git remote ${shownRemote(remote)}: ${said || `git exited ${r.exitCode}`}`,
      {
        cwd: repo,
        stderr: r.stderr,
        status: r.exitCode,
      },
    );
  }
}

/** Pushes `commit` to `ref` on the remote (forced: a re-run of the same task publishes its base again). */
export async function publishCommit(
  repo: string,
  remote: string,
  commit: string,
  ref: string,
): Promise<void> {
  await transfer(
    repo,
    ["push", "--quiet", "--no-verify", "--", remote, `+${commit}:${ref}`],
    "publish to",
    remote,
  );
}

/** Fetches one ref of the remote into the same ref here; answers the commit it holds. */
export async function fetchRef(repo: string, remote: string, ref: string): Promise<string> {
  await transfer(
    repo,
    ["fetch", "--quiet", "--no-tags", "--no-write-fetch-head", "--", remote, `+${ref}:${ref}`],
    "fetch from",
    remote,
  );
  const commit = await resolveCommit(repo, ref);
  if (commit === null)
    throw new GitError(`fetched ${ref} from ${shownRemote(remote)}, but it is not a commit`, { cwd: repo });
  return commit;
}

/** Pushes a task branch to the same branch on the remote (forced: a re-delivered job replaces an earlier push). */
export async function pushBranch(repo: string, remote: string, branch: string): Promise<void> {
  const ref = branchRef(branch);
  await transfer(repo, ["push", "--quiet", "--no-verify", "--", remote, `+${ref}:${ref}`], "push to", remote);
}

/** Deletes refs on the remote (what a finished run published there); answers false when the remote refused. */
export async function deleteRemoteRefs(
  repo: string,
  remote: string,
  refs: readonly string[],
): Promise<boolean> {
  if (refs.length === 0) return true;
  const r = await git(
    repo,
    ["push", "--quiet", "--no-verify", "--", remote, ...refs.map((ref) => `:${ref}`)],
    {
      allowExit: [0, 1, 128],
    },
  );
  return r.exitCode === 0;
}

/**
 * A bare repository at `dir` for a worker's copies of one remote's commits (created when it is
 * not there yet): task worktrees are added to it, so it needs no checkout of its own.
 */
export async function ensureBareRepo(dir: string): Promise<void> {
  if ((await stat(dir).catch(() => null))?.isDirectory() && (await resolveGitDir(dir))) return;
  await mkdir(dir, { recursive: true, mode: 0o700 });
  await git(dir, ["init", "--quiet", "--bare"]);
}

async function resolveGitDir(dir: string): Promise<boolean> {
  const r = await git(dir, ["rev-parse", "--is-bare-repository"], { allowExit: [0, 128] });
  return r.exitCode === 0 && r.stdout.trim() === "true";
}

/**
 * A task's worktree and branch in a worker's repository, gone: what an earlier delivery of its
 * job left, or this delivery's once its branch was pushed.
 */
export async function dropWorkerTask(repo: string, worktree: string, branch: string): Promise<void> {
  if (existsSync(worktree)) await removeWorktree(repo, worktree);
  await pruneWorktrees(repo);
  await dropRef(repo, branchRef(branch));
}

/** Forgets the worktrees of a worker's repository whose folders are gone (an earlier life's). */
export async function pruneWorktrees(repo: string): Promise<void> {
  await git(repo, ["worktree", "prune"], { allowExit: [0, 128] });
}

/** A ref of a worker's repository deleted, if it is there (a task's fetched base once it is done with). */
export async function dropRef(repo: string, ref: string): Promise<void> {
  await git(repo, ["update-ref", "-d", ref], { allowExit: [0, 1, 128] });
}
