import { z } from "zod";

/** A run's budget against what its agents have spent (the report's summary.budget, status, MCP wait). */
export const BudgetStanding = z
  .strictObject({
    max_cost_usd: z.number().nullable().describe("resource_limits.max_cost_usd; null: none"),
    max_tokens: z.number().int().nullable().describe("resource_limits.max_tokens; null: none"),
    spent_usd: z.number().describe("USD the run's agents spent, as reported or computed from prices"),
    spent_tokens: z.number().int().describe("Input and output tokens the run's agents used"),
    warning: z
      .boolean()
      .describe("At least 80 % of a limit is spent (ledger and notify event `run.budget_warning`)"),
    exhausted: z
      .boolean()
      .describe("The run's budget is reached: no attempt starts after it (its tasks: reason `budget`)"),
  })
  .describe(
    "The run's budget and its spend so far: each ended attempt's, and what running attempts have streamed",
  );
export type BudgetStanding = z.infer<typeof BudgetStanding>;
