// Loads the CLI's bundle (dist/cli/bundle.cjs, made by scripts/bundle.js) with its V8 code cache,
// so that a command does not compile 2.6 MB of JavaScript at every start. Without the cache, or
// with one another V8 made (it is then rejected), the script is compiled as a require() would.
"use strict";
const { readFileSync } = require("node:fs");
const { dirname, join } = require("node:path");
const Module = require("node:module");
const vm = require("node:vm");

const FILE = join(__dirname, "..", "dist", "cli", "bundle.cjs");
const CACHE = join(__dirname, "..", "dist", "cli", "bundle.cache");

/** The bundle compiled (with `cachedData` when given), and a function that runs its top level. */
function compile(cachedData) {
  const script = new vm.Script(Module.wrap(readFileSync(FILE, "utf8")), {
    filename: FILE,
    ...(cachedData ? { cachedData } : {}),
  });
  const run = () => {
    const module = { exports: {} };
    // The bundle's import() of a dependency it leaves out (bullmq, ink, the MCP SDK): a script
    // run through vm has no loader of its own, this module has.
    globalThis.__termorchImport = (specifier) => import(specifier);
    script.runInThisContext()(module.exports, Module.createRequire(FILE), module, FILE, dirname(FILE));
    return module.exports;
  };
  return { script, run };
}

/** The CLI's exports (`main`), from its bundle. */
function loadCli() {
  let cache = null;
  try {
    cache = readFileSync(CACHE);
  } catch {
    // No cache (a build without one): compiled as it is.
  }
  return compile(cache).run();
}

module.exports = { compile, loadCli };
