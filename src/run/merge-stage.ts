import { rmdir, stat } from "node:fs/promises";
import { join } from "node:path";
import { agentEnvironment } from "../agent/environment.js";
import type { MergeIntent } from "../contract/merge-journal.js";
import type { Gate, RefChange, Report } from "../contract/report.js";
import { findMatches } from "../fs/find-files.js";
import { finishAdvance } from "../git/advance.js";
import {
  type AdvanceTargetOptions,
  advanceTarget,
  checkMerge,
  createIntegrationCommit,
  mergeOntoMovedTarget,
} from "../git/merge.js";
import { movedInCheckout } from "../git/refs.js";
import { resolveCommit } from "../git/repo.js";
import {
  deleteMergedBranches,
  prepareDetachedWorktree,
  removeWorktree,
  removeWorktrees,
} from "../git/worktree.js";
import { type MergeOutcome, skippedMerge } from "../report/build.js";
import { inRepo, type RunContext, worktreePath, worktreesRoot } from "./context.js";
import { clearMergeIntent, readMergeIntent, recordMergeIntent } from "./merge-intent.js";
import { refChanges, refsAtStart } from "./ref-watch.js";
import { errorText } from "./task-exec.js";
import { testsGate } from "./tests-gate.js";

export interface MergeStageResult {
  merge: MergeOutcome;
  validation: Report["summary"]["validation"];
}

/**
 * Conflict check, integration commit, run-level gates and the atomic update of the target
 * (DESIGN section 6). All or nothing: the user's branch moves only when every task succeeded,
 * nothing conflicts and every gate passed. A resume first finishes (or undoes) an update of
 * the target that the interrupted driver left half-done. Refs of the user's repository that
 * changed during the run are reported, whatever the outcome.
 */
export async function mergeStage(ctx: RunContext, order: readonly string[]): Promise<MergeStageResult> {
  if (!ctx.git)
    return {
      merge: skippedMerge("the workspace is not a git repository: tasks ran in place"),
      validation: "skipped",
    };
  const interrupted = await readMergeIntent(ctx);
  const recovered = interrupted ? await finishInterruptedMerge(ctx, order, interrupted) : null;
  const refsChanged = await refChanges(ctx).catch((error: unknown) => {
    ctx.log.warn({ err: errorText(error) }, "could not compare the repository's refs with the run's start");
    return [];
  });
  let stage: MergeStageResult;
  if (recovered) {
    if (recovered.merge.result === "success")
      await cleanUp(ctx, order, integrationBranchOf(ctx), recovered.merge.resultCommit!);
    await clearMergeIntent(ctx);
    stage = recovered;
  } else {
    stage = await mergeTasks(ctx, order, refsChanged);
  }
  return { ...stage, merge: { ...stage.merge, refsChanged } };
}

const integrationBranchOf = (ctx: RunContext): string => `termorch/${ctx.runId}/integration`;
const short = (sha: string | null): string => (sha === null ? "nothing" : sha.slice(0, 12));

/**
 * The driver died while moving the target (merge-intent.json is there): the move is finished
 * or undone first, so the user's ref, index and work tree agree. Null when the ref never moved:
 * then the merge simply runs again.
 */
async function finishInterruptedMerge(
  ctx: RunContext,
  order: readonly string[],
  intent: MergeIntent,
): Promise<MergeStageResult | null> {
  const { root, baseCommit, targetRef } = ctx.git!;
  const done = await finishAdvance(root, intent);
  await ctx.ledger.append("merge.interrupted_update", { ...intent, outcome: done.status });
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
  const where = `the result is on ${integrationBranchOf(ctx)}`;
  switch (done.status) {
    case "not_moved":
      await clearMergeIntent(ctx);
      return null;
    case "advanced":
      return { merge: { ...outcome, result: "success", reason: null }, validation };
    case "elsewhere":
      return {
        merge: {
          ...outcome,
          result: "failed",
          reason: `termorch was interrupted while moving ${intent.ref} from ${short(intent.old)} to ${short(intent.new)}, and it is now at ${short(done.current)}: it was moved since, so termorch left it alone (check git status there); ${where}`,
        },
        validation,
      };
    case "rolled_back":
      return {
        merge: {
          ...outcome,
          result: "rolled_back",
          reason: `${done.detail}; ${where}`,
        },
        validation,
      };
    case "rollback_failed":
      return { merge: { ...outcome, result: "failed", reason: done.detail }, validation };
  }
}

async function mergeTasks(
  ctx: RunContext,
  order: readonly string[],
  refsChanged: readonly RefChange[],
): Promise<MergeStageResult> {
  const tasks = order.map((id) => ctx.tasks.get(id)!);
  const unfinished = tasks.filter((t) => t.state !== "success");
  if (ctx.signal.aborted)
    return { merge: skippedMerge("the run was stopped before the merge"), validation: "skipped" };
  if (unfinished.length > 0) {
    return {
      merge: skippedMerge(
        `not every task succeeded (${unfinished.map((t) => `${t.id}: ${t.state}`).join(", ")}); the workspace is unchanged and task branches are kept`,
      ),
      validation: "skipped",
    };
  }
  const { root, baseCommit, targetRef } = ctx.git!;
  const outcome: MergeOutcome = { ...skippedMerge(""), order: [...order], baseCommit, target: targetRef };
  const items = tasks.map((t) => ({
    task: t.id,
    commit: t.commit!,
    ...(t.startCommit ? { start: t.startCommit } : {}),
  }));
  ctx.log.info({ tasks: items.length }, "pre-merge check");
  const check = await checkMerge(root, baseCommit, items);
  if (check.conflicts.length > 0 || check.tree === null) {
    return {
      merge: {
        ...outcome,
        result: "conflict",
        reason: "the tasks' changes conflict; nothing was merged",
        conflicts: check.conflicts,
      },
      validation: "skipped",
    };
  }
  const integrationBranch = integrationBranchOf(ctx);
  const message = `termorch: integrate run ${ctx.runId}\n\nTasks merged, in order:\n${order.map((id) => `- ${id}`).join("\n")}\n\nTermorch-Run: ${ctx.runId}\n`;
  const integration = await createIntegrationCommit(root, {
    tree: check.tree,
    parents: check.parents,
    message,
    branch: integrationBranch,
    identity: ctx.identity,
  });
  outcome.resultCommit = integration;

  let validation: Report["summary"]["validation"] = "skipped";
  const validate = async (commit: string, what: string): Promise<MergeStageResult | null> => {
    const gates = await runLevelGates(ctx, commit);
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
  let expected = baseCommit;
  let next = integration;
  let validated: string | null = null;
  for (let round = 0; round < 5; round++) {
    const tip = await resolveCommit(root, targetRef);
    if (tip !== expected) {
      const refused = await refuseForeignMove(ctx, refsChanged, expected, tip);
      if (refused) return { merge: { ...outcome, ...refused }, validation };
      ctx.log.info({ target: targetRef }, "target moved during the run; merging onto its new tip");
      const onto = await mergeOntoMovedTarget(root, {
        target: tip!,
        integration,
        base: baseCommit,
        items,
        message,
        branch: integrationBranch,
        identity: ctx.identity,
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
    const advanced = await advanceTarget(root, {
      ref: targetRef,
      expectedOld: expected,
      newCommit: next,
      message: `termorch: run ${ctx.runId}`,
      intent: (a) =>
        recordMergeIntent(ctx, {
          ...a,
          gates: outcome.gates,
          validation,
          validated_commit: outcome.validatedCommit,
          target_moved_to: outcome.targetMovedTo,
        }),
      ...faultHooks(ctx.fault),
    });
    if (advanced.status !== "advanced") await clearMergeIntent(ctx);
    switch (advanced.status) {
      case "advanced":
        await cleanUp(ctx, order, integrationBranch, next);
        // Only now: a resume after a crash in the clean-up finds the record and finishes it.
        await clearMergeIntent(ctx);
        return { merge: { ...outcome, result: "success", resultCommit: next, reason: null }, validation };
      case "moved":
        // Moved again since it was read above: the next round merges onto it.
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
        return {
          merge: {
            ...outcome,
            result: "rolled_back",
            reason: `the update of ${targetRef} failed and was rolled back to ${advanced.old}: ${advanced.detail}`,
          },
          validation,
        };
      case "rollback_failed":
        return {
          merge: {
            ...outcome,
            result: "failed",
            reason: `the update of ${targetRef} failed and so did the rollback: ${advanced.detail}`,
          },
          validation,
        };
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
 * The target is no longer where the run (or the last round of the merge) found it. The user
 * committing on their branch in their checkout is merged onto; anything else moving it (an
 * agent's `git update-ref`, from its worktree) or deleting it is never merged over: the merge
 * fails and termorch leaves the ref as it is. Null when the move is the user's.
 */
async function refuseForeignMove(
  ctx: RunContext,
  refsChanged: readonly RefChange[],
  expected: string,
  tip: string | null,
): Promise<Pick<MergeOutcome, "result" | "reason"> | null> {
  const { root, targetRef } = ctx.git!;
  const integrationBranch = integrationBranchOf(ctx);
  if (tip === null)
    return {
      result: "failed",
      reason: `the target ${targetRef} was deleted during the run; the result is on ${integrationBranch}`,
    };
  const since = (await refsAtStart(ctx))?.taken_at ?? 0;
  if (await movedInCheckout(root, targetRef!, tip, since)) return null;
  const change = refsChanged.find((c) => c.ref === targetRef && c.new === tip);
  const by = change?.task
    ? ` (by the agent of task ${change.task})`
    : change?.during.length
      ? ` (while ${change.during.join(", ")} ran)`
      : "";
  return {
    result: "failed",
    reason: `${targetRef} was moved from ${short(expected)} to ${short(tip)} during the run, not by a commit in ${root}${by}: termorch does not merge over that and left ${targetRef} as it is (see refs_changed; its index and work tree may not match it: check git status there); the result is on ${integrationBranch}`,
  };
}

/**
 * $TERMORCH_FAULT for crash tests: `after-ref-update` fails right after the target moved (the
 * rollback path); `kill-after-ref-update` kills the driver there (the resume path).
 */
function faultHooks(fault: string | null): Pick<AdvanceTargetOptions, "hooks"> {
  if (fault === "after-ref-update")
    return {
      hooks: {
        afterRefUpdate: () => {
          throw new Error("injected fault after the ref update");
        },
      },
    };
  if (fault === "kill-after-ref-update")
    return {
      hooks: {
        afterRefUpdate: () => {
          process.kill(process.pid, "SIGKILL");
          return new Promise(() => {});
        },
      },
    };
  return {};
}

/** success_criteria of the whole run, checked on the integration commit in a scratch worktree. */
async function runLevelGates(ctx: RunContext, integration: string): Promise<Gate[]> {
  const criteria = ctx.input.assignments.success_criteria;
  const gates: Gate[] = [];
  if (!ctx.verify) {
    if (criteria.required_artifacts.length)
      gates.push({
        name: "run.required_artifacts",
        required: true,
        passed: null,
        detail: "skipped (verify: false)",
      });
    if (criteria.tests_cmd)
      gates.push({ name: "run.tests_cmd", required: true, passed: null, detail: "skipped (verify: false)" });
    return gates;
  }
  if (criteria.required_artifacts.length === 0 && !criteria.tests_cmd) return gates;
  const scratch = join(worktreesRoot(), ctx.runId, ".integration");
  const include = ctx.input.assignments.environment.worktree_include;
  await removeWorktree(ctx.git!.root, scratch).catch(() => {});
  await prepareDetachedWorktree({
    repo: ctx.git!.root,
    path: scratch,
    commit: integration,
    include: inRepo(ctx, include),
  });
  // The gates look at the workspace's folder of the integration tree.
  const workspace = join(scratch, ctx.git!.prefix);
  try {
    if (criteria.required_artifacts.length) {
      const missing: string[] = [];
      for (const p of criteria.required_artifacts) {
        const inRunDir = p.startsWith("artifacts/");
        const found = inRunDir ? await findMatches(ctx.runDir, p) : await findMatches(workspace, p, include);
        if (found.length === 0 || (inRunDir && !(await stat(join(ctx.runDir, found[0]!)).catch(() => null))))
          missing.push(p);
      }
      gates.push({
        name: "run.required_artifacts",
        required: true,
        passed: missing.length === 0,
        detail:
          missing.length === 0
            ? `present: ${criteria.required_artifacts.join(", ")}`
            : `missing: ${missing.join(", ")}`,
      });
    }
    if (criteria.tests_cmd) {
      if (gates.some((g) => g.passed === false)) {
        gates.push({
          name: "run.tests_cmd",
          required: true,
          passed: null,
          detail: "not run: an earlier gate failed",
        });
      } else {
        const { env } = agentEnvironment({
          processEnv: ctx.processEnv,
          envVars: ctx.input.assignments.environment.env_vars,
          agentEnv: {},
          taskEnv: {},
          termorch: {
            TERMORCH_RUN_ID: ctx.runId,
            TERMORCH_RUN_DIR: ctx.runDir,
            TERMORCH_WORKSPACE: workspace,
          },
          config: ctx.input.config,
        });
        gates.push(
          await testsGate(ctx, {
            name: "run.tests_cmd",
            command: criteria.tests_cmd,
            cwd: workspace,
            env,
            timeoutS:
              ctx.input.assignments.environment.resource_limits.timeout_s ??
              ctx.input.config.defaults.timeout_s,
            logName: "tests",
          }),
        );
      }
    }
  } finally {
    await removeWorktree(ctx.git!.root, scratch).catch((error: unknown) =>
      ctx.log.warn({ err: errorText(error) }, "could not remove the scratch worktree"),
    );
  }
  return gates;
}

/** After a successful merge: task worktrees and branches go, unless --keep-branches. */
async function cleanUp(
  ctx: RunContext,
  order: readonly string[],
  integrationBranch: string,
  merged: string,
): Promise<void> {
  if (ctx.keepBranches) return;
  const root = ctx.git!.root;
  // In bulk: a git process per task and branch was most of what a run spent after its merge.
  try {
    await removeWorktrees(
      root,
      order.map((id) => worktreePath(ctx, id)),
    );
    // Refs the agents created go with their task branches (only when merged: nothing is lost).
    const branches = order.flatMap((id) => {
      const t = ctx.tasks.get(id)!;
      return [...(t.branch ? [t.branch] : []), ...t.refsCreated];
    });
    const kept = await deleteMergedBranches(root, [...branches, integrationBranch], merged);
    if (kept.length > 0) ctx.log.warn({ kept }, "branches not contained in the merged target were kept");
  } catch (error) {
    ctx.log.warn({ err: errorText(error) }, "could not remove the task worktrees or branches");
  }
  // The run's folder of worktrees, now empty.
  await rmdir(join(worktreesRoot(), ctx.runId)).catch(() => {});
}
