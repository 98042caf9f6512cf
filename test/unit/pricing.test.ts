import { describe, expect, it } from "vitest";
import { addUsage, type Usage } from "../../src/contract/agent-result.js";
import { priceOf, withCost } from "../../src/spend/pricing.js";

const tokens = (over: Partial<Usage> = {}): Usage => ({
  input_tokens: 1000,
  output_tokens: 50,
  cache_read_tokens: 400,
  cache_write_tokens: 100,
  cost_usd: null,
  ...over,
});
const price = { input: 3, output: 15, cache_read: 0.3, cache_write: 3.75 };

describe("an attempt's cost from the config's prices", () => {
  it("prices fresh, cache-read, cache-written and output tokens apart (input_tokens counts the cached ones)", () => {
    // 500 fresh × 3 + 400 read × 0.3 + 100 written × 3.75 + 50 out × 15 = 2,745 per million
    expect(withCost(tokens(), price)).toEqual({ ...tokens(), cost_usd: 0.002745, cost_source: "prices" });
  });

  it("prices cached tokens as input when the price names no cache rates", () => {
    expect(withCost(tokens(), { input: 2, output: 10 })?.cost_usd).toBe((1000 * 2 + 50 * 10) / 1e6);
  });

  it("keeps a cost its CLI reported, and says so", () => {
    expect(withCost(tokens({ cost_usd: 0.5 }), price)).toEqual({
      ...tokens({ cost_usd: 0.5 }),
      cost_source: "cli",
    });
  });

  it("leaves the cost unknown without a price or without tokens", () => {
    expect(withCost(tokens(), null)).toEqual(tokens());
    const none = tokens({
      input_tokens: null,
      output_tokens: null,
      cache_read_tokens: null,
      cache_write_tokens: null,
    });
    expect(withCost(none, price)).toEqual(none);
    expect(withCost(null, price)).toBeNull();
  });

  it("finds an agent's price by its name first, then by its model", () => {
    const prices = { gemini: { input: 1, output: 2 }, "gpt-5": { input: 3, output: 4 } };
    expect(priceOf(prices, { name: "gemini", model: "gpt-5" })).toEqual({ input: 1, output: 2 });
    expect(priceOf(prices, { name: "fast", model: "gpt-5" })).toEqual({ input: 3, output: 4 });
    expect(priceOf(prices, { name: "fast", model: null })).toBeNull();
  });

  it("says a task's cost is mixed when its attempts' costs were known both ways", () => {
    const cli = withCost(tokens({ cost_usd: 0.1 }), null);
    const priced = withCost(tokens(), price);
    expect(addUsage([cli, priced])).toMatchObject({ cost_usd: 0.102745, cost_source: "mixed" });
    expect(addUsage([priced, priced])).toMatchObject({ cost_usd: 0.00549, cost_source: "prices" });
    expect(addUsage([priced, withCost(tokens(), null)])).toMatchObject({
      cost_usd: 0.002745,
      cost_source: "prices",
      input_tokens: 2000,
    });
  });
});
