import { lstat, realpath, rm } from "node:fs/promises";
import path from "node:path";
import { KeyedQueue } from "../concurrency/keyed-queue.js";
import type { Conflict } from "../contract/report.js";
import { copyIntoWorktree } from "./copy.js";
import { GitError } from "./errors.js";
import { foldMerge } from "./fold.js";
import { linkIncludes, normalizeInclude } from "./include.js";
import {
  branchRef,
  commitTree,
  git,
  type Identity,
  independentCommits,
  requireCommit,
  resolveCommit,
  withTrailers,
} from "./repo.js";

/** A dependency of a task: its id and the branch holding its committed result. */
export interface TaskDep {
  task: string;
  branch: string;
}

/**
 * Worktree administration of one repository, one command at a time: concurrent `worktree add`
 * calls race on `.git/worktrees/` ("failed to read .../commondir") under load, and no lock file
 * guards that, so retrying on lock errors does not help.
 */
const worktreeQueue = new KeyedQueue();
export function serialized<T>(repo: string, fn: () => Promise<T>): Promise<T> {
  return worktreeQueue.run(path.resolve(repo), fn);
}

/** Where a worktree's HEAD goes: a branch (full ref name), or a commit, detached. */
export type Checkout = { branch: string } | { detached: string };

/**
 * `git worktree add` in git's own two steps, of which only the first is serialised:
 * registering the worktree (a few ms) touches `.git/worktrees/`; checking its files out (seconds
 * on a large repository) does not, so the worktrees of independent tasks fill at the same time.
 * A failure in the second step removes the worktree again.
 */
async function addWorktree(repo: string, wt: string, to: Checkout): Promise<void> {
  // The short name makes git check the branch out; a full ref name would detach HEAD.
  const what = "branch" in to ? [shortBranch(to.branch)] : ["--detach", to.detached];
  await serialized(repo, () => git(repo, ["worktree", "add", "--quiet", "--no-checkout", wt, ...what]));
  try {
    await fillWorktree(wt);
  } catch (err) {
    await removeWorktree(repo, wt).catch(() => {});
    throw err;
  }
}

/**
 * Checks HEAD's commit out in `wt`, files and index: what `git worktree add` runs itself once
 * the worktree is registered (its post-checkout hook aside: termorch runs git without hooks,
 * see repo.ts). A worktree that already holds files (a pooled one) has only those rewritten
 * whose stat data differs from its index.
 */
export async function fillWorktree(wt: string): Promise<void> {
  await git(wt, ["reset", "--quiet", "--hard", "--no-recurse-submodules"]);
}

/** What prepareTaskWorktree needs. */
export interface PrepareTaskWorktreeOptions {
  /** Top-level directory of the user's repository (RepoInfo.root). */
  repo: string;
  /** Where the worktree goes; must not exist yet (or be an empty directory). */
  path: string;
  /** Branch to create, e.g. `termorch/<run>/<task>`; it must not exist yet. */
  branch: string;
  /** Commit the run started from (the workspace's HEAD). */
  base: string;
  /**
   * The task's own start (its `start_commit`), taking the base's place: its dependencies are
   * merged onto it, and it is kept even when one dependency's result contains everything else.
   */
  start?: string | undefined;
  /** Upstream tasks whose results the task starts from, in merge order. */
  deps: readonly TaskDep[];
  /** Untracked workspace paths (relative to `repo`) to symlink into the worktree. */
  include: readonly string[];
  /** Untracked workspace paths (relative to `repo`) to copy into the worktree (`worktree_copy`). */
  copy?: readonly string[];
  /** Author and committer of a merge of several dependencies; default: the repository's configured user. */
  identity?: Identity;
  /** Trailers for that merge commit's message (e.g. the run and task). */
  trailers?: Readonly<Record<string, string>>;
  /**
   * Take over what an earlier, interrupted attempt to prepare this same task left (a resumed
   * run): `branch` when it holds no commit beyond the start commit, and the worktree at `path`
   * on it. Anything else under that name is not provably a leftover, and is refused.
   */
  reclaim?: boolean;
  /** Where a finished worktree may be taken from instead of adding one (the warm pool). */
  pool?: WorktreeSource | undefined;
  /** Called right after the branch is created / the worktree is added (fault injection in tests). */
  hooks?: { afterBranch?: () => void; afterWorktree?: () => void };
}

/** Hands out a worktree checked out at `dest` (see WorktreePool.take); false when it has none. */
export interface WorktreeSource {
  take(dest: string, to: Checkout): Promise<boolean>;
}

/**
 * The worktree was created (`reused`: taken from the pool), or the dependencies conflict and
 * nothing was created.
 */
export type PrepareTaskWorktreeResult =
  | { ok: true; startCommit: string; reused: boolean }
  | { ok: false; conflict: Conflict };

/**
 * Creates branch `branch` at the task's start commit and a worktree on it at `path`, then links
 * the `include` paths and copies the `copy` ones. The start commit is `base`, the single dependency's tip, or an in-memory
 * merge of all dependency tips (a merge commit whose parents are the tips). Nothing in the
 * user's work tree, index or HEAD is touched; safe to run for many tasks at once.
 */
export async function prepareTaskWorktree(o: PrepareTaskWorktreeOptions): Promise<PrepareTaskWorktreeResult> {
  const include = normalizeInclude(o.include);
  const start = await taskStartCommit(o);
  if (!start.ok) return start;
  const ref = branchRef(o.branch);
  const wt = path.resolve(o.path);
  if (o.reclaim) await reclaimLeftovers(o.repo, ref, wt, start.commit);
  // Create-only compare-and-swap (empty old value): a leftover branch of an earlier attempt
  // is never silently reused or overwritten.
  const created = await git(o.repo, ["update-ref", "-m", "termorch: task branch", ref, start.commit, ""], {
    allowExit: [0, 1, 128],
  });
  if (created.exitCode !== 0) {
    throw new GitError(
      `cannot create branch ${o.branch}: ${created.stderr.trim()} (left over from an earlier run? delete it with: git branch -D ${shortBranch(ref)})`,
      { cwd: o.repo, stderr: created.stderr, status: created.exitCode },
    );
  }
  o.hooks?.afterBranch?.();
  const reused = await checkoutTaskWorktree(o, include).catch(async (err: unknown) => {
    // `path` may be a directory that is not ours (that is why git refused): leave it alone.
    await git(o.repo, ["update-ref", "-d", ref, start.commit], { allowExit: [0, 1, 128] });
    throw err;
  });
  return { ok: true, startCommit: start.commit, reused };
}

/**
 * A worktree at `path` on the existing branch `branch` (taken from the pool, or added), with the
 * `include` links and `copy` copies; true when taken from the pool. What it made is removed when
 * anything fails.
 */
export async function checkoutTaskWorktree(
  o: Pick<PrepareTaskWorktreeOptions, "repo" | "path" | "branch" | "copy" | "pool" | "hooks">,
  include: readonly string[],
): Promise<boolean> {
  const ref = branchRef(o.branch);
  const wt = path.resolve(o.path);
  const reused = (await o.pool?.take(wt, { branch: ref })) ?? false;
  if (!reused) await addWorktree(o.repo, wt, { branch: ref });
  o.hooks?.afterWorktree?.();
  try {
    await linkIncludes(o.repo, wt, include);
    await copyIntoWorktree(o.repo, wt, o.copy ?? []);
  } catch (err) {
    await removeWorktree(o.repo, wt);
    throw err;
  }
  return reused;
}

/**
 * Moves a task's branch from `from` to `to` (compare-and-swap: whatever else moved it is never
 * overwritten). "already": it is at `to` (an interrupted driver moved it); else where it is.
 */
export async function moveTaskBranch(
  repo: string,
  branch: string,
  from: string,
  to: string,
  message: string,
): Promise<"moved" | "already" | { elsewhere: string | null }> {
  const ref = branchRef(branch);
  const r = await git(repo, ["update-ref", "-m", message, ref, to, from], { allowExit: [0, 1, 128] });
  if (r.exitCode === 0) return "moved";
  const tip = await resolveCommit(repo, ref);
  return tip === to ? "already" : { elsewhere: tip };
}

/**
 * Creates a task's branch at its start commit without a worktree (a scale-out coordinator: the
 * worktree is a worker's). `reclaim`: a resumed run takes over the branch an interrupted earlier
 * process created, when it provably holds nothing beyond the start (as prepareTaskWorktree does).
 */
export async function createTaskBranch(
  repo: string,
  branch: string,
  commit: string,
  reclaim: boolean,
  wouldBeWorktree: string,
): Promise<void> {
  const ref = branchRef(branch);
  if (reclaim) await reclaimLeftovers(repo, ref, path.resolve(wouldBeWorktree), commit);
  const created = await git(repo, ["update-ref", "-m", "termorch: task branch", ref, commit, ""], {
    allowExit: [0, 1, 128],
  });
  if (created.exitCode !== 0)
    throw new GitError(
      `cannot create branch ${branch}: ${created.stderr.trim()} (left over from an earlier run? delete it with: git branch -D ${branch})`,
      { cwd: repo, stderr: created.stderr, status: created.exitCode },
    );
}

/**
 * A task's start commit, in memory: `base`, the single dependency's tip, or a merge of all
 * dependency tips (a scale-out coordinator publishes it for a worker instead of adding a worktree).
 */
export async function taskStartCommit(
  o: Pick<
    PrepareTaskWorktreeOptions,
    "repo" | "base" | "start" | "deps" | "branch" | "identity" | "trailers"
  >,
): Promise<{ ok: true; commit: string } | { ok: false; conflict: Conflict }> {
  const base = await requireCommit(o.repo, o.start ?? o.base);
  if (o.deps.length === 0) return { ok: true, commit: base };
  const tips = await Promise.all(o.deps.map((d) => requireCommit(o.repo, branchRef(d.branch))));
  const items = o.deps.map((d, i) => ({ task: d.task, commit: tips[i] as string }));
  if (items.length === 1 && o.start === undefined) return { ok: true, commit: items[0]?.commit as string };
  const fold = await foldMerge(o.repo, base, items, { base });
  if (fold.conflicts.length > 0) return { ok: false, conflict: combine(o, fold.conflicts) };
  // A dependency that already contains the others (a chain) is the start as it is.
  const heads = await independentCommits(o.repo, o.start === undefined ? tips : [base, ...tips]);
  if (heads.length === 1) return { ok: true, commit: heads[0] as string };
  const names = o.deps.map((d) => d.task).join(", ");
  const message = withTrailers(`termorch: merge ${names} for ${o.branch}`, o.trailers ?? {});
  const commit = await commitTree(
    o.repo,
    fold.tree,
    heads,
    message,
    o.identity ? { identity: o.identity } : {},
  );
  return { ok: true, commit };
}

/**
 * Removes the branch and worktree an interrupted preparation of the same task left behind, so
 * it can be prepared again. Only what is provably such a leftover goes: the branch must point
 * at the start commit just computed, or at an equivalent one (a merge of several dependencies
 * is re-created with a new date: same tree, same parents), so it holds no work; the worktree
 * must be at `wt` (termorch's path for this run and task) and on that branch. Anything else is
 * left alone and refused with what to do.
 */
async function reclaimLeftovers(repo: string, ref: string, wt: string, start: string): Promise<void> {
  const tip = await resolveCommit(repo, ref);
  const worktrees = await listWorktrees(repo);
  const here = await realpath(wt).catch(() => wt);
  const sameDir = async (p: string): Promise<boolean> => (await realpath(p).catch(() => p)) === here;
  const atPath: WorktreeEntry[] = [];
  for (const w of worktrees) {
    if (!(await sameDir(w.path))) continue;
    // Detached and holding nothing: a pooled worktree the interrupted preparation had moved
    // here and not yet checked out (git/worktree-pool.ts). Only termorch puts one at this path.
    if (w.branch === null && !w.bare && (await holdsNothing(w.path))) await removeWorktree(repo, w.path);
    else atPath.push(w);
  }
  const onBranch = worktrees.find((w) => w.branch === ref);
  if (tip === null) {
    // A worktree at our path on no branch of ours is not something this task left.
    if (atPath.length > 0)
      throw new GitError(
        `a worktree is already at ${wt} (not on ${shortBranch(ref)}); remove it with: git worktree remove --force ${wt}`,
        { cwd: repo },
      );
    return;
  }
  if (!(await equivalent(repo, tip, start))) {
    throw new GitError(
      `cannot create branch ${shortBranch(ref)}: it exists and holds commits beyond the task's start, so it is not a leftover of an attempt that never launched; it was left alone (inspect it, then delete it with: git branch -D ${shortBranch(ref)})`,
      { cwd: repo },
    );
  }
  if (onBranch && !(await sameDir(onBranch.path))) {
    throw new GitError(
      `cannot create branch ${shortBranch(ref)}: it is checked out in ${onBranch.path}, not in termorch's worktree ${wt}; it was left alone`,
      { cwd: repo },
    );
  }
  if (atPath.some((w) => w.branch !== ref)) {
    throw new GitError(
      `a worktree is already at ${wt} (not on ${shortBranch(ref)}); remove it with: git worktree remove --force ${wt}`,
      { cwd: repo },
    );
  }
  if (onBranch) await removeWorktree(repo, wt);
  // Compare-and-swap on the tip checked above.
  await git(repo, ["update-ref", "-m", "termorch: reclaim an interrupted preparation", "-d", ref, tip]);
}

async function holdsNothing(wt: string): Promise<boolean> {
  const r = await git(wt, ["status", "--porcelain", "--untracked-files=all"], { allowExit: [0, 128] });
  return r.exitCode === 0 && r.stdout === "";
}

/** The same commit, or one with the same tree and parents (a re-created merge commit). */
async function equivalent(repo: string, a: string, b: string): Promise<boolean> {
  if (a === b) return true;
  const r = await git(repo, ["rev-list", "--no-walk=unsorted", "--format=%T %P", a, b]);
  const shapes = r.stdout.split("\n").filter((l) => l !== "" && !l.startsWith("commit "));
  return shapes.length === 2 && shapes[0] === shapes[1];
}

function combine(
  o: Pick<PrepareTaskWorktreeOptions, "deps" | "branch">,
  conflicts: readonly Conflict[],
): Conflict {
  const order = o.deps.map((d) => d.task);
  const tasks = [...new Set(conflicts.flatMap((c) => c.tasks))].sort(
    (a, b) => order.indexOf(a) - order.indexOf(b),
  );
  const files = [...new Set(conflicts.flatMap((c) => c.files))].sort();
  return {
    tasks,
    files,
    detail: `dependencies of ${o.branch} conflict with each other: ${conflicts.map((c) => c.detail).join("; ")}`,
  };
}

/** What prepareDetachedWorktree needs. */
export interface PrepareDetachedWorktreeOptions {
  repo: string;
  path: string;
  /** Commit to check out (detached: no branch is created). */
  commit: string;
  include: readonly string[];
  copy?: readonly string[];
  pool?: WorktreeSource | undefined;
}

/** A throwaway worktree at `commit` with the include paths linked (and copies made), e.g. to run gates on the integration. */
export async function prepareDetachedWorktree(o: PrepareDetachedWorktreeOptions): Promise<void> {
  const include = normalizeInclude(o.include);
  const commit = await requireCommit(o.repo, o.commit);
  const wt = path.resolve(o.path);
  if (!(await o.pool?.take(wt, { detached: commit }))) await addWorktree(o.repo, wt, { detached: commit });
  try {
    await linkIncludes(o.repo, wt, include);
    await copyIntoWorktree(o.repo, wt, o.copy ?? []);
  } catch (err) {
    await removeWorktree(o.repo, wt);
    throw err;
  }
}

/**
 * Removes the worktree at `path` with everything in it (its changes are expected to be
 * committed already; include symlinks are removed, never followed). A path that is not a
 * worktree of `repo` is left alone; a worktree whose directory is gone is pruned.
 */
export async function removeWorktree(repo: string, worktreePath: string): Promise<void> {
  const wt = path.resolve(worktreePath);
  const r = await serialized(repo, () =>
    git(repo, ["worktree", "remove", "--force", wt], { allowExit: [0, 128] }),
  );
  if (r.exitCode === 0) return;
  if (!(await lstat(wt).catch(() => null))) {
    // Its folder is gone, so a lock (an agent's `git worktree lock`) keeps nothing: git would
    // otherwise list it for good.
    await git(repo, ["worktree", "unlock", wt], { allowExit: [0, 128] });
    await serialized(repo, () => git(repo, ["worktree", "prune"]));
    return;
  }
  if (/is not a working tree/.test(r.stderr)) return;
  throw new GitError(`cannot remove worktree ${wt}: ${r.stderr.trim()}`, {
    cwd: repo,
    stderr: r.stderr,
    status: r.exitCode,
  });
}

/**
 * Removes many worktrees of one repository at once: their folders, then a single
 * `git worktree prune`, instead of one serialised `git worktree remove` (a few ms of CPU) per
 * task. Only paths `git worktree list` names as linked worktrees of `repo` are touched (include
 * symlinks inside are removed, never followed); their work must be committed already.
 * Returns the paths that were removed.
 */
export async function removeWorktrees(repo: string, paths: readonly string[]): Promise<string[]> {
  // Compared as real paths: git lists them resolved ($TMPDIR may be a symlink, as on macOS).
  const real = (p: string): Promise<string> => realpath(p).catch(() => path.resolve(p));
  const wanted = new Set(await Promise.all(paths.map(real)));
  const linked = await Promise.all(
    (await listWorktrees(repo)).slice(1).map(async (w) => ({ ...w, path: await real(w.path) })),
  );
  const doomed = linked.filter((w) => wanted.has(w.path));
  // A lock (an agent's `git worktree lock` of its own worktree) would keep git's record of it.
  for (const w of doomed.filter((w) => w.locked))
    await git(repo, ["worktree", "unlock", w.path], { allowExit: [0, 128] });
  await Promise.all(doomed.map((w) => rm(w.path, { recursive: true, force: true })));
  if (doomed.length > 0) await serialized(repo, () => git(repo, ["worktree", "prune"]));
  return doomed.map((w) => w.path);
}

/** Whether `ref` is a full branch name (`refs/heads/...`): the only refs termorch ever deletes. */
export const isBranch = (ref: string): boolean => ref.startsWith("refs/heads/");

/**
 * Deletes the branches whose tips `commit` contains (one `for-each-ref --merged`, one
 * `update-ref --stdin` transaction, each deletion a compare-and-swap on the tip just read), so
 * no commit can be lost. A branch checked out in a worktree is kept. Returns what was kept.
 */
export async function deleteMergedBranches(
  repo: string,
  branches: readonly string[],
  commit: string,
): Promise<string[]> {
  const refs = [...new Set(branches.map(branchRef))];
  if (refs.length === 0) return [];
  const merged = await git(repo, [
    "for-each-ref",
    "--format=%(refname)%00%(objectname)",
    `--merged=${commit}`,
    ...refs,
  ]);
  const tips = new Map(
    merged.stdout
      .split("\n")
      .filter(Boolean)
      .map((line) => line.split("\0") as [string, string]),
  );
  const checkedOut = new Set((await listWorktrees(repo)).map((w) => w.branch));
  const doomed = refs.filter((r) => tips.has(r) && !checkedOut.has(r));
  if (doomed.length > 0) {
    const input = doomed.map((r) => `delete ${r} ${tips.get(r)}\n`).join("");
    await git(repo, ["update-ref", "-m", "termorch: delete merged branch", "--stdin"], { input });
  }
  return refs.filter((r) => !doomed.includes(r)).map(shortBranch);
}

/** Outcome of deleteBranch. */
export type DeleteBranchResult =
  | { status: "deleted"; commit: string }
  | { status: "absent" }
  /** Not deleted; `reason` says why and what to do. */
  | { status: "kept"; reason: string };

/**
 * Deletes `branch` unless that would lose commits: without `force`, its tip must be reachable
 * from another ref (e.g. the target or the integration branch). A branch checked out in a
 * worktree is never deleted (its HEAD would dangle); remove the worktree first.
 */
export async function deleteBranch(
  repo: string,
  branch: string,
  opts: { force: boolean },
): Promise<DeleteBranchResult> {
  const ref = branchRef(branch);
  const tip = await resolveCommit(repo, ref);
  if (!tip) return { status: "absent" };
  const checkedOut = (await listWorktrees(repo)).find((w) => w.branch === ref);
  if (checkedOut) {
    return {
      status: "kept",
      reason: `${branch} is checked out in ${checkedOut.path}; remove that worktree first`,
    };
  }
  if (!opts.force) {
    const r = await git(repo, ["for-each-ref", "--format=%(refname)", "--contains", tip]);
    const others = r.stdout.split("\n").filter((l) => l !== "" && l !== ref);
    if (others.length === 0) {
      return {
        status: "kept",
        reason: `${branch} has commits that no other ref contains; they would be lost (force to delete anyway)`,
      };
    }
  }
  // Compare-and-swap on the tip we checked, so a commit added meanwhile is not lost.
  await git(repo, ["update-ref", "-m", "termorch: delete branch", "-d", ref, tip]);
  return { status: "deleted", commit: tip };
}

/** One entry of `git worktree list`. */
export interface WorktreeEntry {
  path: string;
  head: string | null;
  /** Full ref checked out there; null when detached or bare. */
  branch: string | null;
  bare: boolean;
  /** Its directory is gone (git would prune it). */
  prunable: boolean;
  /** Locked with `git worktree lock`: git neither moves nor prunes it. */
  locked: boolean;
}

/** The repository's worktrees, the main one first. */
export async function listWorktrees(repo: string): Promise<WorktreeEntry[]> {
  const r = await git(repo, ["worktree", "list", "--porcelain", "-z"]);
  const out: WorktreeEntry[] = [];
  let cur: WorktreeEntry | null = null;
  for (const field of r.stdout.split("\0")) {
    if (field === "") {
      if (cur) out.push(cur);
      cur = null;
      continue;
    }
    const sp = field.indexOf(" ");
    const key = sp < 0 ? field : field.slice(0, sp);
    const value = sp < 0 ? "" : field.slice(sp + 1);
    if (key === "worktree")
      cur = { path: value, head: null, branch: null, bare: false, prunable: false, locked: false };
    else if (!cur) continue;
    else if (key === "HEAD") cur.head = value;
    else if (key === "branch") cur.branch = value;
    else if (key === "bare") cur.bare = true;
    else if (key === "prunable") cur.prunable = true;
    else if (key === "locked") cur.locked = true;
  }
  if (cur) out.push(cur);
  return out;
}

function shortBranch(ref: string): string {
  return ref.startsWith("refs/heads/") ? ref.slice("refs/heads/".length) : ref;
}

/**
 * Puts a worktree back to `commit`, as if nothing had run there: its changes and untracked
 * files are dropped, ignored ones too, except the `keep` paths (repository-relative: the
 * include links, which point at the user's own files, and the `worktree_copy` copies).
 */
export async function resetWorktree(wt: string, commit: string, keep: readonly string[]): Promise<void> {
  await git(wt, ["reset", "-q", "--hard", commit]);
  await git(wt, ["clean", "-q", "-ffdx", ...keep.flatMap((p) => ["-e", `/${p}`])]);
}
