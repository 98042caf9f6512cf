import { readFile, realpath } from "node:fs/promises";
import { join } from "node:path";
import { RefsSnapshot } from "../contract/merge-journal.js";
import type { RefChange } from "../contract/report.js";
import { writeJsonAtomic } from "../fs/atomic.js";
import { taskWorktree } from "../fs/names.js";
import { lastRefChange, listRefs, movedInCheckout, type RefMove, refMoves } from "../git/refs.js";
import { isAncestor } from "../git/repo.js";
import { listWorktrees } from "../git/worktree.js";
import type { Redactor } from "../redact/redactor.js";
import type { TaskRecorder } from "./recorder.js";
import type { RunPlan } from "./run-plan.js";
import type { TaskRun } from "./task-run.js";

/**
 * Agents work in worktrees of the user's repository, and worktrees share its refs: an agent
 * can create, move or delete any branch or tag of the user's. termorch lists the refs when a
 * run starts and compares before the merge, to report what changed; a target an agent moved
 * is never merged over (see merge/stage.ts). Only branches an agent certainly created (it had
 * them checked out in its worktree) are removed with its task branch: a ref that merely points
 * at a task's commits may be the user's (`git branch review termorch/<run>/A`, a push).
 */

const FILE = "refs.json";
/** The run's facts the comparison reads. */
type RefsRun = Pick<RunPlan, "git" | "privateDir" | "runId">;

/** Keyed by the run's plan: read from refs.json once per process. */
const snapshots = new WeakMap<Pick<RunPlan, "privateDir">, RefsSnapshot | null>();

/** termorch's own branches (every run's, since runs of sibling workspaces share a repository). */
/** termorch's branches, and the refs it keeps for itself (a redone task's earlier result). */
const isOurs = (ref: string): boolean =>
  ref.startsWith("refs/heads/termorch/") || ref.startsWith("refs/termorch/");

/**
 * Lists the repository's refs, with the time of the listing. Taken together with the run's base
 * commit (inspectWorkspace): a commit of the user's right after that must come after the list's
 * time, or the merge would take it for someone else's move of the target.
 */
export async function takeRefsSnapshot(root: string, now: number): Promise<RefsSnapshot> {
  return { taken_at: now, refs: await listRefs(root) };
}

/**
 * Keeps the refs of the start of the run for the merge and for a resume, before any agent runs:
 * the list inspectWorkspace took, or one taken now.
 */
export async function snapshotRefs(run: Pick<RunPlan, "git" | "privateDir">, now: number): Promise<void> {
  if (!run.git) return;
  const snap = run.git.refsAtStart ?? (await takeRefsSnapshot(run.git.root, now));
  await writeJsonAtomic(join(run.privateDir, FILE), snap, 0o600, false);
  snapshots.set(run, snap);
}

/** The refs at the start of the run; null when no list was taken (a run interrupted before it). */
export async function refsAtStart(run: Pick<RunPlan, "privateDir">): Promise<RefsSnapshot | null> {
  if (snapshots.has(run)) return snapshots.get(run) ?? null;
  const text = await readFile(join(run.privateDir, FILE), "utf8").catch(() => null);
  const parsed = text === null ? null : RefsSnapshot.safeParse(JSON.parse(text));
  const snap = parsed?.success ? parsed.data : null;
  snapshots.set(run, snap);
  return snap;
}

/** Whether `ref` was created during the run (false when that cannot be known: then it is the user's). */
export async function createdDuringRun(run: Pick<RunPlan, "privateDir">, ref: string): Promise<boolean> {
  const snap = await refsAtStart(run);
  return snap !== null && !(ref in snap.refs) && !isOurs(ref);
}

/** A ref that changed during the run, as found by refChanges. */
export interface FoundRefChange {
  change: RefChange;
  /**
   * The task whose agent certainly created the ref, a branch: it had it checked out in its
   * worktree. Such a ref goes with the task's branch (recordCreatedRefs); null for any other.
   */
  createdBy: string | null;
}

/**
 * Every ref that changed since the run started, except termorch's own branches, a target the
 * user moved by committing in their checkout (that is `target_moved`) and a target at
 * `merged`, the run's own result (a resume after the merge), each attributed to a task where
 * that can be told. Only reads: recordCreatedRefs records what it found.
 */
export async function refChanges(
  run: RefsRun,
  tasks: readonly Readonly<TaskRun>[],
  now: number,
  merged: string | null = null,
): Promise<FoundRefChange[]> {
  const snap = await refsAtStart(run);
  if (!run.git || snap === null) return [];
  const { root, targetRef } = run.git;
  const moves = refMoves(snap.refs, await listRefs(root), isOurs);
  if (moves.length === 0) return [];
  const checkedOut = new Map(
    (await listWorktrees(root)).flatMap((w) => (w.branch ? [[w.branch, w] as const] : [])),
  );
  const out: FoundRefChange[] = [];
  for (const m of moves) {
    if (
      m.ref === targetRef &&
      m.new !== null &&
      (m.new === merged || (await movedInCheckout(root, m.ref, m.new, snap.taken_at)))
    )
      continue;
    const by = await attribute(run, tasks, m, checkedOut.get(m.ref)?.path ?? null);
    const created = by?.sure === true && m.old === null && m.ref.startsWith("refs/heads/");
    out.push({
      change: {
        ...m,
        task: by?.task.id ?? null,
        during: by ? [] : await runningWhen(root, tasks, now, m.ref),
      },
      createdBy: created ? by.task.id : null,
    });
  }
  return out;
}

/**
 * Adds the refs found to be created by a task's agent to its `refsCreated` (journaled), so they
 * are reported with it and removed with its branch after the merge or by `termorch clean`
 * (all but one named after a secret).
 */
export function recordCreatedRefs(
  recorder: TaskRecorder,
  redactor: Redactor,
  found: readonly FoundRefChange[],
): void {
  for (const { change, createdBy } of found) {
    const task = createdBy === null ? undefined : recorder.get(createdBy);
    if (!task || task.git.refsCreated.includes(change.ref)) continue;
    // A ref named after a secret is reported (redacted) but not recorded: state.json would hold
    // the secret. It stays the agent's, in the user's repository, for the user to delete.
    if (redactor.redact(change.ref) !== change.ref) continue;
    recorder.checkpoint(task.id, { git: { refsCreated: [...task.git.refsCreated, change.ref] } });
  }
}

/**
 * The task whose agent made the change. Sure when termorch recorded it (the branch the agent
 * switched to) or the ref is checked out in the task's worktree; only likely when the ref
 * points at a commit made in its worktree (one its branch or HEAD holds and its start commit
 * does not): the user may have pointed a ref of their own at a task's work. Null when no task
 * is known.
 */
async function attribute(
  run: RefsRun,
  tasks: readonly Readonly<TaskRun>[],
  m: RefMove,
  checkedOutIn: string | null,
): Promise<{ task: Readonly<TaskRun>; sure: boolean } | null> {
  const byRecord = tasks.find((t) => t.git.refsCreated.includes(m.ref));
  if (byRecord) return { task: byRecord, sure: true };
  if (checkedOutIn !== null) {
    // git lists worktrees by their real path; $TMPDIR may be a symlink (macOS).
    const real = await realpath(checkedOutIn).catch(() => checkedOutIn);
    for (const t of tasks) {
      if ((await realpath(taskWorktree(run.runId, t.id)).catch(() => null)) === real)
        return { task: t, sure: true };
    }
  }
  if (m.new === null) return null;
  const root = run.git!.root;
  const contains = (commit: string, tip: string): Promise<boolean> => isAncestor(root, commit, tip);
  for (const t of tasks) {
    if (t.git.startCommit === null) continue;
    const tip = t.git.commit ?? t.git.branch;
    if (tip === null) continue;
    if ((await contains(m.new, tip)) && !(await contains(m.new, t.git.startCommit)))
      return { task: t, sure: false };
  }
  return null;
}

/** The tasks that were running when `ref` last changed, by its reflog (none when it keeps none). */
async function runningWhen(
  root: string,
  tasks: readonly Readonly<TaskRun>[],
  now: number,
  ref: string,
): Promise<string[]> {
  const at = await lastRefChange(root, ref);
  if (at === null) return [];
  // Reflog times are whole seconds.
  return tasks
    .filter((t) => t.startedAt !== null && t.startedAt - 1000 <= at && at <= (t.finishedAt ?? now))
    .map((t) => t.id);
}
