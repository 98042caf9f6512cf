import { defineConfig } from "vitest/config";

// The smoke of every benchmark (`npx vitest run --config test/bench/vitest.config.ts`, after
// `npm run build`; CI runs it in .ci/run). Its file is named *.smoke.ts, not *.test.ts, so that
// `npm test` leaves it out: the benchmarks load the machine, and beside the other suites (four
// files at once) they would make their timing-bound tests flaky.
export default defineConfig({
  test: {
    root: new URL("../..", import.meta.url).pathname,
    include: ["test/bench/*.smoke.ts"],
    exclude: ["**/node_modules/**"],
    testTimeout: 300_000,
    hookTimeout: 60_000,
    maxWorkers: 1,
    minWorkers: 1,
  },
});
