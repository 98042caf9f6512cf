import { existsSync } from "node:fs";
import { join } from "node:path";
import { runBranchesPrefix, runWorktreesDir } from "../fs/names.js";
import { isEmptyOrMissing } from "../fs/paths.js";
import { registeredRuns } from "../fs/registry.js";
import { hasRefsUnder } from "../git/refs.js";
import type { TaskRunner } from "../runner/task-runner.js";
import type { GitRun } from "../task/workspace.js";

/** Where runs go: one given folder, or a folder per run id (`apart`), which must not exist yet. */
export type RunDirs = { folder: string } | { apart: (runId: string) => string };

/**
 * The run id, or the first `<id>-<n>` that no branch, worktree folder, tmux session, other
 * registered run or (runs kept apart) run directory uses yet.
 */
export async function freshRunId(
  id: string,
  repo: GitRun | null,
  runner: TaskRunner,
  dirs: RunDirs,
  env: Readonly<Record<string, string | undefined>>,
): Promise<string> {
  const live = await runner.runsWithSessions();
  const runDirOf = (runId: string): string => ("folder" in dirs ? dirs.folder : dirs.apart(runId));
  // Operator commands find runs by id: another run directory that still holds its state owns the id.
  for (const entry of await registeredRuns(env)) {
    if (entry.run_dir !== runDirOf(entry.run_id) && existsSync(join(entry.run_dir, "state.json")))
      live.add(entry.run_id);
  }
  for (let n = 1; ; n++) {
    const suffix = n === 1 ? "" : `-${n}`;
    const candidate = `${id.slice(0, 64 - suffix.length)}${suffix}`;
    if (live.has(candidate) || !isEmptyOrMissing(runWorktreesDir(candidate))) continue;
    if ("apart" in dirs && existsSync(dirs.apart(candidate))) continue;
    if (repo) {
      if (await hasRefsUnder(repo.root, runBranchesPrefix(candidate))) continue;
    }
    return candidate;
  }
}
