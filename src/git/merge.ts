import type { Conflict } from "../contract/report.js";
import { ChangeCache, conflictUnits, type FoldItem, foldMerge, hiddenConflicts } from "./fold.js";
import { mergeTree } from "./merge-tree.js";
import type { Identity } from "./repo.js";
import { branchRef, commitTree, git, independentCommits, requireCommit, treeOf } from "./repo.js";

export { type AdvanceResult, type AdvanceTargetOptions, advanceTarget } from "./advance.js";

/** A task's result to merge: its id, its branch tip, and optionally the commit it started from. */
export type MergeItem = FoldItem;

/** The pre-merge check: the whole merge computed in memory. */
export interface MergeCheck {
  /** The merged tree; null when anything conflicts. */
  tree: string | null;
  /**
   * Parents for the integration commit: `[base, ...task tips not contained in another]`, or
   * the one tip that contains everything (then the integration is a fast-forward to it).
   */
  parents: string[];
  /** Tasks merged cleanly, in order. */
  merged: string[];
  /** After each task merged: a commit whose tree is the merge so far (FoldResult.steps). */
  steps: string[];
  /** The tree of what merged cleanly (`tree` itself when nothing conflicts). */
  mergedTree: string;
  /** Tasks left out by a conflict (their own, or one they carry), in order. */
  leftOut: string[];
  /** Every conflict found; the merge goes on past each conflicting item to find the rest. */
  conflicts: Conflict[];
}

/**
 * Computes the merge of `items`, in the given (topological) order, onto `base` entirely in
 * memory (`git merge-tree --write-tree`). Only objects are written: the repository's refs,
 * HEAD, index and work tree are untouched. A conflicting item is reported (its files, kind,
 * and the tasks whose own changes collide) and left out, and the check goes on.
 */
export async function checkMerge(
  repo: string,
  base: string,
  items: readonly MergeItem[],
): Promise<MergeCheck> {
  const baseCommit = await requireCommit(repo, base);
  const fold = await foldMerge(repo, baseCommit, items, { base: baseCommit });
  // Nothing merges when anything conflicts: report every pair at once, not one round at a time.
  const hidden = fold.conflicts.length > 0 ? await hiddenConflicts(repo, fold, { base: baseCommit }) : [];
  const parents = await integrationParents(
    repo,
    baseCommit,
    fold.merged.map((m) => m.commit),
  );
  return {
    tree: fold.conflicts.length > 0 ? null : fold.tree,
    parents,
    merged: fold.merged.map((m) => m.task),
    steps: fold.steps,
    mergedTree: fold.tree,
    leftOut: fold.skipped.map((m) => m.task),
    conflicts: [...fold.conflicts, ...hidden],
  };
}

/**
 * A commit of `tree` with the integration's parents for the tasks' `commits`: where a redo
 * starts (the integration of the tasks merged before it). The one parent itself when it already
 * has that tree.
 */
export async function partialIntegration(
  repo: string,
  o: { base: string; commits: readonly string[]; tree: string; message: string; identity?: Identity },
): Promise<string> {
  const parents = await integrationParents(repo, o.base, o.commits);
  const [only] = parents;
  if (parents.length === 1 && only !== undefined && (await treeOf(repo, only)) === o.tree) return only;
  return commitTree(repo, o.tree, parents, o.message, o.identity ? { identity: o.identity } : {});
}

/** Points `ref` at `commit` (created or moved). */
export async function keepRef(repo: string, ref: string, commit: string, message: string): Promise<void> {
  await git(repo, ["update-ref", "-m", message, ref, commit]);
}

/** Deletes every ref under `prefix` (e.g. `refs/termorch/<run>/redo/`). */
export async function deleteRefsUnder(repo: string, prefix: string): Promise<void> {
  const r = await git(repo, ["for-each-ref", "--format=%(refname)", prefix]);
  const refs = r.stdout.split("\n").filter((l) => l !== "");
  if (refs.length === 0) return;
  await git(repo, ["update-ref", "--stdin"], { input: refs.map((ref) => `delete ${ref}\n`).join("") });
}

/**
 * The integration commit's parents: `[base, ...tips not contained in another]`, or the one tip
 * that contains everything (a fast-forward).
 */
export async function integrationParents(
  repo: string,
  base: string,
  commits: readonly string[],
): Promise<string[]> {
  const independent = await independentCommits(repo, [base, ...commits]);
  const heads = independent.filter((c) => c !== base);
  if (heads.length === 0) return [base];
  if (heads.length === 1 && !independent.includes(base)) return heads;
  return [base, ...heads];
}

/** What createIntegrationCommit needs. */
export interface IntegrationCommitOptions {
  tree: string;
  /** From MergeCheck.parents; the first is the target's commit unless it is a fast-forward. */
  parents: readonly string[];
  message: string;
  /** Branch to point at the result, e.g. `termorch/<run>/integration` (created or reset). */
  branch: string;
  /** Author and committer; default: the repository's configured user. */
  identity?: Identity;
}

/**
 * Makes the integration commit and points `branch` at it. When the only parent already has
 * exactly `tree` (a fast-forward), that parent is the integration: no empty commit is made.
 */
export async function createIntegrationCommit(repo: string, o: IntegrationCommitOptions): Promise<string> {
  const [first] = o.parents;
  if (first === undefined) throw new Error("createIntegrationCommit needs at least one parent");
  const commit =
    o.parents.length === 1 && (await treeOf(repo, first)) === o.tree
      ? first
      : await commitTree(repo, o.tree, o.parents, o.message, o);
  await git(repo, ["update-ref", "-m", "termorch: integration", branchRef(o.branch), commit]);
  return commit;
}

/** What mergeOntoMovedTarget needs. */
export interface MovedTargetOptions {
  /** The target's current tip (it moved away from the base during the run). */
  target: string;
  /** The integration commit built on the base. */
  integration: string;
  /** The run's base commit. */
  base: string;
  /** The merged tasks, to name those whose changes collide with the target's new commits. */
  items: readonly MergeItem[];
  message: string;
  /** When given, this branch (the integration branch) is pointed at the result. */
  branch?: string;
  /** Author and committer; default: the repository's configured user. */
  identity?: Identity;
}

/** The integration merged onto the moved target, or the conflicts (then nothing was changed). */
export type MovedTargetResult = { ok: true; commit: string } | { ok: false; conflicts: Conflict[] };

/**
 * For a target branch that moved during the run: merges the integration onto its new tip in
 * memory, with the same conflict check as checkMerge. On success returns the commit to
 * advance the target to (a merge commit, or one side when it already contains the other).
 */
export async function mergeOntoMovedTarget(repo: string, o: MovedTargetOptions): Promise<MovedTargetResult> {
  const target = await requireCommit(repo, o.target);
  const integration = await requireCommit(repo, o.integration);
  const r = await mergeTree(repo, target, integration);
  if (!r.clean) {
    const changes = new ChangeCache(repo, await requireCommit(repo, o.base));
    const groups = new Map<string, Conflict>();
    for (const u of conflictUnits(r)) {
      const tasks = await changes.touching(o.items, u.paths);
      const key = tasks.join("\0");
      let c = groups.get(key);
      if (!c) {
        c = { tasks, files: [], detail: "" };
        groups.set(key, c);
      }
      c.files.push(...u.paths.filter((p) => !c?.files.includes(p)));
      c.detail += `${c.detail ? "; " : ""}${u.kind} in ${u.paths.join(" <- ")}`;
    }
    return {
      ok: false,
      conflicts: [...groups.values()].map((c) => ({
        tasks: c.tasks,
        files: c.files.sort(),
        detail: `the target branch changed during the run and conflicts with ${c.tasks.length ? c.tasks.join(", ") : "the run's changes"}: ${c.detail}`,
      })),
    };
  }
  const heads = await independentCommits(repo, [target, integration]);
  const commit =
    heads.length === 1 && heads[0] !== undefined
      ? heads[0]
      : await commitTree(repo, r.tree, [target, integration], o.message, o);
  if (o.branch !== undefined) {
    await git(repo, [
      "update-ref",
      "-m",
      "termorch: integration onto moved target",
      branchRef(o.branch),
      commit,
    ]);
  }
  return { ok: true, commit };
}
