import { existsSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { AdvanceTargetOptions } from "../git/advance.js";

/**
 * Fault injection for crash tests: a test names one point, where the driver fails or dies on
 * purpose, so that recovery (rollback, `termorch resume`) is tested at the exact moment that
 * matters rather than by racing a kill against the run. The fault is injected
 * (DriveOptions.seams.fault; the test CLI test/fixtures/cli-with-fault.mjs takes it from its
 * `$TERMORCH_FAULT`): production code never reads that variable. Unset: every hook is a no-op.
 *
 * The points (`:<task>` after a task point limits it to that task; `:<task>@<n>` to its attempt
 * n, at the points marked [@n], so a test can land inside a redo):
 * - `after-ref-update`: throws right after the target ref moved, before the work tree followed,
 *   so advanceTarget's rollback is exercised.
 * - `kill-after-ref-update`: SIGKILL at that same moment: ref moved, index and work tree not;
 *   a resume must finish the update (merge-intent.json).
 * - `kill-after-merge`: SIGKILL once the target moved, before the report: a resume must report
 *   the merge, not merge a second time.
 * - `kill-in-clean-up`: SIGKILL in the clean-up after the report, before the worktrees left and
 *   the branches are removed: `termorch clean` must finish what is left.
 * - `kill-after-put-back`: SIGKILL right after termorch put back a target an agent moved, before
 *   the report: a resume must still refuse the merge (the target looks untouched by then).
 * - `after-branch-created[:task]`: SIGKILL right after a task branch was created, before its
 *   worktree: a resume must take the branch over.
 * - `after-worktree-added[:task]`: SIGKILL right after a task worktree was added, before its
 *   start commit was recorded: a resume must take branch and worktree over.
 * - `kill-after-accepted`: SIGKILL once the ledger says run.accepted, before state.json or any
 *   task: a resume must start the run from nothing.
 * - `kill-after-attempt-recorded[:task]` [@n]: SIGKILL once an attempt is recorded (its number and
 *   folder in the task journal), before its session exists: a resume launches it, under the same
 *   attempt number.
 * - `kill-after-retry-recorded[:task]`: the same once a retry (attempt 2 or later) is recorded,
 *   before its session exists: the task is still recorded as running (its earlier attempt), and
 *   a resume must launch the retry, not take it as lost.
 * - `kill-while-running[:task]` [@n]: SIGKILL once the agent runs in its session: a resume adopts it.
 * - `kill-after-exit[:task]` [@n]: SIGKILL once the driver has seen the attempt's exit record, before
 *   its gates: a resume takes the exit from the record, never runs the attempt again.
 * - `kill-in-gate[:task]` [@n]: SIGKILL while the task's tests_cmd gate runs (once its process group
 *   is recorded): the gate must not outlive the driver, and a resume runs it again.
 * - `kill-after-status[:task]` [@n]: SIGKILL once the task's final state (success or failed) is
 *   written (status file, journal).
 * - `kill-after-remote-launch[:task]`: SIGKILL once a worker's start of an attempt is in the
 *   ledger (task.launched naming its host), before its state changes: a resume that learns the
 *   attempt from the job's result must not record its launch again.
 * - `kill-after-feedback[:task]` [@n]: SIGKILL once the feedback section for the attempt after a
 *   failed attempt n is written, before the next attempt is chosen for good: a resume judges
 *   attempt n again (the same verdict: its worktree has not moved) and goes on.
 * - `kill-after-next-chosen[:task]` [@n]: SIGKILL once the retry or escalation after attempt n is
 *   recorded (TaskRun.next), before the worktree moved to its start: a resume carries it out,
 *   never judging attempt n again nor running it twice.
 * - `kill-while-waiting-quota[:task]`: SIGKILL while the task waits for a rate limit to lift (its
 *   next attempt's earliest start journaled): a resume waits until that same moment, then runs it.
 * - `kill-while-waiting-approval[:task]`: SIGKILL while the task waits for a person's decision
 *   (its wait journaled): a decision given meanwhile is taken by the resume, which runs nothing twice.
 * - `kill-after-integration-commit`: SIGKILL once the integration commit and branch exist,
 *   before the target moves.
 * - `kill-after-redo-recorded[:task]`: SIGKILL once a redo is recorded (its conflict section
 *   written, the task's earlier result kept), before its branch moved: a resume prepares it.
 * - `kill-after-redo-prepared[:task]`: SIGKILL once the task branch and worktree are at the
 *   redo's start, before its attempt: a resume launches the attempt.
 * - `kill-after-redo-restoring[:task]`: SIGKILL once the last redo failed and the putting back
 *   of the earlier result is recorded, before it is done: a resume finishes it and halts.
 * - `kill-in-probe[:k]`: SIGKILL while the run-level tests_cmd runs on a bisect's probe (k tasks
 *   merged; `:0` the base; `:fix` its run on the merge with a culprit's fix), once its process
 *   group is recorded: a resume must leave no probe behind (no branch, no worktree) and go on
 *   with the verdicts already judged.
 * - `kill-after-fix-recorded[:task]`: SIGKILL once the bisect's culprit is given a fix (its
 *   feedback section written, its earlier result kept, its redo recorded), before its branch
 *   moved: a resume prepares and runs that fix, once.
 * - `kill-after-worktree-update`: SIGKILL once ref, index and work tree all moved, before the
 *   driver knows: a resume must report the merge, not merge again.
 * - `kill-before-report`: SIGKILL once the ledger says report.written, before the file is.
 * - `kill-after-report`: SIGKILL once execution_report.json is written, before state.json says
 *   the run is reported: a resume writes the same outcome again.
 * - `pause-before-drive`: the driver writes `<run-dir>/fault-paused` and waits for
 *   `<run-dir>/fault-continue` between inspecting the workspace and starting the tasks, so a
 *   test can act (commit as the user) in that window.
 * - `pause-before-merge`: the same pause once every task is done, before the merge stage (a
 *   test stops the daemon there: the finished run still merges).
 */
export type FaultPoint =
  | "after-ref-update"
  | "kill-after-ref-update"
  | "kill-after-merge"
  | "kill-in-clean-up"
  | "kill-after-put-back"
  | "after-branch-created"
  | "after-worktree-added"
  | "kill-after-accepted"
  | "kill-after-attempt-recorded"
  | "kill-after-retry-recorded"
  | "kill-while-running"
  | "kill-after-exit"
  | "kill-in-gate"
  | "kill-after-status"
  | "kill-after-remote-launch"
  | "kill-after-feedback"
  | "kill-after-next-chosen"
  | "kill-while-waiting-quota"
  | "kill-while-waiting-approval"
  | "kill-after-integration-commit"
  | "kill-after-redo-recorded"
  | "kill-after-redo-prepared"
  | "kill-after-redo-restoring"
  | "kill-in-probe"
  | "kill-after-fix-recorded"
  | "kill-after-worktree-update"
  | "kill-before-report"
  | "kill-after-report"
  | "pause-before-drive"
  | "pause-before-merge";

/** The fault a test injected into the run (`RunPlan.fault`), or null. */
export type Fault = string | null;

/**
 * Whether the fault `point` is armed (for a task point: for `taskId`; `<task>@<n>`: only in its
 * attempt n, at the points that pass their attempt).
 */
export function armed(fault: Fault, point: FaultPoint, taskId?: string, attempt?: number): boolean {
  if (!fault) return false;
  const [name, only] = fault.split(":");
  if (name !== point) return false;
  if (only === undefined || taskId === undefined) return true;
  const [task, at] = only.split("@");
  return task === taskId && (at === undefined || Number(at) === attempt);
}

/** Dies at once, as a crash or `kill -9` would: no finally blocks, no report, no state written. */
function die(): Promise<never> {
  process.kill(process.pid, "SIGKILL");
  return new Promise(() => {});
}

/** SIGKILLs the driver when `point` is armed; returns otherwise. */
export async function killPoint(
  fault: Fault,
  point: FaultPoint,
  taskId?: string,
  attempt?: number,
): Promise<void> {
  if (armed(fault, point, taskId, attempt)) await die();
}

/**
 * `kill-in-gate`: SIGKILLs the driver once the gate whose process group goes to `record` has
 * started (the file appears), so the gate is cut off mid-run rather than before it began.
 */
export function gatePoint(fault: Fault, taskId: string | undefined, record: string, attempt?: number): void {
  if (armed(fault, "kill-in-gate", taskId, attempt)) dieOnceThere(record);
}

/** `kill-in-probe`: the same for the gate of a bisect's probe of k tasks (`fix`: the check of a culprit's fix). */
export function probePoint(fault: Fault, k: number | "fix", record: string): void {
  if (armed(fault, "kill-in-probe", String(k))) dieOnceThere(record);
}

function dieOnceThere(record: string): void {
  const poll = setInterval(() => {
    if (existsSync(record)) {
      clearInterval(poll);
      void die();
    }
  }, 5);
}

/** The hooks of advanceTarget for `after-ref-update`, `kill-after-ref-update` and `kill-after-worktree-update`. */
export function advanceHooks(fault: Fault): Pick<AdvanceTargetOptions, "hooks"> {
  if (armed(fault, "after-ref-update"))
    return {
      hooks: {
        afterRefUpdate: () => {
          throw new Error("injected fault after the ref update");
        },
      },
    };
  if (armed(fault, "kill-after-ref-update")) return { hooks: { afterRefUpdate: die } };
  if (armed(fault, "kill-after-worktree-update")) return { hooks: { afterWorktreeUpdate: die } };
  return {};
}

/** The hooks of prepareTaskWorktree for `after-branch-created` and `after-worktree-added`. */
export function prepareHooks(
  fault: Fault,
  taskId: string,
): { afterBranch?: () => void; afterWorktree?: () => void } {
  const kill = (): void => void die();
  if (armed(fault, "after-branch-created", taskId)) return { afterBranch: kill };
  if (armed(fault, "after-worktree-added", taskId)) return { afterWorktree: kill };
  return {};
}

/** A `pause-before-*` point: announces the pause with a file and waits (polling) for the go file. */
export async function pausePoint(
  fault: Fault,
  runDir: string,
  point: "pause-before-drive" | "pause-before-merge",
): Promise<void> {
  if (!armed(fault, point)) return;
  writeFileSync(join(runDir, "fault-paused"), "");
  while (!existsSync(join(runDir, "fault-continue"))) await new Promise((r) => setTimeout(r, 25));
}
