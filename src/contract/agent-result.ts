import { z } from "zod";

/** What a coding-agent CLI said about its own work, from its JSON output (agent/results.ts). */
export const AgentResult = z
  .strictObject({
    summary: z
      .string()
      .nullable()
      .describe(
        "The agent's final answer or message, redacted and capped at 4,000 characters; null when it gave none",
      ),
    session_id: z
      .string()
      .nullable()
      .describe(
        "The CLI's own session or thread id (to resume or inspect it with the CLI), when it reports one",
      ),
    is_error: z
      .boolean()
      .describe(
        "The CLI reported an error in its output; with exit code 0 the task fails with reason agent_error",
      ),
  })
  .describe(
    "The agent's own result, parsed from the last result its CLI printed (presets with JSON output); null for agents whose output termorch does not parse",
  );
export type AgentResult = z.infer<typeof AgentResult>;

const Tokens = z.number().int().min(0).nullable();
const CostSource = z.enum(["cli", "prices", "mixed"]);
type CostSource = z.infer<typeof CostSource>;

/** Tokens and cost, whichever the CLI reports (null otherwise). */
export const Usage = z
  .strictObject({
    input_tokens: Tokens.describe(
      "Every input token the model read, cached ones included (cache_read_tokens and cache_write_tokens are parts of it), whichever way the CLI counts them",
    ),
    output_tokens: Tokens,
    cache_read_tokens: Tokens,
    cache_write_tokens: Tokens,
    cost_usd: z.number().min(0).nullable(),
    cost_source: CostSource.optional().describe(
      "How cost_usd was known: `cli`, reported by the agent's CLI; `prices`, computed from its tokens with the config's `prices`; `mixed`, a sum of both kinds. Absent when cost_usd is null",
    ),
  })
  .describe(
    "Tokens and cost of the agent's work (a task's: all its attempts added up); a field the CLI does not report is null, and cost_usd is computed from the config's `prices` when the CLI reports tokens but no cost. null when the CLI reported none",
  );
export type Usage = z.infer<typeof Usage>;

const add = (a: number | null, b: number | null): number | null =>
  a === null && b === null ? null : (a ?? 0) + (b ?? 0);

const sourceOf = (u: Usage): CostSource | undefined => (u.cost_usd === null ? undefined : u.cost_source);

const addSource = (a: CostSource | undefined, b: CostSource | undefined): CostSource | undefined =>
  a === undefined ? b : b === undefined || a === b ? a : "mixed";

/** USD to the micro-dollar (sums of floats drift below it). */
export const roundCost = (usd: number): number => Math.round(usd * 1e6) / 1e6;

/** The sum of usages (null when there is none); a field stays null only when no usage had it. */
export function addUsage(usages: readonly (Usage | null)[]): Usage | null {
  let total: Usage | null = null;
  for (const u of usages) if (u !== null) total = total === null ? { ...u } : plus(total, u);
  if (total?.cost_usd != null) total.cost_usd = roundCost(total.cost_usd);
  return total;
}

function plus(a: Usage, b: Usage): Usage {
  const source = addSource(sourceOf(a), sourceOf(b));
  return {
    input_tokens: add(a.input_tokens, b.input_tokens),
    output_tokens: add(a.output_tokens, b.output_tokens),
    cache_read_tokens: add(a.cache_read_tokens, b.cache_read_tokens),
    cache_write_tokens: add(a.cache_write_tokens, b.cache_write_tokens),
    cost_usd: add(a.cost_usd, b.cost_usd),
    ...(source ? { cost_source: source } : {}),
  };
}
