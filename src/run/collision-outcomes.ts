import type { CollisionOutcome, PredictedCollision } from "../contract/collision.js";
import type { Conflict } from "../contract/report.js";
import { errorText } from "../errors.js";
import type { Ports } from "../task/ports.js";
import type { TaskRecorder } from "../task/recorder.js";
import type { RunPlan } from "../task/run-plan.js";

/**
 * What became of each predicted collision (input/collision-check.ts): the two tasks' changes
 * conflicted in the merge (or one was redone for conflicting with the other), both changed a same
 * file, or none; null when it cannot be known (a task did not succeed, no git).
 */
export async function collisionOutcomes(
  run: Pick<RunPlan, "git">,
  ports: Pick<Ports, "workspace" | "log">,
  recorder: Pick<TaskRecorder, "get">,
  predicted: readonly PredictedCollision[],
  conflicts: readonly Conflict[],
): Promise<CollisionOutcome[]> {
  const changed = new Map<string, Promise<Set<string> | null>>();
  const filesOf = (id: string): Promise<Set<string> | null> => {
    let files = changed.get(id);
    if (!files) {
      const t = recorder.get(id);
      const { startCommit, commit } = t.git;
      files =
        run.git && t.state === "success" && startCommit && commit
          ? ports.workspace
              .changedFiles(run.git.root, startCommit, commit)
              .then((f) => new Set(f))
              .catch((error: unknown) => {
                ports.log.warn({ task: id, err: errorText(error) }, "could not list a task's changes");
                return null;
              })
          : Promise.resolve(null);
      changed.set(id, files);
    }
    return files;
  };
  const out: CollisionOutcome[] = [];
  for (const c of predicted) {
    const [a, b] = c.tasks;
    const met = (x: string, y: string): boolean =>
      conflicts.some((k) => k.tasks.includes(x) && k.tasks.includes(y)) ||
      recorder.get(x).redo.done.some((r) => r.cause === "conflict" && r.conflicted_with.includes(y));
    if (met(a, b) || met(b, a)) {
      out.push({ ...c, actual: "conflicted" });
      continue;
    }
    const [fa, fb] = await Promise.all([filesOf(a), filesOf(b)]);
    const actual =
      fa === null || fb === null ? null : [...fa].some((f) => fb.has(f)) ? "same_files" : "disjoint";
    out.push({ ...c, actual });
  }
  return out;
}
