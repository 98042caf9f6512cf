import { existsSync } from "node:fs";
import { rmdir } from "node:fs/promises";
import { errorText } from "../errors.js";
import { runWorktreesDir, taskWorktree } from "../fs/names.js";
import { baseRefOf, deleteRemoteRefs, shownRemote } from "../git/remote.js";
import { branchRef } from "../git/repo.js";
import { deleteMergedBranches, isBranch, removeWorktrees } from "../git/worktree.js";
import { killPoint } from "../task/faults.js";
import type { Ports } from "../task/ports.js";
import type { RunPlan } from "../task/run-plan.js";
import type { TaskRun } from "../task/task-run.js";

/** What the clean-up after a merge did (the ledger's `run.cleaned`). */
export interface CleanUpResult {
  /** Worktrees the run put into the warm pool (as its tasks succeeded, and its gates' one). */
  pooled: number;
  /** Task worktrees deleted (the pool was full or off, or one could not be pooled safely). */
  removed: number;
  /** Branches kept because the merged target does not contain them. */
  kept_branches: string[];
}

/**
 * After a successful merge, once the report is written (and the daemon's answer): the task
 * worktrees that did not go into the warm pool as their tasks succeeded (the pool refused them,
 * or was full or off) are deleted, then the run's merged branches, so the report never waits
 * for them (seconds per worktree on a large repository). A crash in here leaves worktrees and
 * branches under the run's names, which `termorch clean` removes, and a pool that drops
 * whatever was half-moved (git/worktree-pool.ts). Nothing here fails the run.
 */
export async function cleanUpMerged(
  run: Pick<RunPlan, "git" | "runId" | "fault" | "order">,
  ports: Pick<Ports, "pool" | "log">,
  task: (id: string) => Readonly<TaskRun>,
  /** Scale-out: the git remote the workers used (its run refs go too); null for a local run. */
  gitRemote: string | null,
  integrationBranch: string,
  merged: string,
): Promise<CleanUpResult> {
  const { order } = run;
  const result: CleanUpResult = { pooled: 0, removed: 0, kept_branches: [] };
  const root = run.git!.root;
  try {
    await ports.pool?.settled();
    await killPoint(run.fault, "kill-in-clean-up");
    result.pooled = ports.pool?.given ?? 0;
    // In bulk: a git process per task was most of what a run spent after its merge.
    const left = order.map((id) => taskWorktree(run.runId, id)).filter((wt) => existsSync(wt));
    result.removed = (await removeWorktrees(root, left)).length;
    // Branches the agents created go with their task branches (only when merged: nothing is
    // lost). Only branches: a tag or a remote-tracking ref is never termorch's to delete.
    const branches = order.flatMap((id) => {
      const t = task(id);
      return [...(t.branch ? [t.branch] : []), ...t.refsCreated.filter(isBranch)];
    });
    result.kept_branches = await deleteMergedBranches(root, [...branches, integrationBranch], merged);
    if (result.kept_branches.length > 0)
      ports.log.warn({ kept: result.kept_branches }, "branches not contained in the merged target were kept");
    // A scale-out run's refs on the git remote go the same way: the bases always, the branches merged.
    if (gitRemote !== null) {
      const gone = order
        .map((id) => task(id).branch)
        .filter((b): b is string => b !== null && !result.kept_branches.includes(b));
      const refs = [...order.map((id) => baseRefOf(run.runId, id)), ...gone.map(branchRef)];
      if (!(await deleteRemoteRefs(root, gitRemote, refs)))
        ports.log.warn(
          { remote: shownRemote(gitRemote) },
          "could not delete the run's refs on the git remote",
        );
    }
  } catch (error) {
    ports.log.warn({ err: errorText(error) }, "could not remove the task worktrees or branches");
  }
  // The run's folder of worktrees, now empty.
  await rmdir(runWorktreesDir(run.runId)).catch(() => {});
  return result;
}
