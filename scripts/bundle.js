// Bundles the CLI into one module (dist/cli/bundle.js), which bin/termorch.js loads.
//
// Why: loading ~300 separate ES modules (ours, zod, execa, pino, commander...) cost ~0.2 s of
// CPU at every start, paid by every `termorch` command and by every cron run; one bundle
// starts in about half that (BENCHMARKS.md). The compiled modules in dist/ stay as they are
// for library use. It lives next to dist/cli/main.js so that paths taken relative to the
// module (package.json, tmux/supervisor.pl) resolve the same from both.
import { build } from "esbuild";

await build({
  entryPoints: ["dist/cli/main.js"],
  outfile: "dist/cli/bundle.js",
  bundle: true,
  platform: "node",
  format: "esm",
  target: "node20",
  logLevel: "warning",
  // Loaded on demand only by the scale-out backend (src/scale/: bullmq, ioredis), `termorch watch`
  // (ink, react) and `termorch mcp` (the MCP SDK): other commands never pay for them. node-pty
  // (serve's terminals) finds its native addon relative to its own files: loaded from node_modules.
  external: ["bullmq", "ioredis", "ink", "react", "node-pty", "@modelcontextprotocol/sdk"],
  // CommonJS dependencies call require(); an ES module bundle has none of its own.
  banner: {
    js: "import { createRequire as __termorchRequire } from 'node:module'; const require = __termorchRequire(import.meta.url);",
  },
});
