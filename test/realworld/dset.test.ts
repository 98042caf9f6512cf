import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { corpus, expectCleanMerge, git, reportOf, sh } from "./corpus.js";

const world = corpus("dset");

// dset (lukeed/dset 3.1.4): uvu tests in test/ (suites/ ignored), `node_modules` and the lock
// file that `npm install` writes both ignored by the repository.
describe("dset, a real npm package", () => {
  it("chains a test task onto another's test file, gates on the package's suite, merges cleanly", async () => {
    const repo = world.clone("dset");
    sh(repo, "npm", ["install", "--no-audit", "--no-fund"]);
    const base = git(repo, "rev-parse", "HEAD").trim();

    const paths = world.agent(
      "dset-paths",
      [
        "cat > test/paths.js <<'JS'",
        "import { test } from 'uvu';",
        "import * as assert from 'uvu/assert';",
        "import { dset } from '../src';",
        "",
        "test('creates arrays for numeric keys', () => {",
        "\tconst obj = {};",
        "\tdset(obj, 'a.0.b', 1);",
        "\tassert.equal(obj, { a: [{ b: 1 }] });",
        "});",
        "",
        "test.run();",
        "JS",
      ].join("\n"),
    );
    // Extends the file written by the task it depends on.
    const morePaths = world.agent(
      "dset-more-paths",
      [
        'test -f test/paths.js || { echo "test/paths.js is missing" >&2; exit 3; }',
        "sed -i '$d' test/paths.js",
        "cat >> test/paths.js <<'JS'",
        "test('keeps existing siblings', () => {",
        "\tconst obj = { a: { keep: true } };",
        "\tdset(obj, ['a', 'b'], 2);",
        "\tassert.equal(obj, { a: { keep: true, b: 2 } });",
        "});",
        "",
        "test.run();",
        "JS",
      ].join("\n"),
    );
    const jsdoc = world.agent(
      "dset-jsdoc",
      "sed -i '1i /** Sets obj at the dotted or array path keys to val, creating objects and arrays on the way. */' src/index.js",
    );
    const readme = world.agent("dset-readme", "printf '\\n> Tested with uvu: `npm test`.\\n' >> readme.md");
    const file = world.assignments(repo, {
      run_id: "dset",
      tasks: [
        { id: "paths", agent: "bash", command: ["bash", paths] },
        { id: "more-paths", agent: "bash", command: ["bash", morePaths], dependencies: ["paths"] },
        { id: "jsdoc", agent: "bash", command: ["bash", jsdoc], success_criteria: { tests_cmd: "npm test" } },
        { id: "readme", agent: "bash", command: ["bash", readme], allowed_paths: ["*.md"] },
      ],
      environment: { worktree_include: ["node_modules"] },
      success_criteria: { tests_cmd: "npm test" },
    });

    const r = await world.run(["run", file]);
    const report = reportOf(file);
    expect(r.exitCode, `${r.stderr}\n${JSON.stringify(report.tasks, null, 1)}`).toBe(0);
    expectCleanMerge(repo, report, {
      base,
      branch: "master",
      files: ["readme.md", "src/index.js", "test/paths.js"],
    });
    const suite = sh(repo, "npm", ["test"]);
    expect(suite).toMatch(/Passed:\s+(\S*)76\b/);
    expect(readFileSync(join(repo, "test", "paths.js"), "utf8")).toContain("keeps existing siblings");
  });
});
