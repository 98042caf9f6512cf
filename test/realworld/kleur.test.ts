import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { corpus, expectCleanMerge, git, reportOf, sh } from "./corpus.js";

const world = corpus("kleur");

// kleur (lukeed/kleur 4.1.5): ESM source, uvu tests run with `-r esm`, `node_modules` ignored by a
// .gitignore line without a trailing slash (so it also matches the include symlink).
describe("kleur, a real npm package", () => {
  it("runs four agents' real edits, gates them with the package's own suite, and merges them cleanly", async () => {
    const repo = world.clone("kleur");
    sh(repo, "npm", ["install", "--no-audit", "--no-fund"]);
    const base = git(repo, "rev-parse", "HEAD").trim();

    const tests = world.agent(
      "kleur-tests",
      `cat > test/chain.js <<'EOF'
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import kleur from '../index.mjs';

test('chained styles wrap the text once each', () => {
	kleur.enabled = true;
	assert.is(kleur.red().bold('x'), '\\x1b[31m\\x1b[1mx\\x1b[39m\\x1b[22m');
});

test.run();
EOF`,
    );
    // Commits by itself, as many agents do: `git add -A` also picks up the node_modules link.
    const docs = world.agent(
      "kleur-docs",
      `cat >> readme.md <<'EOF'

## Running kleur's tests

\`npm install && npm test\` runs the suite with uvu.
EOF
git add -A
git commit -q -m "docs: how to run the tests"`,
    );
    const source = world.agent(
      "kleur-source",
      `printf '\\nexport const VERSION = %s;\\n' "'$(node -p 'require("./package.json").version')'" >> index.mjs
printf '\\nexport const VERSION: string;\\n' >> index.d.ts`,
    );
    // Builds on the source task's output: it fails when that is not in its worktree.
    const versionTest = world.agent(
      "kleur-version-test",
      `grep -q 'export const VERSION' index.mjs || { echo "VERSION is not exported yet" >&2; exit 3; }
cat > test/version.js <<'EOF'
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { VERSION } from '../index.mjs';
import { readFileSync } from 'fs';

test('VERSION is the package version', () => {
	assert.is(VERSION, JSON.parse(readFileSync('package.json', 'utf8')).version);
});

test.run();
EOF`,
    );
    const file = world.assignments(repo, {
      run_id: "kleur",
      tasks: [
        { id: "tests", agent: "bash", command: ["bash", tests] },
        { id: "docs", agent: "bash", command: ["bash", docs] },
        { id: "source", agent: "bash", command: ["bash", source] },
        {
          id: "version-test",
          agent: "bash",
          command: ["bash", versionTest],
          dependencies: ["source"],
          success_criteria: { tests_cmd: "npm test" },
        },
      ],
      environment: { worktree_include: ["node_modules"], env_vars: ["FORCE_COLOR=1"] },
      success_criteria: { tests_cmd: "npm test" },
    });

    const r = await world.run(["run", file, "--max-parallel", "3"]);
    const report = reportOf(file);
    expect(r.exitCode, `${r.stderr}\n${JSON.stringify(report.tasks, null, 1)}`).toBe(0);
    expect(report.merge.gates.find((g) => g.name === "run.tests_cmd")?.passed).toBe(true);
    expect(
      report.tasks.find((t) => t.id === "version-test")?.gates.find((g) => g.name === "tests_cmd"),
    ).toMatchObject({ passed: true });
    expectCleanMerge(repo, report, {
      base,
      branch: "master",
      files: ["index.d.ts", "index.mjs", "readme.md", "test/chain.js", "test/version.js"],
    });
    // The merged branch passes the package's own suite, new tests included.
    const suite = sh(repo, "npm", ["test"], { FORCE_COLOR: "1" });
    expect(suite).toMatch(/Passed:\s+(\S*)17\b/);
    expect(readFileSync(join(repo, "readme.md"), "utf8")).toContain("## Running kleur's tests");
  });
});
