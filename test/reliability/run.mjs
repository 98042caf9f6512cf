// `npm run reliability [-- NAME...] [--smoke] [--seed N] [--json FILE]`: runs the campaigns (all,
// or the named ones) one after the other, each as its own process so that one campaign's crash or
// leak cannot hide in another's figures, and prints one line per campaign. Exit 1 when any figure
// that must be 0 is not. RELIABILITY.md records one run of the long versions.
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ROOT } from "./lib.mjs";

export const CAMPAIGNS = ["crash", "input", "hostile", "soak", "isolation"];

const argv = process.argv.slice(2);
const names = argv.filter((a) => CAMPAIGNS.includes(a));
const passOn = [];
let jsonOut = null;
for (let i = 0; i < argv.length; i++) {
  const a = argv[i];
  if (CAMPAIGNS.includes(a)) continue;
  if (a === "--json") jsonOut = argv[++i];
  else if (a === "--smoke" || a === "--long") passOn.push(a);
  else if (a === "--seed") passOn.push(a, argv[++i]);
  else {
    console.error(
      `unknown argument "${a}"; campaigns: ${CAMPAIGNS.join(", ")}; flags: --smoke --long --seed N --json FILE`,
    );
    process.exit(2);
  }
}

const scratch = mkdtempSync(join(tmpdir(), "termorch-rel-results-"));
const results = [];
let failed = false;
for (const name of names.length ? names : CAMPAIGNS) {
  const file = join(scratch, `${name}.json`);
  console.log(`\n=== ${name} ===`);
  const r = spawnSync(
    process.execPath,
    [join(ROOT, "test", "reliability", `${name}.mjs`), ...passOn, "--json", file],
    {
      stdio: "inherit",
      cwd: ROOT,
    },
  );
  let result;
  try {
    result = JSON.parse(readFileSync(file, "utf8"));
  } catch {
    result = { campaign: name, failed: [`no result (exit ${r.status ?? r.signal})`] };
  }
  if (r.status !== 0 || result.failed.length) failed = true;
  results.push(result);
}
rmSync(scratch, { recursive: true, force: true });

console.log("\n=== summary ===");
for (const r of results)
  console.log(
    `${r.campaign.padEnd(10)} ${r.failed.length ? `FAILED: ${r.failed.join(", ")}` : "ok"}${
      r.seed !== undefined ? `  (seed ${r.seed}, ${r.trials} trials, ${r.duration_s} s)` : ""
    }`,
  );
if (jsonOut) writeFileSync(jsonOut, `${JSON.stringify(results, null, 2)}\n`);
process.exitCode = failed ? 1 : 0;
