import { defineConfig } from "vitest/config";

// The real agent CLIs against the scripted model server (npm run test:agents).
export default defineConfig({
  test: {
    root: new URL("../..", import.meta.url).pathname,
    include: ["test/agents-real/**/*.test.ts"],
    exclude: ["**/node_modules/**"],
    testTimeout: 180_000,
    hookTimeout: 120_000,
    maxWorkers: 2,
    minWorkers: 1,
  },
});
