import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    // The real agent CLIs have a command of their own (npm run test:agents): they take 1.1 GB. So
    // do the smoke versions of the reliability campaigns (npm run test:campaigns): each is a whole
    // campaign (a daemon under a burst, crash trials, hostile agents), a quarter of the suite's CPU.
    // And the install from a packed tarball (npm run test:install): it builds node-pty from source.
    exclude: ["**/node_modules/**", "test/agents-real/**", "test/reliability/**", "test/install/**"],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // Two cores, four files at once: integration files each drive their own tmux server, git repos
    // and processes, and spend much of their time waiting on them (2 files: 1.2 cores busy on
    // average; 4: 1.8, and 3 min 34 s instead of 5 min).
    maxWorkers: 4,
    minWorkers: 1,
  },
});
