import { existsSync } from "node:fs";
import { rmdir } from "node:fs/promises";
import { boundedWait } from "../concurrency/bounded-wait.js";
import { errorText } from "../errors.js";
import { redoRefsOf, runWorktreesDir, taskWorktree, workRefsOf } from "../fs/names.js";
import { deleteRefsUnder } from "../git/merge.js";
import { deleteRemoteRefsUnder, runRefsOf, shownRemote } from "../git/remote.js";
import { deleteMergedBranches, isBranch, removeWorktrees } from "../git/worktree.js";
import type { RemoteBackend } from "../runner/task-hosts.js";
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
      return [...(t.git.branch ? [t.git.branch] : []), ...t.git.refsCreated.filter(isBranch)];
    });
    result.kept_branches = await deleteMergedBranches(root, [...branches, integrationBranch], merged);
    // The earlier results of redone tasks, and failed attempts' work: superseded by what merged
    // (their diffs and feedback stay in the artifacts).
    await deleteRefsUnder(root, redoRefsOf(run.runId));
    await deleteRefsUnder(root, workRefsOf(run.runId));
    if (result.kept_branches.length > 0)
      ports.log.warn({ kept: result.kept_branches }, "branches not contained in the merged target were kept");
  } catch (error) {
    ports.log.warn({ err: errorText(error) }, "could not remove the task worktrees or branches");
  }
  // The run's folder of worktrees, now empty.
  await rmdir(runWorktreesDir(run.runId)).catch(() => {});
  return result;
}

/** How long the end of a run waits for Redis. */
const REDIS_BOUND_MS = 2000;

/**
 * What a scale-out run left on its git remote and in Redis, once it is reported, whatever its
 * outcome: every ref under `refs/termorch/<run>/` (the tasks' bases, their attempts' refs: the
 * tasks' work is in the user's repository by then, merged or kept on its branches) and the run's
 * cancel mark. What cannot be reached is said, and left to `termorch clean`.
 */
export async function cleanUpRemote(
  run: Pick<RunPlan, "git" | "runId">,
  ports: Pick<Ports, "log">,
  backend: RemoteBackend,
): Promise<void> {
  const root = run.git!.root;
  try {
    await deleteRemoteRefsUnder(root, backend.remote, runRefsOf(run.runId));
  } catch (error) {
    ports.log.warn(
      { remote: shownRemote(backend.remote), err: errorText(error) },
      "could not delete the run's refs on the git remote; termorch clean does",
    );
  }
  // Bounded: a Redis that is gone must not keep the run from ending (its mark expires in a day).
  const forgot = await boundedWait(
    backend.hosts.forgetRun(run.runId).then(
      () => true,
      () => false,
    ),
    REDIS_BOUND_MS,
  );
  if (!forgot) ports.log.warn("could not drop the run's cancel mark in Redis; termorch clean does");
}
