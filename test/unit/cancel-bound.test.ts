import { afterEach, describe, expect, it, vi } from "vitest";
import { boundStoppedWait } from "../../src/scale/cancel-bound.js";
import { RunStop } from "../../src/task/stop.js";

// The bounds of a remote task's wait once its run stops (the coordinator's side of a cancel).
// Through the CLI, coordinator.test keeps the case of a Redis gone; the case of a worker gone
// (the cancel reaches Redis, nobody answers) takes 35 s of a real run, so it is asserted here.

afterEach(() => {
  vi.useRealTimers();
});

function follow(cancel: () => Promise<void>) {
  const stop = new RunStop();
  const left: (string | null)[] = [];
  const cancels = vi.fn(cancel);
  const release = boundStoppedWait({
    stop,
    killGraceMs: 5000,
    cancel: cancels,
    onCancelError: () => {},
    leave: (why) => left.push(why),
  });
  return { stop, left, cancels, release };
}

describe("a remote task's wait once its run stops", () => {
  it("is left once the kill grace and 30 s have passed when the cancel reached Redis but no worker answered", async () => {
    vi.useFakeTimers();
    const f = follow(async () => {});
    await vi.advanceTimersByTimeAsync(60_000);
    expect(f.left).toEqual([]);
    f.stop.request("cancel");
    f.stop.request("fail-fast");
    expect(f.cancels).toHaveBeenCalledTimes(1);
    await vi.advanceTimersByTimeAsync(34_999);
    expect(f.left).toEqual([]);
    await vi.advanceTimersByTimeAsync(1);
    expect(f.left).toEqual(["not within 35 s"]);
    f.release();
  });

  it("is left once the kill grace and 5 s have passed when the cancel never reached Redis", async () => {
    vi.useFakeTimers();
    const f = follow(() => new Promise(() => {}));
    f.stop.request("fail-fast");
    await vi.advanceTimersByTimeAsync(9999);
    expect(f.left).toEqual([]);
    await vi.advanceTimersByTimeAsync(1);
    expect(f.left).toEqual(["the cancel did not reach Redis within 10 s"]);
    f.release();
  });

  it("is left at once on a detach, with no cancel sent, and holds no timer once released", async () => {
    vi.useFakeTimers();
    const f = follow(async () => {});
    f.stop.request("detach");
    expect(f.left).toEqual([null]);
    expect(f.cancels).not.toHaveBeenCalled();
    const g = follow(async () => {});
    g.stop.request("cancel");
    g.release();
    expect(vi.getTimerCount()).toBe(0);
    await vi.advanceTimersByTimeAsync(60_000);
    expect(g.left).toEqual([]);
  });
});
