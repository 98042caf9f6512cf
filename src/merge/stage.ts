import type { ApprovalWait } from "../contract/approval.js";
import type { Conflict, Gate, RefChange, Report } from "../contract/report.js";
import { errorText, unreachable } from "../errors.js";
import type { FoldItem } from "../git/fold.js";
import {
  advanceTarget,
  checkMerge,
  createIntegrationCommit,
  integrationParents,
  type MergeItem,
  mergeOntoMovedTarget,
} from "../git/merge.js";
import { movedInCheckout } from "../git/refs.js";
import { isAncestor, resolveCommit } from "../git/repo.js";
import { type MergeOutcome, skippedMerge } from "../report/build.js";
import { advanceHooks, killPoint } from "../task/faults.js";
import type { Ports } from "../task/ports.js";
import type { TaskRecorder } from "../task/recorder.js";
import { recordCreatedRefs, refChanges, refsAtStart } from "../task/ref-watch.js";
import type { RunPlan } from "../task/run-plan.js";
import type { RunStop } from "../task/stop.js";
import type { TestsRan } from "../task/tests-gate.js";
import { bisectGate, type MergeProgressSink, readBisects, testsRanOf } from "./bisect.js";
import { fixGaveUp, recordGateFix } from "./gate-fix.js";
import { type HaltedMerge, writeRedoAssignments } from "./halt-files.js";
import { integrationMessage } from "./integration-message.js";
import { reviewIntegration } from "./integration-review.js";
import { clearMergeIntent, readMergeIntent, recordMergeIntent } from "./intent.js";
import { approveMerge } from "./merge-approval.js";
import { mergeInOrder } from "./ordered.js";
import {
  advanceFailed,
  finishInterruptedMerge,
  integrationBranchOf,
  type MergeStageResult,
  short,
} from "./recovery.js";
import { runLevelGates } from "./run-level-gates.js";
import { answerForeignMove, foreignTargetMove } from "./target-guard.js";

export type { MergeProgressSink } from "./bisect.js";
export type { MergeStageResult } from "./recovery.js";

/**
 * Conflict check, integration commit, run-level gates and the atomic update of the target
 * (docs/ARCHITECTURE.md: the pipeline). All or nothing: the user's branch moves only when every task succeeded,
 * nothing conflicts and every gate passed. A resume first finishes (or undoes) an update of
 * the target that the interrupted driver left half-done, or reports one it completed. Refs of
 * the user's repository that changed during the run are reported, whatever the outcome.
 */
export async function mergeStage(
  run: RunPlan,
  ports: Ports,
  stop: RunStop,
  recorder: TaskRecorder,
  progress: MergeProgressSink = () => {},
  /** The wait for the merge's approval an earlier process left (a resume waits on it). */
  approvalLeft: ApprovalWait | null = null,
): Promise<MergeStageResult | "detached"> {
  const { order } = run;
  if (!run.git)
    return {
      merge: skippedMerge("the workspace is not a git repository: tasks ran in place"),
      validation: "skipped",
    };
  const interrupted = await readMergeIntent(run);
  const recovered = interrupted ? await finishInterruptedMerge(run, ports, order, interrupted) : null;
  const found = await refChanges(run, recorder.all(), ports.now(), interrupted?.new ?? null).catch(
    (error: unknown) => {
      ports.log.warn(
        { err: errorText(error) },
        "could not compare the repository's refs with the run's start",
      );
      return [];
    },
  );
  recordCreatedRefs(recorder, ports.redactor, found);
  const refsChanged = found.map((f) => f.change);
  let stage: MergeStageResult;
  if (recovered) {
    stage = recovered;
  } else {
    // An agent's move of the target is answered (put back where safe) whatever else happens,
    // so a run whose tasks failed leaves the user's ref, index and work tree in agreement too.
    const foreign = await foreignTargetMove(run, ports, refsChanged);
    const merged = stop.ending
      ? // A detach here still merges: the tasks are done, and the run can be finished now.
        ({ merge: skippedMerge("the run was stopped before the merge"), validation: "skipped" } as const)
      : await mergeTasks({ run, ports, stop, recorder, progress, approvalLeft }, refsChanged, foreign);
    // The run-level gates were interrupted by a detach: the resumed run merges.
    if (merged === "detached") return merged;
    stage = merged;
    if (foreign && !stage.merge.reason?.includes(foreign))
      stage = { ...stage, merge: { ...stage.merge, reason: `${stage.merge.reason}. Also: ${foreign}` } };
  }
  return { ...stage, merge: { ...stage.merge, refsChanged } };
}

/** What the merge of the tasks works with. */
interface MergeSide {
  run: RunPlan;
  ports: Ports;
  stop: RunStop;
  recorder: TaskRecorder;
  progress: MergeProgressSink;
  approvalLeft?: ApprovalWait | null;
}

async function mergeTasks(
  side: MergeSide,
  refsChanged: readonly RefChange[],
  foreign: string | null,
): Promise<MergeStageResult | "detached"> {
  const { run, ports, stop, recorder, progress } = side;
  const { order } = run;
  const tasks = order.map((id) => recorder.get(id));
  // A task mid-redo (a resume) is done: the merge goes on with its redo.
  const unfinished = tasks.filter((t) => t.state !== "success" && t.redo.progress === null);
  if (unfinished.length > 0) {
    return {
      merge: skippedMerge(
        `not every task succeeded (${unfinished.map((t) => `${t.id}: ${t.state}`).join(", ")}); the workspace is unchanged and task branches are kept`,
      ),
      validation: "skipped",
    };
  }
  const { root, baseCommit, targetRef } = run.git!;
  const outcome: MergeOutcome = { ...skippedMerge(""), order: [...order], baseCommit, target: targetRef };
  await noteBisects(run, outcome);
  await ports.ledger.append("merge.started", {
    on_conflict: run.settings.on_conflict,
    on_gate_failure: run.settings.on_gate_failure,
    order: [...order],
  });
  const integrationBranch = integrationBranchOf(run);
  // The gates of a commit already judged (the integration, before its bisect): not run twice.
  const judged = new Map<string, Gate[]>();
  let items: MergeItem[];
  let message: string;
  let integration: string;
  for (;;) {
    // A culprit given a fix is run again in this merge (ordered.ts).
    const fixing = recorder.all().find((t) => t.redo.progress?.cause === "gate");
    progress({
      step: fixing ? "fixing" : "merging",
      probe: null,
      culprit: fixing?.id ?? outcome.culprit?.task ?? null,
      red_on_base: false,
    });
    const check = await checkTasks(run, ports, stop, recorder);
    if (check === "detached") return check;
    items = check.items;
    if (check.tree === null) {
      const redoAssignments = await writeRedoAssignments(run, ports, recorder, check.rest);
      return {
        merge: {
          ...outcome,
          result: "conflict",
          reason: check.halted,
          conflicts: check.conflicts,
          redoAssignments,
        },
        validation: "skipped",
      };
    }
    message = integrationMessage(
      run.runId,
      items.map((i) => {
        const t = recorder.get(i.task);
        return { id: i.task, attempt: t.attempts, commit: i.commit, redone: t.redo.done };
      }),
      await carriersOf(root, items, recorder),
    );
    integration = await createIntegrationCommit(root, {
      tree: check.tree,
      parents: check.parents,
      message,
      branch: integrationBranch,
      identity: run.identity,
    });
    outcome.resultCommit = integration;
    await killPoint(run.fault, "kill-after-integration-commit");
    if (run.settings.on_gate_failure === "halt") break;
    const next = await bisectIfRed(side, outcome, judged, { integration, check });
    if (next === "merge") break;
    if (next === "fix") continue;
    return next;
  }
  progress({ step: "validating", probe: null, culprit: outcome.culprit?.task ?? null, red_on_base: false });

  let validation: Report["summary"]["validation"] = "skipped";
  const stopped = (when: string): MergeStageResult => ({
    merge: {
      ...outcome,
      result: "skipped",
      reason: `the run was stopped ${when}; nothing was merged (the result is on ${integrationBranch})`,
    },
    validation: "skipped",
  });
  const validate = async (commit: string, what: string): Promise<MergeStageResult | "detached" | null> => {
    const gates = judged.get(commit) ?? (await runLevelGates(run, ports, stop, commit));
    if (gates === "detached") return gates;
    // Cancelled meanwhile: a gate cut short says nothing about the work.
    if (stop.ending) return stopped("during its run-level gates");
    // The reviewer judges a change the mechanical gates passed: its work is no use otherwise.
    if (run.review && !gates.some((g) => g.required && g.passed === false)) {
      const reviewed = await reviewIntegration(side, commit, gates);
      if (reviewed === "detached") return reviewed;
      if (stop.ending) return stopped("during the review of its integration");
      gates.push(reviewed.gate);
      outcome.review = reviewed.record;
    }
    // A person approves what passed everything else, last.
    if (!gates.some((g) => g.required && g.passed === false)) {
      const approved = await approveMerge(side, progress, {
        culprit: outcome.culprit?.task ?? null,
        left: side.approvalLeft ?? null,
      });
      if (approved === "detached") return approved;
      if (approved === "stopped" || stop.ending) return stopped("while its integration waited for approval");
      if (approved) gates.push(approved);
    }
    outcome.gates = gates;
    outcome.validatedCommit = gates.some((g) => g.passed !== null) ? commit : null;
    const failed = gates.filter((g) => g.required && g.passed === false);
    validation = failed.length > 0 ? "failed" : gates.some((g) => g.passed === true) ? "passed" : "skipped";
    if (failed.length === 0) return null;
    return {
      merge: {
        ...outcome,
        result: "skipped",
        reason: `run-level validation failed on ${what} (${failed.map((g) => g.name).join(", ")}); nothing was merged`,
      },
      validation,
    };
  };
  if (targetRef === null) {
    const invalid = await validate(integration, `the integration commit ${short(integration)}`);
    if (invalid) return invalid;
    return {
      merge: {
        ...outcome,
        result: "skipped",
        reason: `HEAD was detached at the start: the result is on ${integrationBranch}`,
      },
      validation,
    };
  }

  // The gates judge the exact commit the target is moved to: the integration while the target
  // is where the run started, else the merge of it onto the target's new tip (the user
  // committed meanwhile), judged again each time the target moves once more.
  if (foreign)
    return {
      merge: { ...outcome, result: "failed", reason: `${foreign}; the result is on ${integrationBranch}` },
      validation,
    };
  let expected = baseCommit;
  let next = integration;
  let validated: string | null = null;
  for (let round = 0; round < 5; round++) {
    const tip = await resolveCommit(root, targetRef);
    if (tip !== expected) {
      const refused = await refuseForeignMove(run, ports, refsChanged, expected, tip);
      if (refused) return { merge: { ...outcome, ...refused }, validation };
      ports.log.info({ target: targetRef }, "target moved during the run; merging onto its new tip");
      const onto = await mergeOntoMovedTarget(root, {
        target: tip!,
        integration,
        base: baseCommit,
        items,
        message,
        branch: integrationBranch,
        identity: run.identity,
      });
      outcome.targetMovedTo = tip;
      if (!onto.ok)
        return {
          merge: {
            ...outcome,
            result: "conflict",
            reason: `${targetRef} moved during the run and conflicts with the run's changes; nothing was merged`,
            conflicts: onto.conflicts,
          },
          validation,
        };
      expected = tip!;
      next = onto.commit;
      outcome.resultCommit = next;
    }
    if (next !== validated) {
      const what =
        next === integration
          ? `the integration commit ${short(next)}`
          : `the merge onto the moved ${targetRef} (${short(next)})`;
      const invalid = await validate(next, what);
      if (invalid) return invalid;
      validated = next;
    }
    // A cancel heard by now: the user's branch does not move.
    if (stop.ending) return stopped("before its branch moved");
    const advanced = await advanceTarget(root, {
      ref: targetRef,
      expectedOld: expected,
      newCommit: next,
      message: `termorch: run ${run.runId}`,
      intent: (a) =>
        recordMergeIntent(run, {
          ...a,
          gates: outcome.gates,
          validation,
          validated_commit: outcome.validatedCommit,
          target_moved_to: outcome.targetMovedTo,
        }),
      ...advanceHooks(run.fault),
    });
    // The record of a move that was tried stays until the run is reported (drive clears it):
    // a resume after a crash before the report finds it, and finishes or reports that move
    // instead of merging a second time.
    switch (advanced.status) {
      case "advanced":
        await killPoint(run.fault, "kill-after-merge");
        return { merge: { ...outcome, result: "success", resultCommit: next, reason: null }, validation };
      case "moved":
        // Moved again since it was read above (termorch's update did not happen): the next
        // round merges onto it.
        await clearMergeIntent(run);
        continue;
      case "blocked":
        return {
          merge: {
            ...outcome,
            result: "failed",
            reason: `not merged: ${advanced.detail}; the result is on ${integrationBranch}`,
          },
          validation,
        };
      case "rolled_back":
      case "rollback_failed":
        return advanceFailed(run, outcome, validation, advanced);
      default:
        return unreachable(advanced);
    }
  }
  return {
    merge: {
      ...outcome,
      result: "failed",
      reason: `${targetRef} kept moving during the merge; the result is on ${integrationBranch}`,
    },
    validation,
  };
}

/**
 * merge.on_gate_failure "bisect" / "bisect_and_fix": the integration is judged by the run-level
 * gates first. Green (or red by another gate than tests_cmd): "merge", and the merge goes on
 * with that verdict. Red by tests_cmd: bisected (bisect.ts). The gate red on the base, or a
 * culprit that is not to be fixed (or whose fixes are spent): the merge ends here, the culprit
 * named. A culprit to fix: its fix is recorded, and "fix" has the merge taken again, task by
 * task, the fix run at its place (ordered.ts).
 */
async function bisectIfRed(
  side: MergeSide,
  outcome: MergeOutcome,
  judged: Map<string, Gate[]>,
  { integration, check }: { integration: string; check: TasksCheck },
): Promise<MergeStageResult | "detached" | "merge" | "fix"> {
  const { run, ports, stop, recorder, progress } = side;
  progress({ step: "validating", probe: null, culprit: outcome.culprit?.task ?? null, red_on_base: false });
  let ran: TestsRan | null = null;
  const gates = await runLevelGates(run, ports, stop, integration, (r) => {
    ran = r;
  });
  if (gates === "detached") return gates;
  judged.set(integration, gates);
  // Cancelled meanwhile: validate() says so (with these gates), and nothing is bisected.
  if (stop.ending) return "merge";
  const failed = gates.filter((g) => g.required && g.passed === false);
  const tests = failed.find((g) => g.name === "run.tests_cmd");
  if (!tests || failed.length > 1) return "merge";
  const round = await bisectGate(
    { run, ports, stop, progress },
    { commit: integration, gate: tests, ran, items: check.items, steps: check.steps },
  );
  if (round === "detached") return round;
  const halted = (reason: string): MergeStageResult => ({
    merge: { ...outcome, gates, validatedCommit: integration, result: "skipped", reason },
    validation: "failed",
  });
  if (round === "stopped")
    return halted(
      `run-level validation failed on the integration commit ${short(integration)} (run.tests_cmd), and the run was stopped during its bisect; nothing was merged`,
    );
  await noteBisects(run, outcome);
  const bisect = round.bisect!;
  const { culprit } = round;
  if (bisect.outcome === "red_on_base" || culprit === null)
    return halted(
      `run-level validation failed: run.tests_cmd fails on the base commit ${short(bisect.base.commit)} itself, before any task merged (${bisect.base.detail}); no task broke it, so nothing was bisected; nothing was merged`,
    );
  const t = recorder.get(culprit.task);
  const k = check.items.findIndex((i) => i.task === culprit.task) + 1;
  const fixed = t.redo.done.some((r) => r.cause === "gate");
  if (run.settings.on_gate_failure === "bisect_and_fix" && !fixed && k > 0) {
    const ranThere = round.runs[String(k)];
    await recordGateFix({ run, ports, stop, recorder }, culprit.task, {
      start: round.start!,
      mergedBefore: check.items.slice(0, k - 1).map((i) => i.task),
      gate: { name: culprit.gate, required: true, passed: false, detail: culprit.detail },
      ran: ranThere ? testsRanOf(ranThere) : null,
      probeCommit: culprit.probe_commit,
    });
    return "fix";
  }
  const cost = `${bisect.probes.length} probe${bisect.probes.length === 1 ? "" : "s"}, ${bisect.gate_runs} gate runs`;
  return halted(
    `run-level validation failed on the integration commit ${short(integration)} (run.tests_cmd): the bisect found that ${culprit.task}'s merge turns it red (${cost})${fixed ? `; ${fixGaveUp(t, run.settings.gate_fix_attempts)}` : ""}; nothing was merged`,
  );
}

/** The report's bisects and culprit, as bisect.json has them (a resume's included). */
async function noteBisects(run: Pick<RunPlan, "privateDir">, outcome: MergeOutcome): Promise<void> {
  const { rounds } = await readBisects(run);
  outcome.bisects = rounds.flatMap((r) => (r.bisect ? [r.bisect] : []));
  outcome.culprit = rounds.findLast((r) => r.bisect !== null)?.culprit ?? null;
}

/** The merge computed in memory: its tree and parents, or (tree null) why not and every conflict. */
type TasksCheck = {
  tree: string | null;
  parents: string[];
  /** The tasks' results as merged (a redone task's new one). */
  items: MergeItem[];
  /** After each item: a commit whose tree is the merge so far. */
  steps: string[];
  conflicts: Conflict[];
  halted: string;
  /** When it halted: what merged cleanly, and what was left out. */
  rest: HaltedMerge;
};

/**
 * "halt": the pre-merge check, every conflict found at once. "redo": the merge task by task, a
 * conflicting task redone on top of what merged before it (ordered.ts).
 */
/**
 * For each redone task, the merged tasks whose result holds its earlier one: a dependent replayed
 * from its start, which keeps that result as an ancestor in the integration's history.
 */
async function carriersOf(
  root: string,
  items: readonly FoldItem[],
  recorder: Pick<TaskRecorder, "get">,
): Promise<Map<string, string[]>> {
  const out = new Map<string, string[]>();
  for (const { task } of items) {
    const before = recorder.get(task).redo.done[0]?.before_commit;
    if (!before) continue;
    const by: string[] = [];
    for (const other of items)
      if (other.task !== task && (await isAncestor(root, before, other.commit))) by.push(other.task);
    out.set(task, by);
  }
  return out;
}

async function checkTasks(
  run: RunPlan,
  ports: Ports,
  stop: RunStop,
  recorder: TaskRecorder,
): Promise<TasksCheck | "detached"> {
  const { root, baseCommit } = run.git!;
  const nothing = "the tasks' changes conflict; nothing was merged";
  // A bisect's fix runs at its task's place in the merge, as a redo does.
  const fixing = recorder
    .all()
    .some((t) => t.redo.progress !== null || t.redo.done.some((r) => r.cause === "gate"));
  if (run.settings.on_conflict === "redo" || fixing) {
    ports.log.info({ tasks: run.order.length }, "merging task by task");
    const ordered = await mergeInOrder({ run, ports, stop, recorder });
    if (ordered === "detached") return ordered;
    const parents = await integrationParents(
      root,
      baseCommit,
      ordered.items.map((i) => i.commit),
    );
    const halted = ordered.halted !== null || ordered.conflicts.length > 0;
    const merged = new Set(ordered.items.map((i) => i.task));
    return {
      tree: halted ? null : ordered.tree,
      parents,
      items: ordered.items,
      steps: ordered.steps,
      conflicts: ordered.conflicts,
      halted: ordered.halted ? `${ordered.halted}; nothing was merged` : nothing,
      rest: {
        mergedTree: ordered.tree,
        merged: ordered.items,
        leftOut: run.order.filter((id) => !merged.has(id)),
        conflicts: ordered.conflicts,
      },
    };
  }
  const items = run.order.map((id) => {
    const t = recorder.get(id);
    return { task: t.id, commit: t.git.commit!, ...(t.git.startCommit ? { start: t.git.startCommit } : {}) };
  });
  ports.log.info({ tasks: items.length }, "pre-merge check");
  const check = await checkMerge(root, baseCommit, items);
  return {
    tree: check.conflicts.length > 0 ? null : check.tree,
    parents: check.parents,
    items,
    steps: check.steps,
    conflicts: check.conflicts,
    halted: nothing,
    rest: {
      mergedTree: check.mergedTree,
      merged: items.filter((i) => check.merged.includes(i.task)),
      leftOut: check.leftOut,
      conflicts: check.conflicts,
    },
  };
}

/**
 * The target is no longer where the run (or the last round of the merge) found it. The user
 * committing on their branch in their checkout is merged onto; anything else moving it (an
 * agent's `git update-ref`, from its worktree) or deleting it is never merged over: the merge
 * fails, and termorch puts the ref back where that is safe (answerForeignMove). Null when the
 * move is the user's.
 */
async function refuseForeignMove(
  run: RunPlan,
  ports: Pick<Ports, "ledger">,
  refsChanged: readonly RefChange[],
  expected: string,
  tip: string | null,
): Promise<Pick<MergeOutcome, "result" | "reason"> | null> {
  const { root, targetRef } = run.git!;
  const since = (await refsAtStart(run))?.taken_at ?? 0;
  if (tip !== null && (await movedInCheckout(root, targetRef!, tip, since))) return null;
  const said = await answerForeignMove(run, ports, refsChanged, expected, tip);
  return { result: "failed", reason: `${said}; the result is on ${integrationBranchOf(run)}` };
}
