import { readFileSync } from "node:fs";
import { join } from "node:path";
import { SessionHandoff } from "../contract/session-handoff.js";
import type { RunState } from "../contract/state.js";
import { InputError } from "../errors.js";
import { HANDOFF_FILE } from "../fs/names.js";
import { resolveCommit } from "../git/repo.js";

/**
 * Before a run stopped at a boundary goes on (CONT-002, CONT-004): what its handoff says is done
 * is what its state says, and each finished task's branch still holds the result that was
 * checked. A change behind its back is named, never assumed away: InputError (exit 2), nothing run.
 */
export async function checkStoppedRun(state: RunState): Promise<void> {
  const problems: string[] = [];
  let handoff: SessionHandoff | null = null;
  try {
    handoff = SessionHandoff.parse(JSON.parse(readFileSync(join(state.run_dir, HANDOFF_FILE), "utf8")));
  } catch (error) {
    problems.push(
      `its ${HANDOFF_FILE} cannot be read: ${error instanceof Error ? error.message : String(error)}`,
    );
  }
  const done = state.tasks.filter((t) => t.state === "success");
  if (handoff) {
    const doneIds = new Set(done.map((t) => t.id));
    const said = new Set(handoff.progress.completed_tasks);
    for (const id of said)
      if (!doneIds.has(id)) problems.push(`its handoff says ${id} is done, its state does not`);
    for (const id of doneIds)
      if (!said.has(id)) problems.push(`its state says ${id} is done, its handoff does not`);
  }
  if (state.git)
    for (const t of done) {
      if (!t.git.branch || !t.git.commit) continue;
      const now = await resolveCommit(state.git.root, `refs/heads/${t.git.branch}`);
      if (now !== t.git.commit)
        problems.push(
          `task ${t.id}'s branch ${t.git.branch} ${now === null ? "is gone" : `moved to ${now.slice(0, 12)}`} since the stop (its checked result is ${t.git.commit.slice(0, 12)})`,
        );
    }
  if (problems.length)
    throw new InputError(
      problems.map((message) => ({
        file: join(state.run_dir, "state.json"),
        message: `run ${state.run_id}: ${message}`,
      })),
      "What the run checked is not what is there now. Put it back, or run the assignments again; nothing was resumed.",
    );
}
