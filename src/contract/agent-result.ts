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
  })
  .describe(
    "Tokens and cost the agent's CLI reported for the task (all attempts added up); a field the CLI does not report is null. null when the CLI reported none",
  );
export type Usage = z.infer<typeof Usage>;

const add = (a: number | null, b: number | null): number | null =>
  a === null && b === null ? null : (a ?? 0) + (b ?? 0);

/** The sum of usages (null when there is none); a field stays null only when no usage had it. */
export function addUsage(usages: readonly (Usage | null)[]): Usage | null {
  let total: Usage | null = null;
  for (const u of usages) {
    if (u === null) continue;
    total =
      total === null
        ? { ...u }
        : {
            input_tokens: add(total.input_tokens, u.input_tokens),
            output_tokens: add(total.output_tokens, u.output_tokens),
            cache_read_tokens: add(total.cache_read_tokens, u.cache_read_tokens),
            cache_write_tokens: add(total.cache_write_tokens, u.cache_write_tokens),
            cost_usd: add(total.cost_usd, u.cost_usd),
          };
  }
  if (total?.cost_usd != null) total.cost_usd = Math.round(total.cost_usd * 1e6) / 1e6;
  return total;
}
