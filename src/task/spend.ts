import type { Budget } from "../contract/assignments.js";
import type { Spent } from "../spend/budget.js";
import { budgetSpent, limits, spendOf, spentOf, usdLeft } from "../spend/budget.js";
import type { TaskRecorder } from "./recorder.js";
import type { RunPlan } from "./run-plan.js";
import type { TaskPlan } from "./task-plan.js";

// A task's budgets, the run's and its own, against what has been spent so far (each ended
// attempt's account, and what the running ones have streamed): whether an attempt may start or
// go on, and what it may spend.

interface Standing {
  budget: Budget;
  spent: Spent;
  whose: string;
}

/** The budgets that set a limit, the run's first, each with what it has paid for; the task's with `p`. */
function standings(run: Pick<RunPlan, "settings">, recorder: TaskRecorder, p: TaskPlan | null): Standing[] {
  const found: Standing[] = [];
  const runs = run.settings.budget;
  if (limits(runs))
    found.push({
      budget: runs,
      spent: spentOf(recorder.all().flatMap(spendOf)),
      whose: "the run's",
    });
  if (p && limits(p.budget))
    found.push({ budget: p.budget, spent: spentOf(spendOf(recorder.get(p.id))), whose: "the task's" });
  return found;
}

/** Why no new attempt of the task may start for lack of budget (the run's, then its own); null: one may. */
export function outOfBudget(
  run: Pick<RunPlan, "settings">,
  recorder: TaskRecorder,
  /** null: the run's budget alone (work of the run's own, its integration's review). */
  p: TaskPlan | null,
): string | null {
  for (const s of standings(run, recorder, p)) {
    const why = budgetSpent(s.budget, s.spent, s.whose);
    if (why !== null) return why;
  }
  return null;
}

/** The USD an attempt of the task may spend: the least its budgets leave; null without a USD budget. */
export function usdLeftFor(
  run: Pick<RunPlan, "settings">,
  recorder: TaskRecorder,
  p: TaskPlan | null,
): number | null {
  const left = standings(run, recorder, p).flatMap((s) => usdLeft(s.budget, s.spent) ?? []);
  return left.length === 0 ? null : Math.min(...left);
}
