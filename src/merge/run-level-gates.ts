import { stat } from "node:fs/promises";
import { join } from "node:path";
import { agentEnvironment } from "../agent/environment.js";
import type { Gate } from "../contract/report.js";
import { errorText } from "../errors.js";
import { findMatches } from "../fs/find-files.js";
import { integrationWorktree } from "../fs/names.js";
import { prepareDetachedWorktree, removeWorktree } from "../git/worktree.js";
import { resolveSandbox, type SandboxSetting } from "../sandbox/policy.js";
import type { Ports } from "../task/ports.js";
import { inRepo, type RunPlan } from "../task/run-plan.js";
import type { SandboxedWork } from "../task/sandbox.js";
import type { RunStop } from "../task/stop.js";
import { timeoutOf } from "../task/task-plan.js";
import { testsGate } from "../task/tests-gate.js";

/**
 * The run-level tests_cmd runs the merged work of every agent: sandboxed as the config's
 * `defaults.sandbox` says (README, "Sandboxing agents"), with no CLI's needs.
 */
function runSandbox(
  run: Pick<RunPlan, "input">,
  scratch: string,
  workspace: string,
  env: Readonly<Record<string, string>>,
): { sandbox?: { setting: SandboxSetting; work: SandboxedWork } } {
  const setting = resolveSandbox([run.input.config.defaults.sandbox], null);
  if (!setting) return {};
  const work = {
    worktree: scratch,
    branch: null,
    cwd: workspace,
    home: env.HOME ?? "/",
    writable: { folders: [], files: [] },
    readable: [],
  };
  return { sandbox: { setting, work } };
}

/** success_criteria of the whole run, checked on the integration commit in a scratch worktree. */
export async function runLevelGates(
  run: RunPlan,
  ports: Ports,
  stop: RunStop,
  integration: string,
): Promise<Gate[] | "detached"> {
  const criteria = run.input.assignments.success_criteria;
  const gates: Gate[] = [];
  if (!run.settings.verify) {
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
  const scratch = integrationWorktree(run.runId);
  const include = run.input.assignments.environment.worktree_include;
  await removeWorktree(run.git!.root, scratch).catch(() => {});
  await prepareDetachedWorktree({
    repo: run.git!.root,
    path: scratch,
    commit: integration,
    include: inRepo(run.git, include),
    copy: inRepo(run.git, run.input.assignments.environment.worktree_copy),
    pool: ports.pool ?? undefined,
  });
  // The gates look at the workspace's folder of the integration tree.
  const workspace = join(scratch, run.git!.prefix);
  try {
    if (criteria.required_artifacts.length) {
      const missing: string[] = [];
      for (const p of criteria.required_artifacts) {
        const inRunDir = p.startsWith("artifacts/");
        const found = inRunDir ? await findMatches(run.runDir, p) : await findMatches(workspace, p, include);
        if (found.length === 0 || (inRunDir && !(await stat(join(run.runDir, found[0]!)).catch(() => null))))
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
          processEnv: run.processEnv,
          envVars: run.input.assignments.environment.env_vars,
          agentEnv: {},
          taskEnv: {},
          termorch: {
            TERMORCH_RUN_ID: run.runId,
            TERMORCH_RUN_DIR: run.runDir,
            TERMORCH_WORKSPACE: workspace,
          },
          config: run.input.config,
        });
        const gate = await testsGate(run, ports, stop, {
          name: "run.tests_cmd",
          command: criteria.tests_cmd,
          cwd: workspace,
          env,
          timeoutS: timeoutOf(run.input),
          logName: "tests",
          ...runSandbox(run, scratch, workspace, env),
        });
        if (gate === "detached") return gate;
        gates.push(gate);
      }
    }
  } finally {
    // Into the pool when it can go there: a removal takes seconds on a large repository, and
    // the report waits for this one.
    if (!(await ports.pool?.give(scratch, integration)))
      await removeWorktree(run.git!.root, scratch).catch((error: unknown) =>
        ports.log.warn({ err: errorText(error) }, "could not remove the scratch worktree"),
      );
  }
  return gates;
}
