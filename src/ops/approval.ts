import { mkdir } from "node:fs/promises";
import { userInfo } from "node:os";
import { dirname } from "node:path";
import type { ApprovalDecision, ApprovalWait } from "../contract/approval.js";
import type { RunState } from "../contract/state.js";
import { InputError } from "../errors.js";
import { writeJsonAtomic } from "../fs/atomic.js";
import { approvalFileOf, privateDirOf } from "../fs/private-dir.js";
import { INTEGRATION_REVIEW } from "../task/task-plan.js";
import { startedRun } from "./runs.js";

type Env = Readonly<Record<string, string | undefined>>;

/** At most what a decision's file keeps of its reason (ApprovalDecision). */
const REASON_MAX = 16 * 1024;

/** A decision as the operator gives it: who decides (the OS user, "mcp", "serve"), and why. */
export interface Deciding {
  decision: "approve" | "reject";
  reason: string | null;
  by: string;
}

/** Who decides at the command line: the OS user. */
export function osUser(env: Env): string {
  try {
    return userInfo().username;
  } catch {
    return env.USER ?? env.LOGNAME ?? `uid ${process.getuid?.() ?? "?"}`;
  }
}

/**
 * `termorch approve|reject <run> [task]`: answers a task's wait for a person's decision, or (no
 * task) the run's merge's, through a file in the run's private folder that its driver reads (a
 * dead driver's resume takes it). Nothing waiting there: InputError (exit 2), nothing written.
 */
export async function decide(
  runRef: string,
  taskId: string | undefined,
  d: Deciding,
  opts: { env: Env; cwd: string; now: number },
): Promise<{ state: RunState; wait: ApprovalWait; file: string }> {
  if (d.decision === "reject" && !d.reason?.trim())
    throw new InputError(
      [{ message: "a rejection needs its reason: --reason TEXT" }],
      "Say what is wrong: the reason is what the task's next attempt is told.",
    );
  if ((d.reason?.length ?? 0) > REASON_MAX)
    throw new InputError(
      [{ message: `the reason is over ${REASON_MAX} characters` }],
      "Say it shorter: the reason is a note for the next attempt, not a document.",
    );
  const { state } = await startedRun(runRef, opts.env, opts.cwd);
  // A run stopped at its boundary waits on: its resume takes the decision.
  if (state.phase === "reported" && state.stopped === null)
    throw new InputError(
      [
        {
          message: `run ${state.run_id} is finished (exit ${state.exit_code ?? "unknown"}): nothing waits for a decision`,
        },
      ],
      `Its report: ${state.report ?? "none"}`,
    );
  const waiting = state.tasks
    .filter((t) => t.waiting.approval && !t.waiting.approval.approved)
    .map((t) => t.id);
  const others = waiting.length ? `; waiting: ${waiting.join(", ")}` : "; nothing of it waits for a decision";
  let wait: ApprovalWait | null;
  if (taskId === undefined) {
    wait = state.merge?.step === "waiting_approval" ? (state.merge.approval ?? null) : null;
    if (!wait)
      throw new InputError(
        [{ message: `the merge of run ${state.run_id} is not waiting for approval${others}` }],
        waiting.length
          ? `Name the task: termorch ${d.decision} ${state.run_id} ${waiting[0]}`
          : "Nothing to decide now.",
      );
  } else {
    const task = state.tasks.find((t) => t.id === taskId);
    if (!task)
      throw new InputError(
        [
          {
            message: `run ${state.run_id} has no task ${taskId}; its tasks: ${state.tasks.map((t) => t.id).join(", ")}`,
          },
        ],
        "Pass one of its task ids.",
      );
    wait = task.waiting.approval?.approved ? null : task.waiting.approval;
    if (!wait)
      throw new InputError(
        [
          {
            message: `task ${taskId} of run ${state.run_id} is not waiting for approval (it is ${task.state})${others}`,
          },
        ],
        "A task waits for a decision only when its `approval` asks for one, once it got there.",
      );
  }
  const decision: ApprovalDecision = {
    decision: d.decision,
    at: wait.at,
    attempt: wait.attempt,
    since: wait.since,
    reason: d.reason?.trim() || null,
    by: d.by,
    decided_at: new Date(opts.now).toISOString(),
  };
  const file = approvalFileOf(privateDirOf(state.run_dir, state.run_id), taskId ?? INTEGRATION_REVIEW);
  await mkdir(dirname(file), { recursive: true, mode: 0o700 });
  await writeJsonAtomic(file, decision, 0o600);
  return { state, wait, file };
}
