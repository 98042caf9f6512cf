import type { Conflict } from "../contract/report.js";
import {
  type ConflictKind,
  conflictKind,
  isConflictMessage,
  type MergeTreeResult,
  mergeTree,
} from "./merge-tree.js";
import { commitTree, git, TERMORCH_IDENTITY, treeOf } from "./repo.js";

/** A task's commit to merge. */
export interface FoldItem {
  task: string;
  commit: string;
  /**
   * Commit the task started from; its own changes are counted from here when naming the
   * tasks of a conflict. Default: the fold's base.
   */
  start?: string;
}

/** Result of folding items, in order, into one in-memory merge. */
export interface FoldResult {
  /** A commit whose tree is the merge of everything merged; `start` itself when nothing merged. */
  commit: string;
  tree: string;
  /** Items merged cleanly, in order. */
  merged: FoldItem[];
  /** After each merged item (same order): a commit whose tree is the merge so far (a bisect's probes). */
  steps: string[];
  /** Items left out because they conflicted, in order. */
  skipped: FoldItem[];
  conflicts: Conflict[];
}

/** One conflict git reported: its kind and the paths it involves (both sides of a rename). */
export interface ConflictUnit {
  kind: ConflictKind;
  paths: string[];
}

/** The conflicts of a merge-tree result, one per CONFLICT message, plus conflicted paths no message named. */
export function conflictUnits(r: MergeTreeResult): ConflictUnit[] {
  const units: ConflictUnit[] = [];
  const covered = new Set<string>();
  for (const m of r.messages) {
    if (!isConflictMessage(m) || m.paths.length === 0) continue;
    units.push({ kind: conflictKind(m), paths: m.paths });
    for (const p of m.paths) covered.add(p);
  }
  for (const p of r.conflicted) if (!covered.has(p)) units.push({ kind: "content", paths: [p] });
  return withBinaryNoted(units);
}

/**
 * git says a binary file's conflict twice: "Cannot merge binary files" (CONFLICT (binary)), then
 * the conflict itself (content, add/add) for the same path. One conflict, told once: the other
 * unit's kind marked "(binary)".
 */
function withBinaryNoted(units: ConflictUnit[]): ConflictUnit[] {
  const binary = "content (binary)";
  const key = (u: ConflictUnit): string => u.paths.join("\0");
  const binaryPaths = new Set(units.filter((u) => u.kind === binary).map(key));
  const toldElse = new Set(units.filter((u) => u.kind !== binary && binaryPaths.has(key(u))).map(key));
  return units.flatMap((u) => {
    if (u.kind === binary) return toldElse.has(key(u)) ? [] : [u];
    if (!binaryPaths.has(key(u))) return [u];
    return [{ ...u, kind: u.kind === "content" ? binary : `${u.kind} (binary)` }];
  });
}

/**
 * Merges `items` one after the other onto `start`, in memory (`merge-tree --write-tree`).
 * A conflicting item is left out and the fold goes on, so every conflict is reported.
 */
export async function foldMerge(
  repo: string,
  start: string,
  items: readonly FoldItem[],
  opts: { base: string },
): Promise<FoldResult> {
  const fold = new MergeFold(repo, start, opts);
  for (const item of items) await fold.step(item);
  return fold.result();
}

/** One step of a fold: merged, or left out with its conflicts (those not reported before). */
export type FoldStep = { clean: true } | { clean: false; conflicts: Conflict[]; units: ConflictUnit[] };

/**
 * A fold taken one item at a time, so the caller can act between steps (the redo of a
 * conflicting task, merge/ordered.ts). git 2.38/2.39 merge-tree only merges commits, so each
 * clean step becomes an unreferenced commit (parents: the merge so far and the item), which also
 * gives the next step the right merge base; nothing but objects is written.
 */
export class MergeFold {
  private acc: string;
  private accTree: string | null = null;
  private readonly merged: FoldItem[] = [];
  private readonly stepCommits: string[] = [];
  private skipped: FoldItem[] = [];
  private readonly conflicts: Conflict[] = [];
  private readonly reported = new Set<string>();
  private readonly changes: ChangeCache;

  constructor(
    private readonly repo: string,
    start: string,
    opts: { base: string },
  ) {
    this.acc = start;
    this.changes = new ChangeCache(repo, opts.base);
  }

  /** The merge so far: a commit whose tree is it (the start itself when nothing merged). */
  get commit(): string {
    return this.acc;
  }

  get mergedItems(): readonly FoldItem[] {
    return this.merged;
  }

  /** After each merged item: a commit whose tree is the merge of it and those before it. */
  get steps(): readonly string[] {
    return this.stepCommits;
  }

  /**
   * Merges `item` onto the fold. `replayFrom`: the commit the item's own work starts from, used
   * as the merge base, so only that work is applied (a dependent of a task whose result was
   * replaced by a redo carries the replaced result, which must not be merged a second time).
   */
  async step(item: FoldItem, replayFrom?: string): Promise<FoldStep> {
    if (item.commit === this.acc) {
      this.merged.push(item);
      this.stepCommits.push(this.acc);
      return { clean: true };
    }
    const ours =
      replayFrom === undefined
        ? this.acc
        : await commitTree(
            this.repo,
            await this.tree(),
            [replayFrom],
            `termorch: replay base for ${item.task}`,
            {
              identity: TERMORCH_IDENTITY,
            },
          );
    const r = await mergeTree(this.repo, ours, item.commit);
    if (r.clean) {
      // A scratch commit for the next merge-tree only (never referenced): no identity lookup.
      this.acc = await commitTree(
        this.repo,
        r.tree,
        [this.acc, item.commit],
        `termorch: in-memory merge of ${item.task}`,
        {
          identity: TERMORCH_IDENTITY,
        },
      );
      this.accTree = r.tree;
      this.merged.push(item);
      this.stepCommits.push(this.acc);
      return { clean: true };
    }
    const found: Conflict[] = [];
    for (const c of await describeConflicts(this.repo, item, r, this.merged, this.skipped, this.changes)) {
      if (this.reported.has(conflictKey(c))) continue;
      this.reported.add(conflictKey(c));
      found.push(c);
    }
    this.conflicts.push(...found);
    this.skipped.push(item);
    return { clean: false, conflicts: found, units: conflictUnits(r) };
  }

  /**
   * `item` is merged as `commit`, a commit that already holds the whole fold (a redo's result,
   * started from it): it becomes the fold, with no merge. A step of the same task that
   * conflicted before is no longer left out.
   */
  adopt(item: FoldItem): void {
    this.skipped = this.skipped.filter((s) => s.task !== item.task);
    this.acc = item.commit;
    this.accTree = null;
    this.merged.push(item);
    this.stepCommits.push(item.commit);
  }

  /** The merged tree so far. */
  async tree(): Promise<string> {
    this.accTree ??= await treeOf(this.repo, this.acc);
    return this.accTree;
  }

  async result(): Promise<FoldResult> {
    return {
      commit: this.acc,
      tree: await this.tree(),
      merged: [...this.merged],
      steps: [...this.stepCommits],
      skipped: [...this.skipped],
      conflicts: [...this.conflicts],
    };
  }
}

/** Two reports of the same tasks colliding in the same files are one. */
function conflictKey(c: Conflict): string {
  return `${[...c.tasks].sort().join("\0")}\n${c.files.join("\0")}`;
}

/**
 * The conflicts a fold could not see: a left-out item is merged only onto what came before it,
 * so its collision with a later item that merged (which merged because it was left out), or with
 * another left-out item, goes unreported, and would surface only once the first is fixed. Each
 * left-out item is merged here onto the whole fold, and each two left-out items (neither
 * containing the other) onto each other, in memory. Only what the fold did not report is answered.
 */
export async function hiddenConflicts(
  repo: string,
  fold: FoldResult,
  opts: { base: string },
): Promise<Conflict[]> {
  const reported = new Set(fold.conflicts.map(conflictKey));
  const changes = new ChangeCache(repo, opts.base);
  const found: Conflict[] = [];
  const add = (cs: Conflict[]): void => {
    for (const c of cs)
      if (!reported.has(conflictKey(c))) {
        reported.add(conflictKey(c));
        found.push(c);
      }
  };
  for (const item of fold.skipped) {
    const others = fold.skipped.filter((s) => s !== item);
    const r = await mergeTree(repo, fold.commit, item.commit);
    if (!r.clean) add(await describeConflicts(repo, item, r, fold.merged, others, changes));
  }
  for (const [i, a] of fold.skipped.entries())
    for (const b of fold.skipped.slice(i + 1)) {
      if ((await isAncestor(repo, a.commit, b.commit)) || (await isAncestor(repo, b.commit, a.commit)))
        continue;
      const r = await mergeTree(repo, a.commit, b.commit);
      // A left-out task that b carries is the one to name, as in the fold.
      const carried = fold.skipped.filter((x) => x !== a && x !== b);
      if (!r.clean) add(await describeConflicts(repo, b, r, [a], carried, changes));
    }
  return found;
}

/**
 * Turns one conflicting step into Conflicts grouped by the tasks involved: on the merged side,
 * earlier tasks whose own changes touch a conflicted path; on the incoming side, the item and
 * any earlier conflicting item it contains (a dependent of a task that conflicted brings that
 * task's changes along; blaming the dependent would point the user at the wrong task).
 */
async function describeConflicts(
  repo: string,
  item: FoldItem,
  r: MergeTreeResult,
  merged: readonly FoldItem[],
  skipped: readonly FoldItem[],
  changes: ChangeCache,
): Promise<Conflict[]> {
  const units = conflictUnits(r);
  const carried: FoldItem[] = [];
  for (const s of skipped) if (await isAncestor(repo, s.commit, item.commit)) carried.push(s);

  const groups = new Map<string, { ours: string[]; theirs: string[]; files: Set<string>; parts: string[] }>();
  for (const u of units) {
    const ours = await changes.touching(merged, u.paths);
    const theirs = await changes.touching(carried, u.paths);
    if (theirs.length === 0 || (await changes.touching([item], u.paths)).length > 0) theirs.push(item.task);
    const key = `${ours.join("\0")}\n${theirs.join("\0")}`;
    let g = groups.get(key);
    if (!g) {
      g = { ours, theirs, files: new Set(), parts: [] };
      groups.set(key, g);
    }
    for (const p of u.paths) g.files.add(p);
    g.parts.push(`${u.kind} in ${u.paths.join(" <- ")}`);
  }
  return [...groups.values()].map((g) => ({
    tasks: [...new Set([...g.ours, ...g.theirs])],
    files: [...g.files].sort(),
    detail: `${g.theirs.join(", ")} conflicts with ${g.ours.length ? g.ours.join(", ") : "the changes merged before it"}: ${g.parts.join("; ")}`,
  }));
}

async function isAncestor(repo: string, ancestor: string, descendant: string): Promise<boolean> {
  const r = await git(repo, ["merge-base", "--is-ancestor", ancestor, descendant], { allowExit: [0, 1] });
  return r.exitCode === 0;
}

/** Paths each task changed itself (both sides of a rename), computed once per task. */
export class ChangeCache {
  private readonly cache = new Map<string, Promise<Set<string>>>();
  constructor(
    private readonly repo: string,
    private readonly base: string,
  ) {}

  /** The paths `item` changed since its start (or the base). */
  of(item: FoldItem): Promise<Set<string>> {
    const from = item.start ?? this.base;
    const key = `${from}..${item.commit}`;
    let p = this.cache.get(key);
    if (!p) {
      p = changedPathSet(this.repo, from, item.commit);
      this.cache.set(key, p);
    }
    return p;
  }

  /** Tasks among `items` (in their order) that changed any of `paths`. */
  async touching(items: readonly FoldItem[], paths: readonly string[]): Promise<string[]> {
    const out: string[] = [];
    for (const it of items) {
      const set = await this.of(it);
      if (paths.some((p) => set.has(p))) out.push(it.task);
    }
    return out;
  }
}

/** Every path that differs between two commits; a rename counts as its deletion and addition. */
export async function changedPathSet(repo: string, from: string, to: string): Promise<Set<string>> {
  const r = await git(repo, ["diff-tree", "-r", "-z", "--name-only", "--no-renames", from, to]);
  return new Set(r.stdout.split("\0").filter((p) => p !== ""));
}
