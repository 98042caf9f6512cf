import { defineConfig } from "vitest/config";

// The smoke versions of the reliability campaigns (npm run test:campaigns); their long versions
// are npm run reliability.
export default defineConfig({
  test: {
    root: new URL("../..", import.meta.url).pathname,
    include: ["test/reliability/**/*.smoke.test.ts"],
    exclude: ["**/node_modules/**"],
    testTimeout: 420_000,
    hookTimeout: 60_000,
    maxWorkers: 2,
    minWorkers: 1,
  },
});
