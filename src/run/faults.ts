import { existsSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { AdvanceTargetOptions } from "../git/advance.js";

/**
 * Fault injection for crash tests: a test names one point, where the driver fails or dies on
 * purpose, so that recovery (rollback, `termorch resume`) is tested at the exact moment that
 * matters rather than by racing a kill against the run. The fault is injected
 * (DriveOptions.fault; the test CLI test/fixtures/cli-with-fault.mjs takes it from its
 * `$TERMORCH_FAULT`): production code never reads that variable. Unset: every hook is a no-op.
 *
 * The points (`:<task>` after a task point limits it to that task):
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
  | "pause-before-drive"
  | "pause-before-merge";

/** The fault a test injected into the run (`ctx.fault`), or null. */
export type Fault = string | null;

/** Whether the fault `point` is armed (for a task point: for `taskId`). */
export function armed(fault: Fault, point: FaultPoint, taskId?: string): boolean {
  if (!fault) return false;
  const [name, only] = fault.split(":");
  if (name !== point) return false;
  return only === undefined || taskId === undefined || only === taskId;
}

/** Dies at once, as a crash or `kill -9` would: no finally blocks, no report, no state written. */
function die(): Promise<never> {
  process.kill(process.pid, "SIGKILL");
  return new Promise(() => {});
}

/** SIGKILLs the driver when `point` is armed; returns otherwise. */
export async function killPoint(fault: Fault, point: FaultPoint, taskId?: string): Promise<void> {
  if (armed(fault, point, taskId)) await die();
}

/** The hooks of advanceTarget for `after-ref-update` and `kill-after-ref-update`. */
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
