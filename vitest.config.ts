import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    // The real agent CLIs have a command of their own (npm run test:agents): they take 1.1 GB.
    exclude: ["**/node_modules/**", "test/agents-real/**"],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // Two cores: integration files each drive their own tmux server and git repos.
    maxWorkers: 2,
    minWorkers: 1,
  },
});
