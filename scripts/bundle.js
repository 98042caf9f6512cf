// Bundles the CLI into one script (dist/cli/bundle.cjs) and its V8 code cache
// (dist/cli/bundle.cache), which bin/load-cli.cjs loads for bin/termorch.js.
//
// Why: loading ~300 separate ES modules (ours, zod, execa, pino, commander...) cost ~0.2 s of
// CPU at every start, paid by every `termorch` command and by every cron run; one bundle
// starts in about half that (BENCHMARKS.md). Of what is left, compiling the bundle's 2.6 MB is
// the largest part: Node 20 keeps no compile cache for ES modules, so the bundle is a CommonJS
// script run through vm.Script with a code cache made here, at build time (never at run time;
// a cache another V8 made is rejected and the script compiled as before).
//
// It lives next to dist/cli/main.js so that paths taken relative to the module (package.json,
// tmux/supervisor.pl) resolve the same from both. Tools that call the CLI's main in-process
// (test/reliability/input-worker.mjs) load it through bin/load-cli.cjs too.
import { readFileSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { build } from "esbuild";

/**
 * Loaded on demand only by the scale-out backend (src/scale/: bullmq, ioredis), `termorch watch`
 * (ink, react) and `termorch mcp` (the MCP SDK): other commands never pay for them. node-pty
 * (serve's terminals) finds its native addon relative to its own files: loaded from node_modules.
 */
const external = ["bullmq", "ioredis", "ink", "react", "node-pty", "@modelcontextprotocol/sdk"];
const CJS = "dist/cli/bundle.cjs";
await build({
  entryPoints: ["dist/cli/main.js"],
  bundle: true,
  platform: "node",
  target: "node20",
  logLevel: "warning",
  external,
  outfile: CJS,
  format: "cjs",
  define: { "import.meta.url": "__termorchUrl" },
  banner: { js: 'const __termorchUrl = require("node:url").pathToFileURL(__filename).href;' },
});
// A script run through vm has no loader for import(): the externals are imported by the
// loader's own function (bin/load-cli.cjs), and no other import() may be left.
const externalImport = new RegExp(
  `\\bimport\\(("(?:${external.map((e) => e.replace(/[/.@-]/g, "\\$&")).join("|")})(?:/[^"]*)?")\\)`,
  "g",
);
const script = readFileSync(CJS, "utf8").replace(externalImport, "__termorchImport($1)");
const left = /\bimport\(\s*["'`]/.exec(script);
if (left)
  throw new Error(
    `${CJS}: an import() the loader cannot serve: ${script.slice(left.index, left.index + 80)}`,
  );
writeFileSync(CJS, script);

// The code cache of the script as it stands once its top level has run: what every command compiles.
const { compile } = createRequire(import.meta.url)("../bin/load-cli.cjs");
const compiled = compile(null);
compiled.run();
writeFileSync("dist/cli/bundle.cache", compiled.script.createCachedData());
