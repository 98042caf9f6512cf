import type { CommitTaskChangesOptions } from "../git/commit.js";
import type { Ports } from "./ports.js";
import type { TaskRecorder } from "./recorder.js";
import { createdDuringRun } from "./ref-watch.js";
import type { TaskRun } from "./task-run.js";

/**
 * Commits the agent's work on the task branch, which is what gets merged and reported. An
 * agent may have switched its worktree to a branch of its own or a detached HEAD: then its
 * work is brought onto the task branch (the branch it created is recorded, to be reported and
 * removed), or the commit gate fails. Looked into only when the commit finds HEAD elsewhere,
 * so the usual task pays no extra git process.
 */
export async function commitOnTaskBranch(
  ports: Pick<Ports, "workspace" | "ledger">,
  recorder: TaskRecorder,
  privateDir: string,
  t: Readonly<TaskRun>,
  wt: string,
  o: Omit<CommitTaskChangesOptions, "branch">,
): Promise<string> {
  const { workspace } = ports;
  const branch = t.git.branch;
  if (branch === null) return workspace.commit(wt, o);
  try {
    return await workspace.commit(wt, { ...o, branch });
  } catch (error) {
    const head = await workspace.takeHead(wt, branch, (ref) => createdDuringRun({ privateDir }, ref));
    if (!head.moved) throw error;
    if (head.from !== null && !t.git.refsCreated.includes(head.from))
      recorder.note(t.id, { git: { refsCreated: [...t.git.refsCreated, head.from] } });
    await ports.ledger.append("task.head_taken", { from: head.from, branch, commit: head.commit }, t.id);
    return workspace.commit(wt, { ...o, branch });
  }
}
