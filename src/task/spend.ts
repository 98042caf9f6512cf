import { budgetSpent, type Spent, spentOf, usdLeft } from "../spend/budget.js";
import type { TaskRecorder } from "./recorder.js";
import type { RunPlan } from "./run-plan.js";
import type { TaskPlan } from "./task-plan.js";

// A task's budgets, the run's and its own, against what has been spent so far (counted as
// attempts end): whether another attempt may start, and what it may spend.

/** What the whole run (every task) and this task have spent. */
function spends(recorder: TaskRecorder, p: TaskPlan): { run: Spent; task: Spent } {
  return {
    run: spentOf(recorder.all().map((t) => t.result.usage)),
    task: spentOf([recorder.get(p.id).result.usage]),
  };
}

/** Why no new attempt of the task may start for lack of budget (the run's, then its own); null: one may. */
export function outOfBudget(
  run: Pick<RunPlan, "settings">,
  recorder: TaskRecorder,
  p: TaskPlan,
): string | null {
  const spent = spends(recorder, p);
  return (
    budgetSpent(run.settings.budget ?? undefined, spent.run, "the run's") ??
    budgetSpent(p.budget, spent.task, "the task's")
  );
}

/** The USD an attempt of the task may spend: the least its budgets leave; null without a USD budget. */
export function usdLeftFor(
  run: Pick<RunPlan, "settings">,
  recorder: TaskRecorder,
  p: TaskPlan,
): number | null {
  const spent = spends(recorder, p);
  const left = [usdLeft(run.settings.budget ?? undefined, spent.run), usdLeft(p.budget, spent.task)].filter(
    (n): n is number => n !== null,
  );
  return left.length === 0 ? null : Math.min(...left);
}
