import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // Two cores: integration files each drive their own tmux server and git repos.
    maxWorkers: 2,
    minWorkers: 1,
  },
});
