import type { Conflict } from "../contract/report.js";
import { type FoldItem, type FoldStep, hiddenConflicts, MergeFold } from "../git/fold.js";
import { partialIntegration } from "../git/merge.js";
import { isAncestor, treeOf } from "../git/repo.js";
import type { AttemptSide } from "../task/attempt.js";
import type { TaskRun } from "../task/task-run.js";
import { fixTask } from "./gate-fix.js";
import { gaveUp, type NewRedo, redoTask } from "./redo.js";

/** The merge taken task by task: its tree and the tasks' commits, or why it halted and every conflict. */
export interface OrderedMerge {
  tree: string;
  /** Each task's commit as merged (a redone task's new result). */
  items: FoldItem[];
  conflicts: Conflict[];
  /** After each merged item: a commit whose tree is the merge so far (a bisect's probes). */
  steps: string[];
  /** Why the merge halted (a redo gave up, the run was stopped); null when it did not. */
  halted: string | null;
}

/**
 * merge.on_conflict "redo" (and a bisect's fix, merge.on_gate_failure "bisect_and_fix"): the
 * tasks' results merged one by one in dependency order, in memory.
 * A task whose result conflicts with the merge so far is redone from it (redo.ts) and the merge
 * goes on with its new result. A dependent of a redone task carries the replaced result, so its
 * own work alone is merged (replayed from its start); if that conflicts, it is redone the same
 * way. When a task's redos give up, its earlier result is back and the rest is checked as
 * "halt" would, so every conflict is reported. Recomputed from the task records on a resume: a
 * task with a redo under way goes on at its recorded step.
 */
export async function mergeInOrder(side: AttemptSide): Promise<OrderedMerge | "detached"> {
  const { run, recorder, stop } = side;
  const { root, baseCommit } = run.git!;
  const fold = new MergeFold(root, baseCommit, { base: baseCommit });
  const replaced: string[] = [];
  const conflicts: Conflict[] = [];
  let halted: string | null = null;
  for (const id of run.order) {
    const t = recorder.get(id);
    const resolved = t.redo.done.findLast((r) => r.outcome === "resolved");
    if (t.redo.progress === null && resolved && resolved.commit === t.git.commit) {
      replaced.push(resolved.before_commit);
      // Its redo resolved (a resume, or a merge taken again for a bisect's fix): its result holds
      // the merge before it, unless that changed since (a fix before it); then its own work is
      // merged onto the new one, as a dependent's is.
      if ((await treeOf(root, resolved.start_commit)) === (await fold.tree())) {
        fold.adopt(itemOf(t));
        continue;
      }
    }
    const replay = await replayFrom(root, t, replaced);
    if (t.redo.progress?.cause === "gate") {
      // The bisect's culprit, given a fix (gate-fix.ts): run here, on the merge before it.
      if ((await treeOf(root, t.redo.progress.start)) !== (await fold.tree()))
        throw new Error(
          `the merge before ${id} is not the one its fix started from (${t.redo.progress.start})`,
        );
      const end = await fixTask(side, id);
      if (end === "detached") return end;
      if (end.kind === "resolved") {
        replaced.push(end.before);
        fold.adopt({ task: id, commit: end.commit, start: end.start });
        continue;
      }
      // Its earlier result is back and merges as before: the run-level gate judges the
      // integration again, and the bisect, which knows it, names it.
      const again = await fold.step(itemOf(recorder.get(id)), replay);
      if (!again.clean) {
        conflicts.push(...again.conflicts);
        halted ??= end.why;
      }
      continue;
    }
    let redo: NewRedo | null = null;
    let first: Conflicting | null = null;
    if (t.redo.progress === null) {
      const step = await fold.step(itemOf(t), replay);
      if (step.clean) continue;
      first = step;
      const redos = t.redo.done.filter((r) => r.cause === "conflict").length;
      if (
        halted !== null ||
        stop.ending ||
        run.settings.on_conflict !== "redo" ||
        redos >= run.settings.redo_attempts
      ) {
        conflicts.push(...first.conflicts);
        // "halt" (the merge goes task by task for a gate's fix), past its redos (a resume after
        // its earlier result was put back), or stopped.
        halted ??= stop.ending
          ? "the run was stopped during the merge"
          : run.settings.on_conflict !== "redo"
            ? "the tasks' changes conflict"
            : gaveUp(t, run.settings.redo_attempts);
        continue;
      }
      const merged = fold.mergedItems;
      redo = {
        start: await partialIntegration(root, {
          base: baseCommit,
          commits: merged.map((m) => m.commit),
          tree: await fold.tree(),
          message: `termorch: integration of ${merged.map((m) => m.task).join(", ")} for the redo of ${id}\n\nTermorch-Run: ${run.runId}\n`,
          identity: run.identity,
        }),
        mergedBefore: merged.map((m) => m.task),
        units: step.units.map((u) => ({ ...u, with: withFor(step, u.paths, id) })),
        detail: first.conflicts.map((c) => c.detail).join("; "),
      };
    } else if ((await treeOf(root, t.redo.progress.start)) !== (await fold.tree())) {
      throw new Error(
        `the merge before ${id} is not the one its redo started from (${t.redo.progress.start})`,
      );
    }
    const end = await redoTask(side, id, redo);
    if (end === "detached") return end;
    if (end.kind === "resolved") {
      replaced.push(end.before);
      fold.adopt({ task: id, commit: end.commit, start: end.start });
      continue;
    }
    // Its earlier result is back: left out, as "halt" leaves it, so its dependents name it.
    halted = end.why;
    if (first) conflicts.push(...first.conflicts);
    else {
      // Resumed mid-redo: its conflict is found again.
      const again = await fold.step(itemOf(recorder.get(id)), replay);
      if (!again.clean) conflicts.push(...again.conflicts);
    }
  }
  // Halted: every pair, as "halt" lists them (a left-out task against those merged after it).
  if (halted !== null)
    conflicts.push(...(await hiddenConflicts(root, await fold.result(), { base: baseCommit })));
  return { tree: await fold.tree(), items: [...fold.mergedItems], steps: [...fold.steps], conflicts, halted };
}

type Conflicting = Extract<FoldStep, { clean: false }>;

function itemOf(t: Readonly<TaskRun>): FoldItem {
  return { task: t.id, commit: t.git.commit!, ...(t.git.startCommit ? { start: t.git.startCommit } : {}) };
}

/** A task built on a replaced result is merged from its own start: only its own work is applied. */
async function replayFrom(
  root: string,
  t: Readonly<TaskRun>,
  replaced: readonly string[],
): Promise<string | undefined> {
  if (!t.git.startCommit) return undefined;
  for (const before of replaced)
    if (await isAncestor(root, before, t.git.startCommit)) return t.git.startCommit;
  return undefined;
}

/** The tasks merged before whose changes touch `paths`: those a conflict names beside the task itself. */
function withFor(step: Conflicting, paths: readonly string[], id: string): string[] {
  const hit = step.conflicts.filter((c) => c.files.some((f) => paths.includes(f)));
  return [...new Set(hit.flatMap((c) => c.tasks))].filter((x) => x !== id);
}
