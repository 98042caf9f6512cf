import { appendFileSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { expect, it } from "vitest";
import { describeWith } from "../needs.js";
import { corpus, expectCleanMerge, git, reportOf, sh } from "./corpus.js";

const world = corpus("itsdangerous");

// pallets/itsdangerous: its suite runs offline with Debian's python3-pytest and
// python3-freezegun, from a virtualenv that sees them (--system-site-packages). `.venv` is
// excluded in .git/info/exclude only (its .gitignore does not list it).
const PYTEST = "PYTHONPATH=src .venv/bin/python -m pytest -q -p no:cacheprovider";

describeWith("pytest", "test/realworld/itsdangerous.test.ts")("itsdangerous, a real Python package", () => {
  it("runs agents with the linked virtualenv, gates on the package's pytest suite, merges cleanly", async () => {
    const repo = world.clone("itsdangerous");
    // No pip inside: Debian splits ensurepip into python3-venv, and nothing is installed into it.
    sh(repo, "/usr/bin/python3", ["-m", "venv", "--system-site-packages", "--without-pip", ".venv"]);
    appendFileSync(join(repo, ".git", "info", "exclude"), ".venv\n");
    const base = git(repo, "rev-parse", "HEAD").trim();

    const roundTrip = world.agent(
      "its-roundtrip",
      [
        "cat > tests/test_itsdangerous/test_roundtrip.py <<'PY'",
        "import pytest",
        "",
        "from itsdangerous import BadSignature",
        "from itsdangerous import URLSafeSerializer",
        "",
        "",
        '@pytest.mark.parametrize("value", [{"a": [1, 2]}, "text", 42])',
        "def test_round_trip(value):",
        '    s = URLSafeSerializer("secret-key", salt="termorch")',
        "    assert s.loads(s.dumps(value)) == value",
        "",
        "",
        "def test_other_salt_is_rejected():",
        '    token = URLSafeSerializer("secret-key", salt="a").dumps("x")',
        "    with pytest.raises(BadSignature):",
        '        URLSafeSerializer("secret-key", salt="b").loads(token)',
        "PY",
      ].join("\n"),
    );
    const changes = world.agent(
      "its-changes",
      "sed -i 's/^-   Remove previously deprecated code\\.$/&\\n-   Test URL-safe round trips./' CHANGES.rst",
    );
    const source = world.agent(
      "its-source",
      [
        "cat >> src/itsdangerous/__init__.py <<'PY'",
        "",
        "#: The serializers this package offers, for callers that pick one by name.",
        'SERIALIZERS = {"default": Serializer, "url_safe": URLSafeSerializer}',
        "PY",
      ].join("\n"),
    );
    // Builds on the source task's output, and commits by itself (the .venv link included).
    const sourceTest = world.agent(
      "its-source-test",
      [
        "grep -q SERIALIZERS src/itsdangerous/__init__.py || exit 3",
        "cat > tests/test_itsdangerous/test_serializers_map.py <<'PY'",
        "import itsdangerous",
        "",
        "",
        "def test_serializers_map():",
        '    assert itsdangerous.SERIALIZERS["url_safe"] is itsdangerous.URLSafeSerializer',
        "PY",
        "git add -A",
        'git commit -q -m "test the SERIALIZERS map"',
      ].join("\n"),
    );
    const file = world.assignments(repo, {
      run_id: "itsdangerous",
      tasks: [
        {
          id: "roundtrip",
          agent: "bash",
          command: ["bash", roundTrip],
          success_criteria: { tests_cmd: PYTEST },
        },
        { id: "changes", agent: "bash", command: ["bash", changes], allowed_paths: ["CHANGES.rst"] },
        { id: "source", agent: "bash", command: ["bash", source] },
        { id: "source-test", agent: "bash", command: ["bash", sourceTest], dependencies: ["source"] },
      ],
      environment: { worktree_include: [".venv"] },
      success_criteria: { tests_cmd: PYTEST },
    });

    const r = await world.run(["run", file]);
    const report = reportOf(file);
    expect(r.exitCode, `${r.stderr}\n${JSON.stringify(report.tasks, null, 1)}`).toBe(0);
    expectCleanMerge(repo, report, {
      base,
      branch: "main",
      files: [
        "CHANGES.rst",
        "src/itsdangerous/__init__.py",
        "tests/test_itsdangerous/test_roundtrip.py",
        "tests/test_itsdangerous/test_serializers_map.py",
      ],
    });
    const suite = sh(repo, "bash", ["-c", PYTEST]);
    expect(suite).toMatch(/\b302 passed\b/);
    expect(readFileSync(join(repo, "CHANGES.rst"), "utf8")).toContain("-   Test URL-safe round trips.");
  });
});
