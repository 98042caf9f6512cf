import type { PredictedCollision } from "../contract/collision.js";
import { checkAgentBinaries } from "../input/agent-binaries.js";
import { loadAssignments, type RunInput } from "../input/assignments-file.js";
import { checkCollisions } from "../input/collision-check.js";
import { loadConfigOrProblems } from "../input/config-file.js";
import { checkSandboxes } from "../input/sandbox-check.js";
import { checkStartCommits } from "../input/start-commits.js";
import { buildGraph } from "../plan/graph.js";
import { planWaves } from "../plan/waves.js";
import { inspectWorkspace } from "../task/git-workspace.js";
import { backendKindOf, checkMergePolicy } from "./backend.js";

/** An assignments file that `run` would accept, and its plan. */
export interface Validated {
  input: RunInput;
  waves: string[][];
  criticalPath: string[];
  /** Tasks that may run at once and change the same files (warnings; errors were thrown). */
  collisions: PredictedCollision[];
}

/**
 * `termorch validate`: everything `run` checks before it starts anything, the workspace's
 * repository included, so that valid here means runnable there. Throws one InputError listing
 * every problem (an invalid config's among them).
 */
export async function validateAssignments(o: {
  file: string;
  /** `--config`, or undefined for the usual lookup. */
  config: string | undefined;
  env: Readonly<Record<string, string | undefined>>;
  cwd: string;
  /** Folder `workspace_dir` is relative to; default: the file's own folder. */
  baseDir?: string;
}): Promise<Validated> {
  const input = await loadAssignments(
    o.file,
    await loadConfigOrProblems(o.config, o.env, o.cwd),
    Date.now(),
    o.baseDir,
  );
  checkAgentBinaries(input, o.env);
  checkSandboxes(input, o.env);
  checkMergePolicy(input, backendKindOf(input, undefined));
  const collisions = checkCollisions(input);
  const git = await inspectWorkspace(
    input.workspace,
    input.assignments.environment.worktree_include,
    true,
    true,
    input.file,
    input.assignments.environment.worktree_copy,
  );
  await checkStartCommits(input, git);
  const graph = buildGraph(input.assignments.tasks);
  const plan = planWaves(input.assignments.tasks, graph.order);
  return { input, waves: plan.waves, criticalPath: plan.criticalPath, collisions };
}
