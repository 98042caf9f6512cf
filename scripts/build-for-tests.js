// The build `npm test` runs: every module of src/ transpiled to dist/ as tsc lays it out (esbuild,
// one file each, no bundling), then the assets and the CLI bundle as `npm run build` makes them.
//
// Why: tsc's type check and declarations took 13 s of one core at the start of every `npm test`,
// while the other core had nothing to do. The types are checked by `npm run typecheck` (CI runs it
// before `npm test`), and the package is built with tsc (`npm run build`, `prepack`): only the
// JavaScript the tests run comes from here. tsconfig.json's `verbatimModuleSyntax` makes a
// file-by-file transpile emit what tsc emits.
import { readdirSync, statSync } from "node:fs";
import { join } from "node:path";
import { build } from "esbuild";

/** Every TypeScript module under `dir`. */
function modules(dir) {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return modules(path);
    return name.endsWith(".ts") && !name.endsWith(".d.ts") && !name.endsWith(".test.ts") ? [path] : [];
  });
}

await build({
  entryPoints: modules("src"),
  outdir: "dist",
  outbase: "src",
  bundle: false,
  platform: "node",
  format: "esm",
  target: "node20",
  sourcemap: true,
  tsconfig: "tsconfig.build.json",
  logLevel: "warning",
});
