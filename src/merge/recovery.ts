import type { MergeIntent } from "../contract/merge-journal.js";
import type { Report } from "../contract/report.js";
import { unreachable } from "../errors.js";
import { integrationBranch } from "../fs/names.js";
import { type AdvanceResult, finishAdvance } from "../git/advance.js";
import { type MergeOutcome, skippedMerge } from "../report/build.js";
import type { Ports } from "../task/ports.js";
import type { RunPlan } from "../task/run-plan.js";
import { clearMergeIntent } from "./intent.js";

/** What the merge stage hands the report; see mergeStage. */
export interface MergeStageResult {
  merge: MergeOutcome;
  validation: Report["summary"]["validation"];
  /**
   * The target's move is unfinished (the ref moved, its index and work tree could not follow
   * nor be put back): merge-intent.json is kept and the run is not done, so that
   * `termorch resume` finishes the move.
   */
  unfinished?: boolean;
}

export const integrationBranchOf = (run: Pick<RunPlan, "runId">): string => integrationBranch(run.runId);
export const short = (sha: string | null): string => (sha === null ? "nothing" : sha.slice(0, 12));

/**
 * The report's side of an advance that failed after the ref moved: rolled back (nothing of the
 * run is in), or not even that, in which case the reason says what to do. When the ref was left
 * at the run's commit (its index and work tree could not be restored), the move is unfinished:
 * a resume finishes it once whatever stopped it is gone.
 */
export function advanceFailed(
  run: Pick<RunPlan, "runId" | "runDir">,
  outcome: MergeOutcome,
  validation: MergeStageResult["validation"],
  advance: Extract<AdvanceResult, { status: "rolled_back" | "rollback_failed" }>,
): MergeStageResult {
  const where = `the result is on ${integrationBranchOf(run)}`;
  if (advance.status === "rolled_back")
    return {
      merge: {
        ...outcome,
        result: "rolled_back",
        reason: `the update of ${advance.ref} was rolled back: ${advance.detail}; ${where}`,
      },
      validation,
    };
  const unfinished = advance.at === advance.new && advance.worktree !== null;
  const todo = unfinished
    ? `${advance.lock ? `wait for the git process holding ${advance.lock} to end (or, if none runs, remove that file)` : `resolve what stopped git in ${advance.worktree}`}, then run termorch resume ${run.runDir} to finish the merge; or, to undo it by hand instead, run git -C ${advance.worktree} reset --keep ${advance.old} (a later resume then merges again)`
    : `check ${advance.ref} and git status in its checkout; ${where}`;
  return {
    merge: { ...outcome, result: "failed", reason: `${advance.detail}. To do: ${todo}` },
    validation,
    ...(unfinished ? { unfinished: true } : {}),
  };
}

/**
 * The driver died while moving the target (merge-intent.json is there), or after it and before
 * the report: the move is finished (or undone) first, so the user's ref, index and work tree
 * agree, and the report says what happened. Null when the ref never moved: then the merge
 * simply runs again. The intent file is kept, except in that case: it goes once the run is
 * reported (see drive), so a crash before that finds it again.
 */
export async function finishInterruptedMerge(
  run: Pick<RunPlan, "git" | "runId" | "runDir" | "privateDir">,
  ports: Pick<Ports, "ledger">,
  order: readonly string[],
  intent: MergeIntent,
): Promise<MergeStageResult | null> {
  const { root, baseCommit, targetRef } = run.git!;
  const done = await finishAdvance(root, intent);
  await ports.ledger.append("merge.interrupted_update", { ...intent, outcome: done.status });
  const outcome: MergeOutcome = {
    ...skippedMerge(""),
    order: [...order],
    baseCommit,
    target: targetRef,
    resultCommit: intent.new,
    gates: intent.gates,
    validatedCommit: intent.validated_commit,
    targetMovedTo: intent.target_moved_to,
  };
  const validation = intent.validation;
  switch (done.status) {
    case "not_moved":
      await clearMergeIntent(run);
      return null;
    case "advanced":
      return { merge: { ...outcome, result: "success", reason: null }, validation };
    case "elsewhere":
      return {
        merge: {
          ...outcome,
          result: "failed",
          reason: `termorch was interrupted while moving ${intent.ref} from ${short(intent.old)} to ${short(intent.new)}, and it is now at ${short(done.current)}: it was moved since, so termorch left it alone (check git status there); the result is on ${integrationBranchOf(run)}`,
        },
        validation,
      };
    case "rolled_back":
    case "rollback_failed":
      return advanceFailed(run, outcome, validation, done);
    default:
      return unreachable(done);
  }
}
