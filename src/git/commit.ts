import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { GitError } from "./errors.js";
import { includePathspecs, normalizeInclude } from "./include.js";
import { branchRef, commitIdentity, commitTree, git, gitBuffer, gitLine, type Identity } from "./repo.js";

/** What commitTaskChanges needs. */
export interface CommitTaskChangesOptions {
  /** Commit message (names the task and the agent). */
  message: string;
  /** Paths linked into the worktree by `include` (or copied there by `worktree_copy`): never committed. */
  exclude: readonly string[];
  /**
   * Globs (repository-relative) of files the agent's CLI writes for itself (aider's tag cache):
   * left out of termorch's commit unless the repository already tracks them.
   */
  scratch?: readonly string[];
  /**
   * When given, HEAD must be on this branch, else this throws: an agent that switched branches
   * is caught here (the caller, commitOnTaskBranch, may then bring HEAD back by fast-forward and
   * commit again).
   */
  branch?: string;
  /**
   * The commit the task started from. With it, the agent's own commits since then are checked
   * for include paths and re-created without them (see stripIncludes).
   */
  start?: string;
  /** Author and committer of termorch's commit; default: the repository's configured user. */
  identity?: Identity;
}

/**
 * Commits everything the agent changed in `worktree` (added, modified, deleted, and untracked
 * files that are not ignored) on the checked-out branch and returns the branch's tip. Nothing
 * changed, or the agent committed everything itself: no new commit, the tip is returned as is.
 * Include paths are never committed, whether the repository ignores them or not; commits the
 * agent made itself that contain them are re-created without them, so no commit on the
 * branch (and none merged into the user's branch) ever holds an include link.
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
  // Everything is staged and the include paths are taken out of the index afterwards: naming
  // them in `git add`'s pathspec (even as exclusions) fails when the repository ignores them
  // ("The following paths are ignored"), and whether it does is the user's business.
  await git(worktree, ["add", "-A", "--", ":(top)"]);
  if (exclude.length > 0) await unstage(worktree, exclude);
  // Back to HEAD's state: new files there are unstaged, tracked ones keep their last commit.
  if (o.scratch?.length)
    await git(worktree, [
      "reset",
      "-q",
      "--",
      ...o.scratch.flatMap((g) => [`:(top,glob)${g}`, `:(top,glob)${g}/**`]),
    ]);
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
  const identity = o.identity ?? (await commitIdentity(worktree));
  const parent =
    o.start !== undefined && exclude.length > 0
      ? await stripIncludes(worktree, o.start, { commit: old, tree: oldTree }, exclude, identity)
      : { commit: old, tree: oldTree };
  if (tree === parent.tree && parent.commit === old) return old;
  // Plumbing rather than `git commit`: no commit template, hook or signing configuration of
  // the user's applies, and the compare-and-swap catches an agent still committing.
  const commit =
    tree === parent.tree
      ? parent.commit
      : await commitTree(worktree, tree, [parent.commit], o.message, { identity });
  await git(worktree, ["update-ref", "-m", "termorch: commit task changes", ref, commit, old]);
  return commit;
}

/** Takes the include paths (and anything below them) out of the index of `worktree`. */
async function unstage(
  worktree: string,
  paths: readonly string[],
  env?: Record<string, string>,
): Promise<void> {
  await git(
    worktree,
    ["rm", "-r", "-q", "-f", "--cached", "--ignore-unmatch", "--", ...includePathspecs(paths, false)],
    env ? { env } : {},
  );
}

/**
 * The agent's own commits `start..tip` re-created without the include paths, when any of them
 * holds one (an agent that runs `git add -A && git commit` commits the links). Each commit keeps
 * its message, author and date, its parents mapped to their re-created versions; the committer
 * is termorch's identity, which did the rewrite. Re-creating rather than squashing keeps the
 * agent's history as it made it, only without the links; a commit that held nothing but links
 * (`git add -f .venv && git commit`) is dropped, its children re-parented, so no empty commit
 * of the task reaches the user's branch.
 * Returns the new tip and its tree (the old ones when nothing needed stripping).
 */
async function stripIncludes(
  worktree: string,
  start: string,
  tip: { commit: string; tree: string },
  paths: readonly string[],
  identity: Identity,
): Promise<{ commit: string; tree: string }> {
  if (start === tip.commit) return tip;
  // The usual case costs one process: no commit of the agent's touches an include path.
  const touching = await git(worktree, [
    "rev-list",
    "--full-history",
    "-n",
    "1",
    `${start}..${tip.commit}`,
    "--",
    ...includePathspecs(paths, false),
  ]);
  if (touching.stdout.trim() === "") return tip;
  const list = await git(worktree, [
    "rev-list",
    "--reverse",
    "--topo-order",
    "--parents",
    `${start}..${tip.commit}`,
  ]);
  const dir = await mkdtemp(path.join(tmpdir(), "termorch-index-"));
  // A scratch index: the worktree's own index holds the task's pending changes.
  const env = { GIT_INDEX_FILE: path.join(dir, "index") };
  const mapped = new Map<string, string>();
  // Trees of the commits seen (old and re-created ones), so emptiness is judged without a
  // process per parent; a parent outside the range (the start) is looked up once.
  const trees = new Map<string, string>();
  const treeOf = async (commit: string): Promise<string> => {
    const known = trees.get(commit);
    if (known !== undefined) return known;
    const tree = await gitLine(worktree, ["rev-parse", `${commit}^{tree}`]);
    trees.set(commit, tree);
    return tree;
  };
  let last = tip;
  try {
    for (const line of list.stdout.split("\n")) {
      const [commit, ...parents] = line.trim().split(" ");
      if (!commit) continue;
      const raw = (await git(worktree, ["cat-file", "commit", commit])).stdout;
      const oldTree = /^tree ([0-9a-f]+)$/m.exec(raw)?.[1];
      const author = /^author (.*) <([^>]*)> (\d+ [+-]\d{4})$/m.exec(raw);
      if (!oldTree || !author)
        throw new GitError(`cannot read commit ${commit} in ${worktree}`, { cwd: worktree });
      trees.set(commit, oldTree);
      const message = raw.slice(raw.indexOf("\n\n") + 2);
      await git(worktree, ["read-tree", oldTree], { env });
      await unstage(worktree, paths, env);
      const tree = await gitLine(worktree, ["write-tree"], { env });
      // Parents that collapsed into one another (both sides of a merge re-created as the same
      // commit) count once: such a merge becomes an ordinary commit.
      const newParents = [...new Set(parents.map((p) => mapped.get(p) ?? p))];
      const same =
        tree === oldTree &&
        newParents.length === parents.length &&
        newParents.every((p, i) => p === parents[i]);
      // A commit that held nothing but include paths is left with no change at all: it is
      // dropped (its children go onto its parent), or an empty commit would be merged into the
      // user's branch. A commit that was empty as the agent made it stays, and so does a merge
      // of two lines of history, whatever its tree.
      const first = newParents[0];
      const emptied =
        !same &&
        newParents.length === 1 &&
        first !== undefined &&
        tree === (await treeOf(first)) &&
        (parents.length !== 1 || oldTree !== (await treeOf(parents[0]!)));
      const next = same
        ? commit
        : emptied
          ? first!
          : await commitTree(worktree, tree, newParents, message, {
              identity,
              author: { name: author[1] ?? "", email: author[2] ?? "", date: author[3] ?? "" },
            });
      mapped.set(commit, next);
      trees.set(next, tree);
      last = { commit: next, tree };
    }
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
  return last;
}

/**
 * What the agent would bring onto its task branch, before termorch commits it: the paths that
 * differ in `worktree` from `start` (its own commits and what it left uncommitted, untracked files
 * that are not ignored included; deleted ones too, as names) as raw bytes, and the messages of
 * the commits it made since `start`, and the branch HEAD is on (empty when detached), which
 * termorch records when the agent left it elsewhere. `exclude`: include links and copies.
 * `scratch` (as commitTaskChanges takes it: the handoff, a CLI's cache) is never in termorch's
 * commit: such a path counts only as the agent's own commits hold it, in `committed` with the
 * bytes HEAD has (`content` null: deleted there).
 */
export async function pendingChanges(
  worktree: string,
  start: string,
  exclude: readonly string[],
  scratch: readonly string[] = [],
): Promise<{
  paths: Buffer[];
  messages: Buffer;
  head: Buffer;
  committed: { path: Buffer; content: Buffer | null }[];
}> {
  const scratchSpecs = scratch.flatMap((g) => [`:(top,glob)${g}`, `:(top,glob)${g}/**`]);
  const spec = [
    "--",
    ":(top)",
    ...includePathspecs(normalizeInclude(exclude), true),
    ...scratchSpecs.map((s) => s.replace(":(top,glob)", ":(top,glob,exclude)")),
  ];
  const [tracked, untracked, log, head, ownScratch] = await Promise.all([
    gitBuffer(worktree, ["diff", "--name-only", "-z", "--no-renames", "--no-ext-diff", start, ...spec]),
    gitBuffer(worktree, ["ls-files", "-z", "--others", "--exclude-standard", "--full-name", ...spec]),
    gitBuffer(worktree, ["log", "--format=%B", `${start}..HEAD`]),
    gitBuffer(worktree, ["symbolic-ref", "-q", "HEAD"], { allowExit: [0, 1] }),
    scratch.length === 0
      ? null
      : gitBuffer(worktree, [
          "diff",
          "--name-only",
          "-z",
          "--no-renames",
          "--no-ext-diff",
          start,
          "HEAD",
          "--",
          ...scratchSpecs,
        ]),
  ]);
  const paths = [...nulSeparated(tracked.stdout), ...nulSeparated(untracked.stdout)];
  const committed: { path: Buffer; content: Buffer | null }[] = [];
  for (const path of ownScratch ? nulSeparated(ownScratch.stdout) : []) {
    const blob = await gitBuffer(worktree, ["cat-file", "blob", `HEAD:${path.toString("utf8")}`], {
      allowExit: [0, 128],
    });
    committed.push({ path, content: blob.exitCode === 0 ? blob.stdout : null });
  }
  return { paths, messages: log.stdout, head: head.stdout, committed };
}

/** The entries of git's `-z` output, as raw bytes. */
function nulSeparated(out: Buffer): Buffer[] {
  const entries: Buffer[] = [];
  let at = 0;
  for (let nul = out.indexOf(0); nul >= 0; at = nul + 1, nul = out.indexOf(0, at))
    if (nul > at) entries.push(out.subarray(at, nul));
  return entries;
}

/** Every path changed between two commits, sorted; a rename or copy contributes both its paths. */
export async function changedFiles(repo: string, from: string, to: string): Promise<string[]> {
  const r = await git(repo, ["diff-tree", "-r", "-z", "-M", "--name-status", from, to]);
  // NUL-separated: a status letter (R and C with a score), then one path, or two for R and C.
  const t = r.stdout.split("\0");
  const set = new Set<string>();
  for (let i = 0; i < t.length; ) {
    const code = t[i++];
    if (!code) continue;
    const paths = code.startsWith("R") || code.startsWith("C") ? 2 : 1;
    for (let k = 0; k < paths; k++) set.add(t[i++] ?? "");
  }
  set.delete("");
  return [...set].sort();
}

/** The entries `to` adds or changes against `from`: each path with its new mode (deletions left out). */
export async function changedEntries(
  repo: string,
  from: string,
  to: string,
): Promise<Array<{ path: string; mode: string }>> {
  const r = await git(repo, ["diff-tree", "-r", "-z", "--no-renames", from, to]);
  // NUL-separated pairs: `:OLDMODE NEWMODE OLDID NEWID STATUS`, then the path.
  const t = r.stdout.split("\0");
  const out: Array<{ path: string; mode: string }> = [];
  for (let i = 0; i + 1 < t.length; i += 2) {
    const [, mode, , , status] = (t[i] ?? "").slice(1).split(" ");
    if (mode && status !== "D") out.push({ path: t[i + 1]!, mode });
  }
  return out;
}

/**
 * The patch from `from` to `to` as bytes (binary files as `GIT binary patch`, full object ids),
 * appliable with `git apply`. Plumbing with explicit prefixes, so the user's diff settings
 * (noprefix, external diff, textconv, colour) cannot change it.
 */
export async function diffPatch(repo: string, from: string, to: string): Promise<Buffer> {
  const r = await gitBuffer(repo, [...PLAIN_DIFF, "--binary", "--full-index", from, to]);
  return r.stdout;
}

/** `diff-tree` as a patch, renames found, whatever the user's diff settings say. */
export const PLAIN_DIFF = [
  "diff-tree",
  "-p",
  "-r",
  "-M",
  "--no-color",
  "--no-ext-diff",
  "--no-textconv",
  "--src-prefix=a/",
  "--dst-prefix=b/",
] as const;
