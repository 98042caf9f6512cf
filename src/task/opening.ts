import { existsSync, mkdirSync, rmSync } from "node:fs";
import type { LedgerEntry } from "../contract/ledger-events.js";
import type { Reason } from "../contract/reason.js";
import type { Conflict } from "../contract/report.js";
import { sessionName } from "../fs/names.js";
import { DETACHED, type TaskEnd } from "./executor.js";
import { killPoint } from "./faults.js";
import type { Ports } from "./ports.js";
import type { TaskRecorder } from "./recorder.js";
import type { RunPlan } from "./run-plan.js";
import { outOfBudget } from "./spend.js";
import type { RunStop } from "./stop.js";
import type { TaskPlan } from "./task-plan.js";

/** How a task's start was made: its start commit and branch, and the ledger event that says so. */
export type StartMade =
  | {
      ok: true;
      startCommit: string;
      branch: string;
      /** Where the start was made: a worktree here, or a commit published for a worker. */
      event: Extract<LedgerEntry, { type: "task.worktree" | "task.published" }>;
    }
  | { ok: false; conflict: Conflict; branch: string | null }
  | { ok: false; detail: string; branch: string | null };

/**
 * Where a task starts, the executor's own part of the opening: a worktree prepared here (local),
 * or a start commit published for a worker (remote).
 */
export interface TaskStart {
  /** The start must be made now: no earlier process of the run made it. */
  needed: boolean;
  make(): Promise<StartMade>;
  /** An earlier process of the run started an attempt of the task: it is picked up, not skipped. */
  startedBefore: boolean;
  /** Why what an earlier process made can no longer be used (its worktree vanished); null: it can. */
  lost: string | null;
}

/**
 * The opening both executors share: the task's session named, its start made (a conflict
 * between its dependencies or a failure to make it fails the task), a task the run's stop
 * reached meanwhile skipped, its artifacts folder emptied for a fresh start. Answers "go" when
 * the attempts may begin, else how the task ended.
 */
export async function openTask(
  run: Pick<RunPlan, "runId" | "fault" | "settings">,
  ports: Pick<Ports, "ledger" | "now">,
  stop: RunStop,
  recorder: TaskRecorder,
  p: TaskPlan,
  start: TaskStart,
): Promise<"go" | TaskEnd> {
  const t = recorder.get(p.id);
  recorder.note(p.id, {
    startedAt: t.startedAt ?? ports.now(),
    current: { session: sessionName(run.runId, p.id) },
  });
  if (stop.detaching) return DETACHED;
  if (start.lost !== null) return failTask(run, recorder, p.id, "lost", start.lost);
  // The scheduler never starts an attempt the budget cannot pay for (a task already under way
  // goes on: the policy stops it between attempts).
  const broke = start.startedBefore ? null : outOfBudget(run, recorder, p);
  if (broke !== null) {
    recorder.note(p.id, { current: { session: null } });
    return failTask(run, recorder, p.id, "budget", `${broke}; it did not start`);
  }
  if (start.needed) {
    const made = await start.make();
    if (!made.ok) {
      // The branch a failed start leaves (its prepared worktree's, or one it created) is reported.
      recorder.note(p.id, { current: { session: null }, git: { branch: made.branch } });
      if ("conflict" in made) {
        recorder.foundConflict(made.conflict);
        return failTask(
          run,
          recorder,
          p.id,
          "conflict",
          `its dependencies conflict: ${made.conflict.detail}`,
        );
      }
      return failTask(run, recorder, p.id, "launch_error", made.detail);
    }
    recorder.note(p.id, { git: { branch: made.branch, startCommit: made.startCommit } });
    await ports.ledger.record(made.event, p.id);
    recorder.checkpoint(p.id);
  }
  // Another task's failure may have stopped the run (--fail-fast, cancel) while this one was
  // being prepared: a task that never launched is skipped, not failed.
  if (stop.ending && !start.startedBefore) {
    await recorder.transition(p.id, {
      to: "skipped",
      reason: "cancelled",
      detail: "the run stopped before it started",
    });
    return { kind: "done", ok: false };
  }
  if (!start.startedBefore) {
    // A re-run in the same folder starts from an empty artifacts folder.
    const { artifactsDir } = p.workspace;
    if (existsSync(artifactsDir)) rmSync(artifactsDir, { recursive: true, force: true });
    mkdirSync(artifactsDir, { recursive: true });
  }
  return "go";
}

/** A task that ran (or tried to) and failed: its reason and detail. */
export async function failTask(
  run: Pick<RunPlan, "fault">,
  recorder: TaskRecorder,
  taskId: string,
  reason: Reason,
  detail: string | null,
  needsHuman = false,
): Promise<TaskEnd> {
  await recorder.transition(taskId, { to: "failed", reason, detail, needsHuman });
  await killPoint(run.fault, "kill-after-status", taskId);
  return { kind: "done", ok: false };
}
