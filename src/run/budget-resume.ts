import { createHash } from "node:crypto";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Assignments, Budget, OnBudget } from "../contract/assignments.js";
import type { RunState } from "../contract/state.js";
import { InputError } from "../errors.js";
import type { RunInput } from "../input/assignments-file.js";
import { canonicalJson } from "../ledger/canonical.js";
import { budgetOf, budgetSpent, spendOf, spentOf } from "../spend/budget.js";
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

/** The budget a resume drives the run with, and the check of each state it reads. */
export interface BudgetAtResume {
  budget: Budget | null;
  /** The file's `on_budget` when the file is the one changed; undefined: the run's. */
  onBudget: OnBudget | undefined;
  /** Raised: not the run's own. */
  changed: boolean;
  /** Throws why the run cannot go on as asked (finished, a raise for workers, a raise spent already). */
  check(state: RunState): void;
}

/**
 * What a resume takes from the assignments file (a raised budget, its only accepted change) and
 * its flags; throws when the file changed otherwise.
 */
export function budgetAtResume(
  runDir: string,
  first: RunState,
  input: Pick<RunInput, "sha256" | "assignments">,
  flags: BudgetFlags,
): BudgetAtResume {
  const fileChanged = input.sha256 !== first.assignments_sha256;
  if (fileChanged && !onlyBudgetChanged(join(runDir, ".termorch", first.run_id), input.assignments))
    throw new InputError(
      [
        {
          file: first.assignments_file,
          message: `changed since run ${first.run_id} started; a resume finishes the run as it was planned (only its budget, resource_limits.max_cost_usd and max_tokens, may be raised in it)`,
        },
      ],
      "Restore the file as it was, or start a new run with it.",
    );
  const inFile = input.assignments.environment.resource_limits;
  const { budget, changed } = resumedBudget(
    first.options.budget,
    fileChanged ? budgetOf(inFile) : null,
    flags,
  );
  const problem = (st: RunState, message: string, hint: string): InputError =>
    new InputError(
      [
        {
          file: join(runDir, "state.json"),
          message: `run ${st.run_id}${message.startsWith(":") ? "" : " "}${message}`,
        },
      ],
      hint,
    );
  return {
    budget,
    onBudget: fileChanged ? inFile.on_budget : undefined,
    changed,
    check(st) {
      // A run stopped at a boundary goes on (stop-resume.ts checks it first).
      if (st.phase === "reported" && st.stopped === null && !resumableAtBudget(st, changed)) {
        const stopped = st.tasks
          .filter((t) => t.state === "failed" && t.reason === "budget")
          .map((t) => t.id);
        const raise = stopped.length > 0 && !changed;
        throw problem(
          st,
          `already finished (its report is ${st.report ?? "written"})${raise ? `; its budget stopped ${stopped.join(", ")}` : ""}`,
          raise
            ? `Raise its budget to go on: termorch resume ${runDir} --max-cost-usd N (or --max-tokens N, or raise resource_limits in ${st.assignments_file}).`
            : "Nothing to resume.",
        );
      }
      // A reopened task's new job would come back with only its own attempts and spend.
      if (changed && st.options.backend === "bullmq")
        throw problem(
          st,
          "runs on workers (backend bullmq): its budget cannot be raised at resume yet",
          "Resume it as it is, or run its assignments again with the budget you want.",
        );
      const spent = changed ? stillSpent(budget, st.tasks) : null;
      if (spent) throw problem(st, `: ${spent}`, "Resume it with a budget above what it spent.");
    },
  };
}
