import { GitError } from "./errors.js";
import { branchRef, git, requireCommit } from "./repo.js";

/** Where an agent left its worktree's HEAD, once it is back on the task branch. */
export type TaskHeadResult =
  /** HEAD was on the task branch all along. */
  | { moved: false }
  /** HEAD was elsewhere (`from`: the branch it was on, null when detached); the branch now holds that work. */
  | { moved: true; from: string | null; commit: string };

/**
 * Puts the task worktree `wt` back on its task branch `branch` after the agent left it on
 * another branch (`git checkout -b other`) or on a detached HEAD, keeping the agent's work.
 *
 * Why follow rather than fail: an agent that switched to a branch of its own meant its commits
 * as the task's work, and throwing that away would surprise users more than taking it. But
 * only by fast-forward: when what HEAD points at contains the task branch's tip, the task
 * branch is moved there (compare-and-swap) and HEAD is pointed back at it; index and work tree
 * stay as they are, since both name the same commit, so the agent's uncommitted changes are
 * committed on the task branch next. Anything else (HEAD on a line that does not contain the
 * task's work, a branch that existed before the run, or an unborn branch) is refused, and
 * changes nothing. The branch the agent created stays where it is: the caller reports it and
 * removes it with the task branch.
 */
export async function bringHeadOntoTaskBranch(
  wt: string,
  branch: string,
  /** Whether the branch the agent is on was created by it (a branch that existed before is the user's). */
  createdByAgent: (ref: string) => Promise<boolean>,
): Promise<TaskHeadResult> {
  const ref = branchRef(branch);
  const sym = await git(wt, ["symbolic-ref", "-q", "HEAD"], { allowExit: [0, 1] });
  const from = sym.exitCode === 0 ? sym.stdout.trim() : null;
  if (from === ref) return { moved: false };
  const where = from === null ? "a detached HEAD" : from;
  if (from !== null && !(await createdByAgent(from))) {
    throw new GitError(
      `the agent switched ${wt} to ${from}, a branch that existed before the run: the task's work is not on its branch ${branch} and was not merged (termorch leaves ${from} as the agent left it)`,
      { cwd: wt },
    );
  }
  const head = await git(wt, ["rev-parse", "-q", "--verify", "HEAD^{commit}"], { allowExit: [0, 1, 128] });
  if (head.exitCode !== 0) {
    throw new GitError(
      `the agent left ${wt} on ${where}, which has no commit; the task's work is not on its branch ${branch}`,
      { cwd: wt },
    );
  }
  const commit = head.stdout.trim();
  const tip = await requireCommit(wt, ref);
  const ff = await git(wt, ["merge-base", "--is-ancestor", tip, commit], { allowExit: [0, 1] });
  if (ff.exitCode !== 0) {
    throw new GitError(
      `the agent left ${wt} on ${where} (${commit.slice(0, 12)}), which does not contain the task's branch ${branch} (${tip.slice(0, 12)}): the task's work is not on its branch and was not merged (it is kept on ${where} in the task's worktree)`,
      { cwd: wt },
    );
  }
  await git(wt, ["update-ref", "-m", `termorch: take the agent's work from ${where}`, ref, commit, tip]);
  await git(wt, ["symbolic-ref", "-m", `termorch: back on ${branch}`, "HEAD", ref]);
  return { moved: true, from, commit };
}
