import { rmdir, stat } from "node:fs/promises";
import { join } from "node:path";
import { agentEnvironment } from "../agent/environment.js";
import type { Gate, Report } from "../contract/report.js";
import { findMatches } from "../fs/find-files.js";
import { advanceTarget, checkMerge, createIntegrationCommit, mergeOntoMovedTarget } from "../git/merge.js";
import {
  deleteMergedBranches,
  prepareDetachedWorktree,
  removeWorktree,
  removeWorktrees,
} from "../git/worktree.js";
import { type MergeOutcome, skippedMerge } from "../report/build.js";
import { inRepo, type RunContext, worktreePath, worktreesRoot } from "./context.js";
import { errorText } from "./task-exec.js";
import { testsGate } from "./tests-gate.js";

export interface MergeStageResult {
  merge: MergeOutcome;
  validation: Report["summary"]["validation"];
}

/**
 * Conflict check, integration commit, run-level gates and the atomic update of the target
 * (DESIGN section 6). All or nothing: the user's branch moves only when every task succeeded,
 * nothing conflicts and every gate passed.
 */
export async function mergeStage(ctx: RunContext, order: readonly string[]): Promise<MergeStageResult> {
  const tasks = order.map((id) => ctx.tasks.get(id)!);
  const unfinished = tasks.filter((t) => t.state !== "success");
  if (!ctx.git)
    return {
      merge: skippedMerge("the workspace is not a git repository: tasks ran in place"),
      validation: "skipped",
    };
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
  const { root, baseCommit, targetRef } = ctx.git;
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
  const integrationBranch = `termorch/${ctx.runId}/integration`;
  const message = `termorch: integrate run ${ctx.runId}\n\nTasks merged, in order:\n${order.map((id) => `- ${id}`).join("\n")}\n\nTermorch-Run: ${ctx.runId}\n`;
  const integration = await createIntegrationCommit(root, {
    tree: check.tree,
    parents: check.parents,
    message,
    branch: integrationBranch,
    identity: ctx.identity,
  });
  outcome.resultCommit = integration;

  const gates = await runLevelGates(ctx, integration);
  outcome.gates = gates;
  const failed = gates.filter((g) => g.required && g.passed === false);
  const validation =
    failed.length > 0 ? "failed" : gates.some((g) => g.passed === true) ? "passed" : "skipped";
  if (failed.length > 0) {
    return {
      merge: {
        ...outcome,
        result: "skipped",
        reason: `run-level validation failed (${failed.map((g) => g.name).join(", ")}); nothing was merged`,
      },
      validation,
    };
  }
  if (targetRef === null) {
    return {
      merge: {
        ...outcome,
        result: "skipped",
        reason: `HEAD was detached at the start: the result is on ${integrationBranch}`,
      },
      validation,
    };
  }

  let expected = baseCommit;
  let next = integration;
  for (let round = 0; round < 5; round++) {
    const advanced = await advanceTarget(root, {
      ref: targetRef,
      expectedOld: expected,
      newCommit: next,
      message: `termorch: run ${ctx.runId}`,
      ...(ctx.fault === "after-ref-update"
        ? {
            hooks: {
              afterRefUpdate: () => {
                throw new Error("injected fault after the ref update");
              },
            },
          }
        : {}),
    });
    switch (advanced.status) {
      case "advanced":
        await cleanUp(ctx, order, integrationBranch, next);
        return { merge: { ...outcome, result: "success", resultCommit: next, reason: null }, validation };
      case "moved": {
        if (advanced.current === null)
          return {
            merge: {
              ...outcome,
              result: "failed",
              reason: `the target ${targetRef} was deleted during the run`,
            },
            validation,
          };
        ctx.log.info({ target: targetRef }, "target moved during the run; merging onto its new tip");
        const onto = await mergeOntoMovedTarget(root, {
          target: advanced.current,
          integration,
          base: baseCommit,
          items,
          message,
          branch: integrationBranch,
          identity: ctx.identity,
        });
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
        expected = advanced.current;
        next = onto.commit;
        outcome.resultCommit = next;
        break;
      }
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
          termorch: { TERMORCH_RUN_ID: ctx.runId, TERMORCH_WORKSPACE: workspace },
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
    const branches = order.flatMap((id) => ctx.tasks.get(id)!.branch ?? []);
    const kept = await deleteMergedBranches(root, [...branches, integrationBranch], merged);
    if (kept.length > 0) ctx.log.warn({ kept }, "branches not contained in the merged target were kept");
  } catch (error) {
    ctx.log.warn({ err: errorText(error) }, "could not remove the task worktrees or branches");
  }
  // The run's folder of worktrees, now empty.
  await rmdir(join(worktreesRoot(), ctx.runId)).catch(() => {});
}
