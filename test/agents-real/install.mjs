// Installs the real agent CLIs of this folder's package.json on first use (npm run test:agents),
// and again when the lockfile changed since: they take about 2 GB, so the main `npm ci` does not.
// --ignore-scripts: nothing is built or fetched at install time (gemini's optional node-pty and
// keytar builds are not needed: it takes the prebuilt @lydell/node-pty). Two CLIs' own install
// scripts are then run by name: they put the native binary of their platform package (installed
// by npm, nothing downloaded) where their bin stub expects it.
import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const lock = readFileSync(join(here, "package-lock.json"));
const stamp = join(here, "node_modules", ".termorch-installed");
const want = createHash("sha256").update(lock).digest("hex");
if (existsSync(stamp) && readFileSync(stamp, "utf8") === want) process.exit(0);
console.log(
  "test:agents: installing the pinned agent CLIs into test/agents-real/node_modules (about 2 GB)...",
);
execFileSync("npm", ["ci", "--ignore-scripts", "--no-audit", "--no-fund", "--loglevel=error"], {
  cwd: here,
  stdio: "inherit",
});
for (const script of ["@anthropic-ai/claude-code/install.cjs", "opencode-ai/postinstall.mjs"]) {
  const path = join(here, "node_modules", script);
  execFileSync(process.execPath, [path], { cwd: dirname(path), stdio: "inherit" });
}
writeFileSync(stamp, want);
