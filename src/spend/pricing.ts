import type { OutputFormat } from "../agent/results.js";
import { roundCost, type Usage } from "../contract/agent-result.js";
import type { Price } from "../contract/config.js";

/**
 * The headless outputs that carry a cost (docs/agents.md): Claude Code's `total_cost_usd`,
 * opencode's and kilo's per-step `cost`, pi's `cost.total`. The others report tokens only, and
 * interactive transcripts are not counted on: their cost comes from `prices`.
 */
const COST_REPORTED: ReadonlySet<OutputFormat> = new Set(["claude-json", "opencode-jsonl", "pi-jsonl"]);

/** Whether an agent's cost will be known: its CLI reports it, or the config prices its tokens. */
export function costKnown(
  agent: { output: OutputFormat | null; interactive: boolean },
  price: Price | null,
): boolean {
  return price !== null || (!agent.interactive && agent.output !== null && COST_REPORTED.has(agent.output));
}

/** An agent's price in the config's `prices`: by its own name first, then by its model; null: none. */
export function priceOf(
  prices: Readonly<Record<string, Price>>,
  agent: { name: string; model: string | null },
): Price | null {
  return prices[agent.name] ?? (agent.model === null ? undefined : prices[agent.model]) ?? null;
}

/**
 * An attempt's usage with its cost and where the cost came from: its CLI's own figure, else
 * one computed from its tokens with the agent's price. Without tokens or a price it stays
 * without a cost: a guess would make a budget in USD mean nothing.
 */
export function withCost(usage: Usage | null, price: Price | null): Usage | null {
  if (usage === null) return null;
  if (usage.cost_usd !== null) return { ...usage, cost_source: usage.cost_source ?? "cli" };
  if (price === null || (usage.input_tokens === null && usage.output_tokens === null)) return usage;
  // input_tokens counts the cached ones too (the Usage schema): they are priced apart.
  const read = usage.cache_read_tokens ?? 0;
  const written = usage.cache_write_tokens ?? 0;
  const fresh = Math.max(0, (usage.input_tokens ?? 0) - read - written);
  const perMillion =
    fresh * price.input +
    read * (price.cache_read ?? price.input) +
    written * (price.cache_write ?? price.input) +
    (usage.output_tokens ?? 0) * price.output;
  return { ...usage, cost_usd: roundCost(perMillion / 1e6), cost_source: "prices" };
}
