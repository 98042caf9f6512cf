import { describe, expect, it } from "vitest";
import { budgetSpent, cappedArgv, usdLeft } from "../../src/spend/budget.js";

describe("a budget against the spend", () => {
  it("is spent at its USD or its token limit, whichever comes first, and says which", () => {
    expect(budgetSpent({ max_cost_usd: 2 }, { usd: 1.99, tokens: 9e9 }, "the run's")).toBeNull();
    expect(budgetSpent({ max_cost_usd: 2 }, { usd: 2, tokens: 0 }, "the run's")).toBe(
      "the run's budget of $2.00 is spent: $2.00",
    );
    expect(budgetSpent({ max_tokens: 1000 }, { usd: 5, tokens: 1200 }, "the task's")).toBe(
      "the task's budget of 1,000 tokens is spent: 1,200",
    );
    expect(budgetSpent(undefined, { usd: 5, tokens: 5 }, "the run's")).toBeNull();
  });

  it("leaves USD for the next attempt, or none", () => {
    expect(usdLeft({ max_cost_usd: 1 }, { usd: 0.25, tokens: 0 })).toBe(0.75);
    expect(usdLeft({ max_tokens: 10 }, { usd: 0.25, tokens: 0 })).toBeNull();
  });

  it("gives a CLI's own cap what is left, rounded down to a hundredth of a cent, where its preset puts the flag", () => {
    const argv = ["claude", "-p", "--output-format", "json", "--permission-mode", "acceptEdits"];
    const cap = { flag: "--max-budget-usd", at: 4 };
    expect(cappedArgv(argv, cap, 0.123456)).toEqual([
      ...argv.slice(0, 4),
      "--max-budget-usd",
      "0.1234",
      ...argv.slice(4),
    ]);
    expect(cappedArgv(argv, cap, 0.00001)).toContain("0.0001");
    expect(cappedArgv(argv, cap, null)).toEqual(argv);
    expect(cappedArgv(argv, cap, 0)).toEqual(argv);
    expect(cappedArgv(argv, null, 1)).toEqual(argv);
  });
});
