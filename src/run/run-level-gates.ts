import { stat } from "node:fs/promises";
import { join } from "node:path";
import { agentEnvironment } from "../agent/environment.js";
import type { Gate } from "../contract/report.js";
import { errorText } from "../errors.js";
import { findMatches } from "../fs/find-files.js";
import { integrationWorktree } from "../fs/names.js";
import { prepareDetachedWorktree, removeWorktree } from "../git/worktree.js";
import { inRepo, type RunContext } from "./context.js";
import { timeoutOf } from "./task-plan.js";
import { testsGate } from "./tests-gate.js";

/** success_criteria of the whole run, checked on the integration commit in a scratch worktree. */
export async function runLevelGates(ctx: RunContext, integration: string): Promise<Gate[] | "detached"> {
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
  const scratch = integrationWorktree(ctx.runId);
  const include = ctx.input.assignments.environment.worktree_include;
  await removeWorktree(ctx.git!.root, scratch).catch(() => {});
  await prepareDetachedWorktree({
    repo: ctx.git!.root,
    path: scratch,
    commit: integration,
    include: inRepo(ctx, include),
    copy: inRepo(ctx, ctx.input.assignments.environment.worktree_copy),
    pool: ctx.pool ?? undefined,
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
        const gate = await testsGate(ctx, {
          name: "run.tests_cmd",
          command: criteria.tests_cmd,
          cwd: workspace,
          env,
          timeoutS: timeoutOf(ctx.input),
          logName: "tests",
        });
        if (gate === "detached") return gate;
        gates.push(gate);
      }
    }
  } finally {
    // Into the pool when it can go there: a removal takes seconds on a large repository, and
    // the report waits for this one.
    if (!(await ctx.pool?.give(scratch, integration)))
      await removeWorktree(ctx.git!.root, scratch).catch((error: unknown) =>
        ctx.log.warn({ err: errorText(error) }, "could not remove the scratch worktree"),
      );
  }
  return gates;
}
