import { errorText } from "../errors.js";
import { workRefOf } from "../fs/names.js";
import { git } from "../git/repo.js";
import { commitOnTaskBranch } from "./commit.js";
import { taskCommitMessage } from "./gates.js";
import type { StartFrom } from "./next-attempt.js";
import type { Ports } from "./ports.js";
import type { TaskRecorder } from "./recorder.js";
import type { RunPlan } from "./run-plan.js";
import { secretsGate } from "./secrets-gate.js";
import type { TaskRun } from "./task-run.js";

/** The worktree of a task that failed an attempt, and what termorch leaves in it or commits. */
export interface FailedWorktree {
  worktree: string;
  agent: string;
  keepInRepo: readonly string[];
  scratch: readonly string[];
}

/** What keeping a failed attempt's work came to. */
export interface KeptWork {
  /** The commit of its work, at its work ref (not on the task branch); null: nothing could be committed. */
  commit: string | null;
  ref: string | null;
  /** Where the secrets gate found a secret's value: then nothing was committed, the worktree is left as it is. */
  secrets: string[];
}

/**
 * Keeps what a failed attempt left in its worktree, so nothing is lost and a retry can go on
 * from it: committed (after the secrets gate: a secret is never committed) and pointed at by
 * its work ref, the worktree left as it was. A torn attempt (timed out, lost) is not
 * committed: its retry starts from the last committed state instead.
 */
export async function keepFailedWork(
  run: Pick<RunPlan, "git" | "runId" | "privateDir" | "identity">,
  ports: Pick<Ports, "workspace" | "ledger" | "redactor" | "secretFinder">,
  recorder: TaskRecorder,
  t: Readonly<TaskRun>,
  w: FailedWorktree,
  torn: boolean,
): Promise<KeptWork> {
  const none: KeptWork = { commit: null, ref: null, secrets: [] };
  if (!run.git || !t.git.startCommit) return none;
  let commit = t.git.commit;
  let tipBefore: string | null = null;
  if (!torn) {
    const secrets = await secretsGate(ports, w.worktree, t.git.startCommit, w.keepInRepo, w.scratch);
    if (secrets && !secrets.gate.passed) return { ...none, secrets: secrets.places };
    tipBefore = (await git(w.worktree, ["rev-parse", "--verify", "-q", "HEAD"])).stdout.trim() || null;
    commit = await commitOnTaskBranch(ports, recorder, run.privateDir, t, w.worktree, {
      message: taskCommitMessage(t, w.agent, run.runId),
      exclude: [...w.keepInRepo],
      scratch: w.scratch,
      start: t.git.startCommit,
      identity: run.identity,
    }).catch((error: unknown) => {
      // An agent that left its worktree unmergeable: its retry starts from its last commit.
      void ports.ledger.append(
        "task.work_not_kept",
        { attempt: t.attempts, why: ports.redactor.redact(errorText(error)) },
        t.id,
      );
      return t.git.commit;
    });
  }
  if (!commit) return none;
  const ref = workRefOf(run.runId, t.id, t.attempts);
  await git(run.git.root, ["update-ref", "-m", "termorch: keep an attempt's work", ref, commit]);
  // The branch goes back to where the attempt left it, its work staying in the worktree as
  // uncommitted changes: the next attempt goes on with them, and its own commit holds the
  // task's whole change, so a failed attempt never reaches the merged history (its ref keeps it).
  if (tipBefore && commit !== tipBefore) await git(w.worktree, ["reset", "-q", tipBefore]);
  return { commit, ref, secrets: [] };
}

/**
 * Puts the worktree where the next attempt starts: the task's start (`base`), the last
 * committed state (`last_commit`), or as the failed attempt left it (`last_work`, nothing to do).
 */
export async function startNextFrom(
  ports: Pick<Ports, "workspace">,
  recorder: TaskRecorder,
  t: Readonly<TaskRun>,
  w: Pick<FailedWorktree, "worktree" | "keepInRepo">,
  from: StartFrom,
): Promise<void> {
  if (!t.git.startCommit || from === "last_work") return;
  if (from === "base") {
    await ports.workspace.reset(w.worktree, t.git.startCommit, w.keepInRepo);
    recorder.note(t.id, { git: { commit: null } });
    return;
  }
  await ports.workspace.reset(w.worktree, t.git.commit ?? t.git.startCommit, w.keepInRepo);
}
