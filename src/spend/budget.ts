import { roundCost, type Usage } from "../contract/agent-result.js";
import type { Budget } from "../contract/assignments.js";
import type { BudgetStanding } from "../contract/budget.js";

/** What agents have spent: USD as known (reported, or computed from prices), and tokens in and out. */
export interface Spent {
  usd: number;
  tokens: number;
}

/** The sum of what the usages say was spent (a figure nobody reported counts as nothing). */
export function spentOf(usages: readonly (Usage | null)[]): Spent {
  let usd = 0;
  let tokens = 0;
  for (const u of usages) {
    if (u === null) continue;
    usd += u.cost_usd ?? 0;
    tokens += (u.input_tokens ?? 0) + (u.output_tokens ?? 0);
  }
  return { usd, tokens };
}

/** A task's spend: its ended attempts' account, and what its running one has streamed so far. */
export function spendOf(t: {
  result: { usage: Usage | null };
  current: { usage: Usage | null };
}): (Usage | null)[] {
  return [t.result.usage, t.current.usage];
}

/**
 * Why a budget allows no new attempt, naming the budget and the spend ("the run's budget of
 * $2.00 is spent: $2.13"); null while it allows one, or when there is no budget.
 */
export function budgetSpent(
  budget: Budget | undefined,
  spent: Spent,
  whose: string,
  /** The share of it that counts (WARN_AT: "80 % of the run's budget … is spent"). */
  share = 1,
): string | null {
  const of = share === 1 ? "" : `${Math.round(share * 100)} % of `;
  // Sums of costs carry float error ($0.01 + $0.03 < $0.04): below a millionth of a cent is equal.
  if (budget?.max_cost_usd !== undefined && spent.usd >= budget.max_cost_usd * share - 1e-8)
    return `${of}${whose} budget of ${usd(budget.max_cost_usd)} is spent: ${usd(spent.usd)}`;
  if (budget?.max_tokens !== undefined && spent.tokens >= budget.max_tokens * share)
    return `${of}${whose} budget of ${count(budget.max_tokens)} tokens is spent: ${count(spent.tokens)}`;
  return null;
}

/** The share of a run's budget at which it warns. */
export const WARN_AT = 0.8;

/** USD a budget leaves after the spend (≤ 0 once spent); null when it sets no USD limit. */
export function usdLeft(budget: Budget | undefined, spent: Spent): number | null {
  return budget?.max_cost_usd === undefined ? null : budget.max_cost_usd - spent.usd;
}

/**
 * An attempt's argv with its CLI's own USD cap (`budgetCap`) set to `left`, the least any budget
 * leaves; as it is without a cap or a USD budget.
 */
export function cappedArgv(
  argv: readonly string[],
  cap: { flag: string; at: number } | null,
  left: number | null,
): readonly string[] {
  if (cap === null || left === null || left <= 0) return argv;
  // The CLI wants a positive amount; a hundredth of a cent is below anything one call costs.
  const amount = Math.max(0.0001, Math.floor(left * 10_000) / 10_000);
  return [...argv.slice(0, cap.at), cap.flag, String(amount), ...argv.slice(cap.at)];
}

/** $0.0250, $12.50: as budgets and spend are said everywhere. */
export const usd = (n: number): string => `$${n.toFixed(n < 1 ? 4 : 2)}`;
/** 1,000 tokens. */
export const count = (n: number): string => n.toLocaleString("en-US");

/**
 * A budget out of what carries its two limits among other keys (resource limits) or unset (a
 * command's flags); null when it sets neither.
 */
export function budgetOf({ max_cost_usd, max_tokens }: Budget): Budget | null {
  const budget = {
    ...(max_cost_usd === undefined ? {} : { max_cost_usd }),
    ...(max_tokens === undefined ? {} : { max_tokens }),
  };
  return limits(budget) ? budget : null;
}

/** Whether it sets a limit at all (resource_limits carries other keys; a budget may be empty). */
export function limits(budget: Budget | null | undefined): budget is Budget {
  return budget?.max_cost_usd !== undefined || budget?.max_tokens !== undefined;
}

/** The budget against the spend (summary.budget, status); null when the budget sets no limit. */
export function budgetStanding(
  budget: Budget | null | undefined,
  usages: readonly (Usage | null)[],
): BudgetStanding | null {
  if (!limits(budget)) return null;
  const spent = spentOf(usages);
  return {
    max_cost_usd: budget.max_cost_usd ?? null,
    max_tokens: budget.max_tokens ?? null,
    spent_usd: roundCost(spent.usd),
    spent_tokens: spent.tokens,
    warning: budgetSpent(budget, spent, "the run's", WARN_AT) !== null,
    exhausted: budgetSpent(budget, spent, "the run's") !== null,
  };
}

/** The largest share of a limit spent (0.8: 80 %). */
export function budgetShare(b: BudgetStanding): number {
  return Math.max(
    b.max_cost_usd === null ? 0 : b.spent_usd / b.max_cost_usd,
    b.max_tokens === null ? 0 : b.spent_tokens / b.max_tokens,
  );
}

/** "$0.0250 of $0.0200, 3,300 tokens of 1,000 (165 %)": a budget's meter in words, as every view says it. */
export function budgetMeter(b: BudgetStanding): string {
  const parts = [
    ...(b.max_cost_usd === null ? [] : [`${usd(b.spent_usd)} of ${usd(b.max_cost_usd)}`]),
    ...(b.max_tokens === null ? [] : [`${count(b.spent_tokens)} tokens of ${count(b.max_tokens)}`]),
  ];
  return `${parts.join(", ")} (${Math.floor(budgetShare(b) * 100)} %)`;
}
