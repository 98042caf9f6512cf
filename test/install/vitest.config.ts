import { defineConfig } from "vitest/config";

// The CLI installed from its packed tarball (`npm run test:install`, after `npm run build`; CI runs
// it in .ci/run after `npm test`): the install builds node-pty from source, about 15 s of CPU that
// every `npm test` paid.
export default defineConfig({
  test: {
    root: new URL("../..", import.meta.url).pathname,
    include: ["test/install/*.test.ts"],
    exclude: ["**/node_modules/**"],
    testTimeout: 300_000,
    hookTimeout: 60_000,
    maxWorkers: 1,
    minWorkers: 1,
  },
});
