import { readFile } from "node:fs/promises";
import path from "node:path";
import { git } from "./repo.js";

/** Every ref of the repository (branches, tags, remote-tracking refs, stash, notes) and its object id. */
export async function listRefs(repo: string): Promise<Record<string, string>> {
  const r = await git(repo, ["for-each-ref", "--format=%(refname)%00%(objectname)"]);
  const refs: Record<string, string> = {};
  for (const line of r.stdout.split("\n")) {
    const [name, sha] = line.split("\0");
    if (name && sha) refs[name] = sha;
  }
  return refs;
}

/** A ref that was created (old null), moved, or deleted (new null) between two listings. */
export interface RefMove {
  ref: string;
  old: string | null;
  new: string | null;
}

/** What changed from `before` to `after`, sorted by ref name, leaving out refs `ignore` names. */
export function refMoves(
  before: Readonly<Record<string, string>>,
  after: Readonly<Record<string, string>>,
  ignore: (ref: string) => boolean,
): RefMove[] {
  const names = [...new Set([...Object.keys(before), ...Object.keys(after)])].sort();
  const out: RefMove[] = [];
  for (const ref of names) {
    const old = before[ref] ?? null;
    const now = after[ref] ?? null;
    if (old !== now && !ignore(ref)) out.push({ ref, old, new: now });
  }
  return out;
}

/** One line of a reflog. */
export interface ReflogEntry {
  old: string;
  new: string;
  /** Epoch seconds. */
  time: number;
  /** What the command that made the entry said it did (termorch's own start with `termorch:`). */
  message: string;
}

/** The last entry of the reflog file `file`; null when there is none (no file, logging off). */
export async function lastReflogEntry(file: string): Promise<ReflogEntry | null> {
  const text = await readFile(file, "utf8").catch(() => null);
  if (text === null) return null;
  const lines = text.split("\n").filter(Boolean);
  const last = lines[lines.length - 1];
  if (last === undefined) return null;
  // `<old> <new> <name> <<email>> <epoch> <tz>\t<message>`: the name may hold spaces, the rest not.
  const m = /^([0-9a-f]{40,64}) ([0-9a-f]{40,64}) .*> (\d+) [-+]\d{4}(?:\t(.*)|$)/.exec(last);
  if (!m) return null;
  return { old: m[1]!, new: m[2]!, time: Number(m[3]), message: m[4] ?? "" };
}

/** Absolute path of a file in the git directory of the worktree `wt` (`git rev-parse --git-path`). */
export async function gitPath(wt: string, name: string): Promise<string> {
  const r = await git(wt, ["rev-parse", "--git-path", name]);
  return path.resolve(wt, r.stdout.trim());
}

/** When `ref` last changed according to its reflog (epoch ms), or null when it keeps none. */
export async function lastRefChange(repo: string, ref: string): Promise<number | null> {
  const entry = await lastReflogEntry(await gitPath(repo, `logs/${ref}`));
  return entry === null ? null : entry.time * 1000;
}

/**
 * Whether the target branch, now at `tip`, was moved there from the user's own checkout `root`
 * (a commit, merge, pull, reset, even `git update-ref` run there) since `sinceMs`, rather than
 * by some other process such as an agent in its task worktree.
 *
 * The rule rests on how git logs ref updates: an update of the branch a worktree's HEAD points
 * at is also written to that worktree's own HEAD reflog, whichever command made it; an update
 * made from another worktree (a task's, whose HEAD is its task branch) is written to the
 * branch's reflog only. So the target moved in the user's checkout exactly when the last entry
 * of that checkout's HEAD reflog, written during the run, moved it to `tip`. Anything else (an
 * agent's `git update-ref refs/heads/main ...`, or the user moving HEAD elsewhere afterwards) is
 * not taken for the user's commit. Nor is termorch's own update of the target (its reflog
 * message starts with `termorch:`): it runs in the user's checkout too, and an earlier merge of
 * the same run is not a commit of the user's to merge onto. In every case (and alone where git
 * keeps no HEAD reflog, core.logAllRefUpdates off) the checkout's index must be exactly `tip`'s
 * tree: what a commit there leaves, and what the merge needs so that advancing from `tip` keeps
 * ref, index and work tree in agreement. An agent that ran `git update-ref` in the user's
 * checkout to an unrelated commit is caught by that.
 */
export async function movedInCheckout(
  root: string,
  ref: string,
  tip: string,
  sinceMs: number,
): Promise<boolean> {
  const head = await git(root, ["symbolic-ref", "-q", "HEAD"], { allowExit: [0, 1] });
  if (head.exitCode !== 0 || head.stdout.trim() !== ref) return false;
  const last = await lastReflogEntry(await gitPath(root, "logs/HEAD"));
  if (
    last !== null &&
    !(last.new === tip && !last.message.startsWith("termorch:") && last.time >= Math.floor(sinceMs / 1000))
  )
    return false;
  // Also with the reflog: an agent can run `git -C <checkout> update-ref` too, but a commit of the
  // user's leaves the index at its tree (an agent's jump to unrelated history does not).
  const same = await git(root, ["diff-index", "--cached", "--quiet", tip, "--"], { allowExit: [0, 1] });
  return same.exitCode === 0;
}

/** Whether any ref starts with `prefix` (e.g. `refs/heads/termorch/<run>/`). */
export async function hasRefsUnder(repo: string, prefix: string): Promise<boolean> {
  return (await git(repo, ["for-each-ref", "--count=1", "--format=%(refname)", prefix])).stdout.trim() !== "";
}
