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
import { type TestsRan, testsGate } from "../task/tests-gate.js";

/**
 * The run-level tests_cmd runs the merged work of every agent: sandboxed as the config's
 * `defaults.sandbox` says (docs/guides/sandbox.md), with no CLI's needs.
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
  /** Told how tests_cmd ran, when it did (its logs: what a bisect's culprit quotes). */
  onTests?: (ran: TestsRan) => void,
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
  const include = run.input.assignments.environment.worktree_include;
  return inScratch(run, ports, integration, async (scratch, workspace) => {
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
        const gate = await testsIn(run, ports, stop, { scratch, workspace, logName: "tests", onTests });
        if (gate === "detached") return gate;
        gates.push(gate);
      }
    }
    return gates;
  });
}

/**
 * The run-level tests_cmd alone on `commit`, in the scratch worktree: a bisect's probe, or the
 * merge with a fixed culprit. Logs as `logs/<logName>-<ts>.*`.
 */
export async function runLevelTests(
  run: RunPlan,
  ports: Ports,
  stop: RunStop,
  commit: string,
  logName: string,
  onTests: (ran: TestsRan) => void,
): Promise<Gate | "detached"> {
  return inScratch(run, ports, commit, (scratch, workspace) =>
    testsIn(run, ports, stop, { scratch, workspace, logName, onTests }),
  );
}

/** `work` in a detached scratch worktree at `commit` (the workspace's folder of it), removed (or pooled) after. */
async function inScratch<T>(
  run: RunPlan,
  ports: Ports,
  commit: string,
  work: (scratch: string, workspace: string) => Promise<T>,
): Promise<T> {
  const scratch = integrationWorktree(run.runId);
  await removeWorktree(run.git!.root, scratch).catch(() => {});
  await prepareDetachedWorktree({
    repo: run.git!.root,
    path: scratch,
    commit,
    include: inRepo(run.git, run.input.assignments.environment.worktree_include),
    copy: inRepo(run.git, run.input.assignments.environment.worktree_copy),
    pool: ports.pool ?? undefined,
  });
  try {
    // The gates look at the workspace's folder of the integration tree.
    return await work(scratch, join(scratch, run.git!.prefix));
  } finally {
    // Into the pool when it can go there: a removal takes seconds on a large repository, and
    // the report waits for this one.
    if (!(await ports.pool?.give(scratch, commit)))
      await removeWorktree(run.git!.root, scratch).catch((error: unknown) =>
        ports.log.warn({ err: errorText(error) }, "could not remove the scratch worktree"),
      );
  }
}

/** The run-level tests_cmd in a scratch worktree, with the run's environment and sandbox. */
async function testsIn(
  run: RunPlan,
  ports: Ports,
  stop: RunStop,
  o: { scratch: string; workspace: string; logName: string; onTests: ((ran: TestsRan) => void) | undefined },
): Promise<Gate | "detached"> {
  const { scratch, workspace } = o;
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
  return testsGate(run, ports, stop, {
    name: "run.tests_cmd",
    command: run.input.assignments.success_criteria.tests_cmd!,
    cwd: workspace,
    env,
    timeoutS: timeoutOf(run.input),
    logName: o.logName,
    ...runSandbox(run, scratch, workspace, env),
    ...(o.onTests ? { onEnd: o.onTests } : {}),
  });
}
