import { gitPath, lastReflogEntry } from "./refs.js";
import { git } from "./repo.js";

/** What putBackBranch did. */
export type PutBack =
  | { status: "put_back" }
  /** Nothing was changed; `why` says why, `todo` what the user can run. */
  | { status: "left"; why: string; todo: string };

/** What putBackBranch needs. */
export interface PutBackOptions {
  /** The user's checkout, where `ref` is checked out. */
  root: string;
  /** The branch (full name) someone other than the user moved or deleted. */
  ref: string;
  /** Its value before that move: where it is put back to. */
  start: string;
  /** Its value now; null when it was deleted. */
  now: string | null;
  /** A branch (full name, not existing yet) that keeps `now` reachable once `ref` is put back. */
  keep: string;
  /** The reflog message of the put-back (starts with `termorch:`). */
  message: string;
}

/**
 * Puts back a branch that something other than the user (an agent, from its worktree) moved
 * while it is checked out in the user's checkout `root`: such a move changes the ref only, so
 * the user's index and work tree stay at `start` and `git status` shows the new commit's
 * changes reversed. Moving the ref back to `start` is safe exactly when the index still is
 * `start`'s tree (the user staged nothing since): it then touches neither the index nor the
 * work tree, whose own changes stay what they were against `start`. The move is one
 * transaction, a compare-and-swap on `now` that also creates `keep` at `now`, so the moved-to
 * commit stays reachable and a further move in between makes it fail. Anything less certain is
 * left as it is, with what to run.
 */
export async function putBackBranch(o: PutBackOptions): Promise<PutBack> {
  const { root, ref, start, now } = o;
  const undo =
    now === null
      ? `git -C ${root} update-ref ${ref} ${start} ""`
      : `git -C ${root} branch ${o.keep.replace(/^refs\/heads\//, "")} ${now} (keeps that commit), then git -C ${root} reset --soft ${start} (moves the branch back, leaving your index and work tree as they are)`;
  const head = await git(root, ["symbolic-ref", "-q", "HEAD"], { allowExit: [0, 1] });
  if (head.exitCode !== 0 || head.stdout.trim() !== ref)
    return {
      status: "left",
      why: `it is no longer checked out in ${root}`,
      todo: `check it; to put it back: ${now === null ? undo : `git -C ${root} update-ref ${ref} ${start} ${now}`}`,
    };
  // A deleted branch loses its reflog; one that moved must have moved once, from `start` to
  // `now`: an entry from elsewhere means it went through values termorch did not see.
  if (now !== null) {
    const last = await lastReflogEntry(await gitPath(root, `logs/${ref}`));
    if (last !== null && (last.old !== start || last.new !== now))
      return {
        status: "left",
        why: `its reflog shows it last moved from ${last.old.slice(0, 12)}, not from ${start.slice(0, 12)}`,
        todo: `check git -C ${root} reflog ${ref} and git -C ${root} status`,
      };
  }
  const sameIndex = async (commit: string): Promise<boolean> =>
    (await git(root, ["diff-index", "--cached", "--quiet", commit, "--"], { allowExit: [0, 1, 128] }))
      .exitCode === 0;
  if (!(await sameIndex(start))) {
    if (now !== null && (await sameIndex(now)))
      return {
        status: "left",
        why: `your index already matches ${now.slice(0, 12)} (it was brought there since)`,
        todo: `to drop that commit from ${ref}: git -C ${root} reset --keep ${start} (your uncommitted changes are kept)`,
      };
    return {
      status: "left",
      why: `your index no longer matches ${start.slice(0, 12)} (something was staged since)`,
      todo: `check git -C ${root} status; if it shows that commit's changes reversed as staged changes, run ${undo}`,
    };
  }
  const input =
    now === null ? `create ${ref} ${start}\n` : `create ${o.keep} ${now}\nupdate ${ref} ${start} ${now}\n`;
  const r = await git(root, ["update-ref", "-m", o.message, "--stdin"], { input, allowExit: [0, 1, 128] });
  if (r.exitCode !== 0)
    return {
      status: "left",
      why: `git could not put it back (${r.stderr.trim().split("\n")[0] ?? `exit ${r.exitCode}`})`,
      todo: `check git -C ${root} status; if it shows that commit's changes reversed as staged changes, run ${undo}`,
    };
  return { status: "put_back" };
}
