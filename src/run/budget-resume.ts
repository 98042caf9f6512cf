import { createHash } from "node:crypto";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Assignments, Budget } from "../contract/assignments.js";
import type { RunState } from "../contract/state.js";
import { canonicalJson } from "../ledger/canonical.js";
import { budgetSpent, limits, spendOf, spentOf } from "../spend/budget.js";
import type { TaskRun } from "../task/task-run.js";

// A run that stopped at its budget goes on when the budget is raised: by `resume`'s flags, or in
// the assignments file (the one change a resume takes from it). Nothing that finished runs again:
// only the tasks the budget ended, and those skipped for them, are opened again.

/** A budget raised at resume, by flag; each absent key keeps what the file or the run says. */
export interface BudgetFlags {
  max_cost_usd?: number;
  max_tokens?: number;
}

const DIGEST_FILE = "plan.sha256";

/** The assignments as planned but for the run's budget: what a resume must find unchanged. */
export function planDigest(assignments: Assignments): string {
  const {
    max_cost_usd: _c,
    max_tokens: _t,
    on_budget: _o,
    ...limits
  } = assignments.environment.resource_limits;
  const plan = { ...assignments, environment: { ...assignments.environment, resource_limits: limits } };
  return createHash("sha256").update(canonicalJson(plan)).digest("hex");
}

/** Kept in the run's private folder at its start (a digest: the file may name secrets). */
export function keepPlanDigest(privateDir: string, assignments: Assignments): void {
  writeFileSync(join(privateDir, DIGEST_FILE), `${planDigest(assignments)}\n`, { mode: 0o600 });
}

/** Whether the assignments differ from the run's only in its budget (false when the run kept no digest). */
export function onlyBudgetChanged(privateDir: string, assignments: Assignments): boolean {
  try {
    return readFileSync(join(privateDir, DIGEST_FILE), "utf8").trim() === planDigest(assignments);
  } catch {
    return false;
  }
}

/** The run's budget out of resource limits (which carry other keys); null when they set none. */
export function budgetOf({ max_cost_usd, max_tokens }: Budget): Budget | null {
  const budget = {
    ...(max_cost_usd === undefined ? {} : { max_cost_usd }),
    ...(max_tokens === undefined ? {} : { max_tokens }),
  };
  return limits(budget) ? budget : null;
}

/**
 * The budget a resume drives the run with: the flags over the file's (when the file is the one
 * changed) over the run's own. `changed`: it is not the run's.
 */
export function resumedBudget(
  run: Budget | null,
  file: Budget | null,
  flags: BudgetFlags,
): { budget: Budget | null; changed: boolean } {
  const budget = budgetOf({ ...(file ?? run ?? {}), ...flags });
  return { budget, changed: canonicalJson(budget) !== canonicalJson(run) };
}

/** Why a budget given at resume cannot go on (it is spent already); null when it can. */
export function stillSpent(budget: Budget | null, tasks: readonly TaskRun[]): string | null {
  const spent = budgetSpent(budget ?? undefined, spentOf(tasks.flatMap(spendOf)), "the run's new");
  return spent === null ? null : `${spent}; give it more than that`;
}

/**
 * The tasks a raised budget opens again: those a budget ended that `canGoOn` (their own budget
 * not spent), and those skipped for a failed dependency (skipped again if it stays failed).
 */
export function reopened(tasks: readonly TaskRun[], canGoOn: (t: TaskRun) => boolean): string[] {
  return tasks
    .filter(
      (t) =>
        (t.state === "failed" && t.reason === "budget" && canGoOn(t)) ||
        (t.state === "skipped" && t.reason === "dependency_failed"),
    )
    .map((t) => t.id);
}

/**
 * A task opened again: pending, its end forgotten (its attempts and their spend kept). One the
 * budget ended while it ran goes on with a new attempt in its worktree as the budget left it
 * (TaskRun.next, as a resume carries out a retry); a dependency still failed skips it again.
 */
export function reopen(t: TaskRun): TaskRun {
  const open: TaskRun = {
    ...t,
    state: "pending",
    reason: null,
    detail: null,
    finishedAt: null,
    needsHuman: false,
  };
  const started = t.state === "failed" && (t.git.startCommit !== null || t.current.dir !== null);
  if (!started) return open;
  return {
    ...open,
    next: {
      agentIndex: t.current.agentIndex,
      from: "last_work",
      escalated: false,
      feedback: null,
      notBefore: null,
      fallbackFor: null,
    },
  };
}

/** Whether a reported run can go on: its budget ended some of its tasks, and it is now raised. */
export function resumableAtBudget(state: Pick<RunState, "tasks">, changed: boolean): boolean {
  return changed && state.tasks.some((t) => t.state === "failed" && t.reason === "budget");
}
