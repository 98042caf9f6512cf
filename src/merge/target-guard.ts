import type { RefChange } from "../contract/report.js";
import { movedBranch } from "../fs/names.js";
import { putBackBranch } from "../git/put-back.js";
import { resolveCommit } from "../git/repo.js";
import { killPoint } from "../task/faults.js";
import type { Ports } from "../task/ports.js";
import type { RunPlan } from "../task/run-plan.js";
import { short } from "./recovery.js";

/** What guarding the target reads of the run. */
type GuardRun = Pick<RunPlan, "git" | "runId" | "fault">;

/**
 * The target was moved from `expected` to `tip` (null: deleted) by something other than the
 * user's own commit in their checkout (see refuseForeignMove in merge/stage.ts). termorch never
 * merges over that; when the user's index still is `expected`'s tree it also puts the branch
 * back (keeping `tip` on the run's `moved` branch, `movedBranch`), so the user's ref, index and work tree agree again.
 * Returns the sentence for the merge's reason: what moved, who, and what termorch did about it
 * or what the user can do.
 */
export async function answerForeignMove(
  run: GuardRun,
  ports: Pick<Ports, "ledger">,
  refsChanged: readonly RefChange[],
  expected: string,
  tip: string | null,
): Promise<string> {
  const { root, targetRef } = run.git!;
  const ref = targetRef!;
  const change = refsChanged.find((c) => c.ref === ref && c.new === tip);
  const by = change?.task
    ? ` (by the agent of task ${change.task})`
    : change?.during.length
      ? ` (while ${change.during.join(", ")} ran)`
      : "";
  const what =
    tip === null
      ? `the target ${ref} was deleted during the run`
      : `${ref} was moved from ${short(expected)} to ${short(tip)} during the run`;
  const head = `${what}, not by a commit in ${root}${by}: termorch does not merge over that`;
  const keep = movedBranch(run.runId, ref);
  const done = ref.startsWith("refs/heads/")
    ? await putBackBranch({
        root,
        ref,
        start: expected,
        now: tip,
        keep,
        message: `termorch: run ${run.runId}: put back ${ref}, ${tip === null ? "deleted" : `moved to ${tip}`} during the run`,
      })
    : { status: "left" as const, why: "it is not a branch", todo: `check git -C ${root} status` };
  if (done.status === "put_back") {
    await ports.ledger.append("merge.target_put_back", {
      ref,
      old: expected,
      new: tip,
      kept_on: tip && keep,
    });
    await killPoint(run.fault, "kill-after-put-back");
    return `${head}; it put ${ref} back to ${short(expected)}, where your index and work tree still were${tip === null ? "" : `, and kept the agent's commit ${short(tip)} on ${keep.slice("refs/heads/".length)}`} (see refs_changed)`;
  }
  return `${head} and left ${ref} as it is, because ${done.why} (see refs_changed). To do: ${done.todo}`;
}

/**
 * The reason to refuse the merge found before it starts: the target moved by an agent (in
 * refsChanged: a user's commit in their checkout is not there), answered by answerForeignMove,
 * or put back by an earlier driver of this run that died before its report (its kept branch is
 * there), so a resume does not merge as if nothing happened. Null when neither.
 */
export async function foreignTargetMove(
  run: GuardRun,
  ports: Pick<Ports, "ledger">,
  refsChanged: readonly RefChange[],
): Promise<string | null> {
  if (!run.git?.targetRef) return null;
  const ref = run.git.targetRef;
  const change = refsChanged.find((c) => c.ref === ref);
  if (change && change.old !== null)
    return answerForeignMove(run, ports, refsChanged, change.old, change.new);
  const keep = movedBranch(run.runId, ref);
  const kept = await resolveCommit(run.git.root, keep);
  if (kept === null) return null;
  return `an agent moved ${ref} to ${short(kept)} during the run: termorch does not merge over that; it put ${ref} back and kept that commit on ${keep.slice("refs/heads/".length)}`;
}
