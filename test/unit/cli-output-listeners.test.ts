import { Writable } from "node:stream";
import { describe, expect, it } from "vitest";
import { main } from "../../src/cli/main.js";

const sink = (): Writable =>
  new Writable({
    write(_chunk, _encoding, done) {
      done();
    },
  });

describe("main() called again and again in one process", () => {
  it("adds one error listener to its stdout and stderr, not one per call", async () => {
    const stdout = sink();
    const stderr = sink();
    const before = [stdout.listenerCount("error"), stderr.listenerCount("error")];
    for (let i = 0; i < 20; i++) {
      const code = await main(["node", "termorch", "--version"], {
        stdout,
        stderr,
        env: {},
        cwd: process.cwd(),
      });
      expect(code).toBe(0);
    }
    expect(stdout.listenerCount("error")).toBe(before[0]! + 1);
    expect(stderr.listenerCount("error")).toBe(before[1]! + 1);
  });
});
