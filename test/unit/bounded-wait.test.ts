import { afterEach, describe, expect, it, vi } from "vitest";
import { boundedWait } from "../../src/concurrency/bounded-wait.js";

afterEach(() => {
  vi.useRealTimers();
});

describe("boundedWait", () => {
  it("answers the work's value and leaves no timer behind, so nothing holds the process", async () => {
    vi.useFakeTimers();
    expect(await boundedWait(Promise.resolve("done"), 15_000)).toBe("done");
    expect(vi.getTimerCount()).toBe(0);
  });

  it("answers undefined once the time is up, and lets the work's failure through when it comes first", async () => {
    vi.useFakeTimers();
    const never = boundedWait(new Promise<string>(() => {}), 2000);
    await vi.advanceTimersByTimeAsync(2000);
    expect(await never).toBeUndefined();
    await expect(boundedWait(Promise.reject(new Error("gone")), 2000)).rejects.toThrow("gone");
    expect(vi.getTimerCount()).toBe(0);
  });
});
