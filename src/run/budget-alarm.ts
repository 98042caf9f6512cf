import type { BudgetStanding } from "../contract/budget.js";
import { errorText } from "../errors.js";
import { budgetStanding, spendOf } from "../spend/budget.js";
import type { Ports } from "../task/ports.js";
import type { TaskRecorder } from "../task/recorder.js";
import type { RunPlan } from "../task/run-plan.js";

/**
 * Tells the ledger and the notify command once when the run's spend reaches 80 % of its budget,
 * and once when it reaches all of it (what the views show is the standing itself). A mark the
 * run had passed before a resume is not told again. Returns the unsubscribe.
 */
export function watchRunBudget(
  run: Pick<RunPlan, "settings">,
  recorder: TaskRecorder,
  ports: Pick<Ports, "ledger" | "notifier" | "log">,
): () => void {
  const budget = run.settings.budget;
  if (budget === null) return () => {};
  const standing = (): BudgetStanding | null => budgetStanding(budget, recorder.all().flatMap(spendOf));
  const told = { warning: standing()?.warning ?? false, exhausted: standing()?.exhausted ?? false };
  return recorder.onSpend(() => {
    const now = standing();
    if (now === null) return;
    for (const mark of ["warning", "exhausted"] as const) {
      if (!now[mark] || told[mark]) continue;
      told[mark] = true;
      ports.ledger
        .append(`run.budget_${mark}`, { ...now })
        .catch((error: unknown) =>
          ports.log.warn({ err: errorText(error) }, "could not record the budget's mark"),
        );
      ports.notifier.budgetReached(mark, now);
    }
  });
}
