import type { RefChange } from "../contract/report.js";
import { movedBranch } from "../fs/names.js";
import { putBackBranch } from "../git/put-back.js";
import { resolveCommit } from "../git/repo.js";
import type { RunContext } from "./context.js";
import { killPoint } from "./faults.js";
import { short } from "./merge-recovery.js";

/**
 * Where termorch keeps the commit an agent moved the user's branch to, once it put the branch
 * back: a branch of the run's (`termorch clean` removes it like the run's other branches).
 */
export const movedBranchOf = (ctx: Pick<RunContext, "runId">, targetRef: string): string =>
  movedBranch(ctx.runId, targetRef);

/**
 * The target was moved from `expected` to `tip` (null: deleted) by something other than the
 * user's own commit in their checkout (see refuseForeignMove in merge-stage). termorch never
 * merges over that; when the user's index still is `expected`'s tree it also puts the branch
 * back (keeping `tip` on movedBranchOf), so the user's ref, index and work tree agree again.
 * Returns the sentence for the merge's reason: what moved, who, and what termorch did about it
 * or what the user can do.
 */
export async function answerForeignMove(
  ctx: RunContext,
  refsChanged: readonly RefChange[],
  expected: string,
  tip: string | null,
): Promise<string> {
  const { root, targetRef } = ctx.git!;
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
  const keep = movedBranchOf(ctx, ref);
  const done = ref.startsWith("refs/heads/")
    ? await putBackBranch({
        root,
        ref,
        start: expected,
        now: tip,
        keep,
        message: `termorch: run ${ctx.runId}: put back ${ref}, ${tip === null ? "deleted" : `moved to ${tip}`} during the run`,
      })
    : { status: "left" as const, why: "it is not a branch", todo: `check git -C ${root} status` };
  if (done.status === "put_back") {
    await ctx.ledger.append("merge.target_put_back", { ref, old: expected, new: tip, kept_on: tip && keep });
    await killPoint(ctx.fault, "kill-after-put-back");
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
  ctx: RunContext,
  refsChanged: readonly RefChange[],
): Promise<string | null> {
  if (!ctx.git?.targetRef) return null;
  const ref = ctx.git.targetRef;
  const change = refsChanged.find((c) => c.ref === ref);
  if (change && change.old !== null) return answerForeignMove(ctx, refsChanged, change.old, change.new);
  const keep = movedBranchOf(ctx, ref);
  const kept = await resolveCommit(ctx.git.root, keep);
  if (kept === null) return null;
  return `an agent moved ${ref} to ${short(kept)} during the run: termorch does not merge over that; it put ${ref} back and kept that commit on ${keep.slice("refs/heads/".length)}`;
}
