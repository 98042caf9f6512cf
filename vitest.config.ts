import { defineConfig } from "vitest/config";

// Node reads and parses the certificates NODE_EXTRA_CA_CERTS names at every start, before any
// code runs: 0.03 CPU-s a process with a system bundle (measured), and the suite starts some
// 1,000 node processes (the CLI, agents, workers). Its traffic is all loopback, without TLS.
delete process.env.NODE_EXTRA_CA_CERTS;

// The real agent CLIs have a command of their own (npm run test:agents): they take 1.1 GB. So
// do the smoke versions of the reliability campaigns (npm run test:campaigns): each is a whole
// campaign (a daemon under a burst, crash trials, hostile agents), a quarter of the suite's CPU.
// And the install from a packed tarball (npm run test:install): it builds node-pty from source.
const elsewhere = ["**/node_modules/**", "test/agents-real/**", "test/reliability/**", "test/install/**"];
// In-process tests (pure logic, and the middle tier's fake runner and timers) share their
// workers' module cache: importing src/ and zod afresh for each file cost them three quarters of
// their CPU. Files that start processes, tmux servers and repositories stay isolated.
const inProcess = ["test/unit/**/*.test.ts", "test/middle/**/*.test.ts"];

export default defineConfig({
  test: {
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // Two cores, four files at once: integration files each drive their own tmux server, git repos
    // and processes, and spend much of their time waiting on them (2 files: 1.2 cores busy on
    // average; 4: 1.8, and 3 min 34 s instead of 5 min). As many workers kept as started: vitest
    // 3.2 rejects with "Terminating worker thread" when it ends one of a non-isolated project's.
    maxWorkers: 4,
    minWorkers: 4,
    // Read from here, not from a project (vitest 3.2 makes one pool of each kind for the run).
    poolOptions: { threads: { isolate: false } },
    projects: [
      { extends: true, test: { name: "in-process", include: inProcess, exclude: elsewhere, pool: "threads" } },
      {
        extends: true,
        test: {
          name: "processes",
          include: ["test/**/*.test.ts"],
          exclude: [...elsewhere, ...inProcess],
        },
      },
    ],
  },
});
