import { join, posix } from "node:path";
import type { RunState } from "../contract/state.js";
import type { Identity } from "../git/repo.js";
import type { RunInput } from "../input/assignments-file.js";
import { buildGraph } from "../plan/graph.js";
import { type Plan, planWaves } from "../plan/waves.js";
import { planMergeReview, planTasks, type ReviewPlan, type TaskPlan } from "./task-plan.js";
import type { GitRun } from "./workspace.js";

/** How a run is driven; persisted in state.json so a resume drives it the same way. */
export type RunSettings = RunState["options"];

/**
 * The run's facts: fixed once the run is prepared (`planRun` in src/run/run-plan.ts, or a worker's
 * job in src/scale/task-job.ts), read by every stage, changed by none.
 */
export interface RunPlan {
  readonly input: RunInput;
  readonly runId: string;
  readonly runDir: string;
  /** Private per-run folder (0700) in the run directory: attempt folders, prompts, the journal. */
  readonly privateDir: string;
  readonly git: GitRun | null;
  /** Each task's plan, resolved once from the validated input. */
  readonly plans: ReadonlyMap<string, TaskPlan>;
  /** The review of its integration before it is merged (`merge.review`); null: none. */
  readonly review: ReviewPlan | null;
  readonly settings: RunSettings;
  /** The dependency graph's waves, critical path and each task's remaining work. */
  readonly waves: Plan;
  /** Task ids in dependency order: the merge's order. */
  readonly order: readonly string[];
  /** Author and committer of termorch's commits (config `git.author`, else the repository's user). */
  readonly identity: Identity;
  readonly killGraceMs: number;
  readonly maxLogBytes: number;
  readonly processEnv: Readonly<Record<string, string | undefined>>;
  /** Redaction pattern sources handed to the runner for the agents' logs. */
  readonly redactSources: readonly string[];
  /** A fault injected by crash tests (DriveOptions.seams.fault); the points are listed in faults.ts. */
  readonly fault: string | null;
  /** The run was interrupted and is being resumed: leftovers of its own earlier process may exist. */
  readonly resumed: boolean;
  readonly startedAt: number;
  /** Where `workspace_dir` was resolved from, and where the run was started (a resume loads the same way). */
  readonly baseDir: string;
  readonly cwd: string;
}

/**
 * The run's facts, from the validated input and what preparing the run found (its git side, id
 * and folder): the driver's (src/run/) and a worker's job (src/scale/task-job.ts) alike.
 */
export function planRun(p: {
  input: RunInput;
  git: GitRun | null;
  runId: string;
  runDir: string;
  baseDir: string;
  cwd: string;
  settings: RunSettings;
  identity: Identity;
  env: Readonly<Record<string, string | undefined>>;
  redactSources: readonly string[];
  startedAt: number;
  fault: string | null;
  resumed: boolean;
  /** Where the task worktrees go; default: the run's folder of worktrees in the per-user folder. */
  worktreesDir?: string;
}): RunPlan {
  const { input, runId, runDir } = p;
  const nodes = input.assignments.tasks;
  const graph = buildGraph(nodes);
  const place = {
    runId,
    runDir,
    gitPrefix: p.git?.prefix ?? null,
    processEnv: p.env,
    ...(p.worktreesDir ? { worktreesDir: p.worktreesDir } : {}),
  };
  return {
    input,
    runId,
    runDir,
    privateDir: join(runDir, ".termorch", runId),
    git: p.git,
    plans: planTasks(input, place),
    review: planMergeReview(input, place),
    settings: p.settings,
    waves: planWaves(nodes, graph.order),
    order: graph.order,
    identity: p.identity,
    killGraceMs: input.config.defaults.kill_grace_s * 1000,
    maxLogBytes:
      input.assignments.environment.resource_limits.max_log_bytes ?? input.config.defaults.max_log_bytes,
    processEnv: p.env,
    redactSources: p.redactSources,
    fault: p.fault,
    resumed: p.resumed,
    startedAt: p.startedAt,
    baseDir: p.baseDir,
    cwd: p.cwd,
  };
}

/** Workspace-relative paths as repository-relative ones (the workspace may be a folder inside the repository). */
export function inRepo(git: Pick<GitRun, "prefix"> | null, paths: readonly string[]): string[] {
  const prefix = git?.prefix;
  return prefix ? paths.map((p) => posix.join(prefix, p)) : [...paths];
}

/** Repository-relative paths as workspace-relative ones; paths outside the workspace keep a leading "../". */
export function inWorkspace(git: Pick<GitRun, "prefix"> | null, paths: readonly string[]): string[] {
  const prefix = git?.prefix;
  return prefix ? paths.map((p) => posix.relative(prefix, p)) : [...paths];
}

/** Trailers naming the run and task on every commit termorch makes for a task. */
export function trailersOf(runId: string, taskId: string): Record<string, string> {
  return { "Termorch-Run": runId, "Termorch-Task": taskId };
}
