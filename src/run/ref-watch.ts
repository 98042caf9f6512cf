import { readFile, realpath } from "node:fs/promises";
import { join } from "node:path";
import { RefsSnapshot } from "../contract/merge-journal.js";
import type { RefChange } from "../contract/report.js";
import { writeJsonAtomic } from "../fs/atomic.js";
import { lastRefChange, listRefs, movedInCheckout, type RefMove, refMoves } from "../git/refs.js";
import { git } from "../git/repo.js";
import { listWorktrees } from "../git/worktree.js";
import { type RunContext, worktreePath } from "./context.js";
import type { TaskRun } from "./task-run.js";

/**
 * Agents work in worktrees of the user's repository, and worktrees share its refs: an agent
 * can create, move or delete any branch or tag of the user's. termorch lists the refs when a
 * run starts and compares before the merge, to report (and, for refs an agent created, clean
 * up) what changed; a target an agent moved is never merged over (see merge-stage).
 */

const FILE = "refs.json";
const snapshots = new WeakMap<RunContext, RefsSnapshot | null>();

/** termorch's own branches (every run's, since runs of sibling workspaces share a repository). */
const isOurs = (ref: string): boolean => ref.startsWith("refs/heads/termorch/");

/** Lists the repository's refs at the start of a run, before any agent runs; kept for a resume. */
export async function snapshotRefs(ctx: RunContext): Promise<void> {
  if (!ctx.git) return;
  const snap: RefsSnapshot = { taken_at: ctx.now(), refs: await listRefs(ctx.git.root) };
  await writeJsonAtomic(join(ctx.privateDir, FILE), snap, 0o600, false);
  snapshots.set(ctx, snap);
}

/** The refs at the start of the run; null when no list was taken (a run interrupted before it). */
export async function refsAtStart(ctx: RunContext): Promise<RefsSnapshot | null> {
  if (snapshots.has(ctx)) return snapshots.get(ctx) ?? null;
  const text = await readFile(join(ctx.privateDir, FILE), "utf8").catch(() => null);
  const parsed = text === null ? null : RefsSnapshot.safeParse(JSON.parse(text));
  const snap = parsed?.success ? parsed.data : null;
  snapshots.set(ctx, snap);
  return snap;
}

/** Whether `ref` was created during the run (false when that cannot be known: then it is the user's). */
export async function createdDuringRun(ctx: RunContext, ref: string): Promise<boolean> {
  const snap = await refsAtStart(ctx);
  return snap !== null && !(ref in snap.refs) && !isOurs(ref);
}

/**
 * Every ref that changed since the run started, except termorch's own branches and a target
 * the user moved by committing in their checkout (that is `target_moved`). Each change is
 * attributed to a task where that is sound; refs a task's agent created are added to its
 * `refsCreated`, so they are reported with it and removed with its branch.
 */
export async function refChanges(ctx: RunContext): Promise<RefChange[]> {
  const snap = await refsAtStart(ctx);
  if (!ctx.git || snap === null) return [];
  const { root, targetRef } = ctx.git;
  const moves = refMoves(snap.refs, await listRefs(root), isOurs);
  if (moves.length === 0) return [];
  const checkedOut = new Map(
    (await listWorktrees(root)).flatMap((w) => (w.branch ? [[w.branch, w] as const] : [])),
  );
  const out: RefChange[] = [];
  for (const m of moves) {
    if (m.ref === targetRef && m.new !== null && (await movedInCheckout(root, m.ref, m.new, snap.taken_at)))
      continue;
    const task = await attribute(ctx, m, checkedOut.get(m.ref)?.path ?? null);
    if (task && m.old === null && !task.refsCreated.includes(m.ref)) {
      task.refsCreated = [...task.refsCreated, m.ref];
      ctx.journal.write(task);
    }
    out.push({ ...m, task: task?.id ?? null, during: task ? [] : await runningWhen(ctx, m.ref) });
  }
  return out;
}

/**
 * The task whose agent made the change: it created the ref as the branch it switched to, the
 * ref is checked out in its worktree, or the ref points at a commit made in its worktree (one
 * its branch or HEAD holds and its start commit does not). Null when no task is known for sure.
 */
async function attribute(ctx: RunContext, m: RefMove, checkedOutIn: string | null): Promise<TaskRun | null> {
  const tasks = [...ctx.tasks.values()];
  const byRecord = tasks.find((t) => t.refsCreated.includes(m.ref));
  if (byRecord) return byRecord;
  if (checkedOutIn !== null) {
    // git lists worktrees by their real path; $TMPDIR may be a symlink (macOS).
    const real = await realpath(checkedOutIn).catch(() => checkedOutIn);
    for (const t of tasks) {
      if ((await realpath(worktreePath(ctx, t.id)).catch(() => null)) === real) return t;
    }
  }
  if (m.new === null) return null;
  const root = ctx.git!.root;
  const contains = async (commit: string, tip: string): Promise<boolean> =>
    (await git(root, ["merge-base", "--is-ancestor", commit, tip], { allowExit: [0, 1, 128] })).exitCode ===
    0;
  for (const t of tasks) {
    if (t.startCommit === null) continue;
    const tip = t.commit ?? t.branch;
    if (tip === null) continue;
    if ((await contains(m.new, tip)) && !(await contains(m.new, t.startCommit))) return t;
  }
  return null;
}

/** The tasks that were running when `ref` last changed, by its reflog (none when it keeps none). */
async function runningWhen(ctx: RunContext, ref: string): Promise<string[]> {
  const at = await lastRefChange(ctx.git!.root, ref);
  if (at === null) return [];
  // Reflog times are whole seconds.
  return [...ctx.tasks.values()]
    .filter((t) => t.startedAt !== null && t.startedAt - 1000 <= at && at <= (t.finishedAt ?? ctx.now()))
    .map((t) => t.id);
}
