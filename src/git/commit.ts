import { GitError } from "./errors.js";
import { includePathspecs, normalizeInclude } from "./include.js";
import { branchRef, commitTree, git, gitBuffer, gitLine } from "./repo.js";

/** What commitTaskChanges needs. */
export interface CommitTaskChangesOptions {
  /** Commit message (names the task and the agent). */
  message: string;
  /** Paths linked into the worktree by `include`: never committed. */
  exclude: readonly string[];
  /** When given, HEAD must be on this branch: an agent that switched branches is caught, not followed. */
  branch?: string;
}

/**
 * Commits everything the agent changed in `worktree` (added, modified, deleted, and untracked
 * files that are not ignored) on the checked-out branch and returns the branch's tip. Nothing
 * changed, or the agent committed everything itself: no new commit, the tip is returned as is.
 * Include paths are never committed; if the agent committed them itself, a commit removing
 * them is added, so neither the task's tree nor its patch contains them.
 */
export async function commitTaskChanges(worktree: string, o: CommitTaskChangesOptions): Promise<string> {
  const exclude = normalizeInclude(o.exclude);
  const head = await git(worktree, ["symbolic-ref", "-q", "HEAD"], { allowExit: [0, 1] });
  if (head.exitCode !== 0) {
    throw new GitError(
      `HEAD is detached in ${worktree}: the task's work is not on its branch (the agent checked out another commit)`,
      { cwd: worktree },
    );
  }
  const ref = head.stdout.trim();
  if (o.branch !== undefined && ref !== branchRef(o.branch)) {
    throw new GitError(`${worktree} is on ${ref}, not on the task's branch ${branchRef(o.branch)}`, {
      cwd: worktree,
    });
  }
  // `git add -A` would stage files with conflict markers as if resolved.
  const unmerged = await git(worktree, ["ls-files", "--unmerged", "-z"]);
  if (unmerged.stdout !== "") {
    throw new GitError(`${worktree} has unresolved merge conflicts; the task's changes cannot be committed`, {
      cwd: worktree,
    });
  }
  await git(worktree, ["add", "-A", "--", ":(top)", ...includePathspecs(exclude, true)]);
  if (exclude.length > 0) {
    // The agent may have staged or committed an include symlink itself (`git add -A`).
    await git(worktree, [
      "rm",
      "-r",
      "-q",
      "--cached",
      "--ignore-unmatch",
      "--",
      ...includePathspecs(exclude, false),
    ]);
  }
  const tree = await gitLine(worktree, ["write-tree"]);
  // The tip and its tree in one process (a run pays a few git processes per task).
  const [old, oldTree] = (
    await git(worktree, ["cat-file", "--batch-check=%(objectname)"], {
      input: `${ref}^{commit}\n${ref}^{tree}\n`,
    })
  ).stdout
    .trim()
    .split("\n");
  const objectId = /^[0-9a-f]{40,64}$/;
  if (!old || !oldTree || !objectId.test(old) || !objectId.test(oldTree))
    throw new GitError(`cannot read the tip of ${ref} in ${worktree}`, { cwd: worktree });
  if (tree === oldTree) return old;
  // Plumbing rather than `git commit`: no commit template, hook or signing configuration of
  // the user's applies, and the compare-and-swap catches an agent still committing.
  const commit = await commitTree(worktree, tree, [old], o.message);
  await git(worktree, ["update-ref", "-m", "termorch: commit task changes", ref, commit, old]);
  return commit;
}

/** How a path changed between two commits (git's name-status letters). */
export type ChangeStatus = "A" | "C" | "D" | "M" | "R" | "T" | "U" | "X";

/** One changed path; renames and copies carry their source in `from`. */
export interface ChangedEntry {
  status: ChangeStatus;
  path: string;
  from?: string;
}

/** Paths changed between two commits, with rename detection. */
export async function changedEntries(repo: string, from: string, to: string): Promise<ChangedEntry[]> {
  const r = await git(repo, ["diff-tree", "-r", "-z", "-M", "--name-status", from, to]);
  const t = r.stdout.split("\0");
  const out: ChangedEntry[] = [];
  for (let i = 0; i < t.length; ) {
    const code = t[i++];
    if (!code) continue;
    const status = code.charAt(0) as ChangeStatus;
    if (status === "R" || status === "C") {
      const src = t[i++] ?? "";
      const dst = t[i++] ?? "";
      out.push({ status, path: dst, from: src });
    } else {
      out.push({ status, path: t[i++] ?? "" });
    }
  }
  return out;
}

/** Every path changed between two commits, sorted; a rename contributes both its paths. */
export async function changedFiles(repo: string, from: string, to: string): Promise<string[]> {
  const set = new Set<string>();
  for (const e of await changedEntries(repo, from, to)) {
    set.add(e.path);
    if (e.from !== undefined) set.add(e.from);
  }
  return [...set].sort();
}

/**
 * The patch from `from` to `to` as bytes (binary files as `GIT binary patch`, full object ids),
 * appliable with `git apply`. Plumbing with explicit prefixes, so the user's diff settings
 * (noprefix, external diff, textconv, colour) cannot change it.
 */
export async function diffPatch(repo: string, from: string, to: string): Promise<Buffer> {
  const r = await gitBuffer(repo, [
    "diff-tree",
    "-p",
    "-r",
    "-M",
    "--binary",
    "--full-index",
    "--no-color",
    "--no-ext-diff",
    "--no-textconv",
    "--src-prefix=a/",
    "--dst-prefix=b/",
    from,
    to,
  ]);
  return r.stdout;
}
