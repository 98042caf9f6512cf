import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { git, readReport, termorch, testFile, writeAssignments } from "./harness.js";

const { socket, workspace } = testFile("include");

/**
 * A repository with an untracked dependency folder `dep` (node_modules, .venv) in the workspace
 * and an agent script. The agent uses the linked folder, writes a cache into it (as tools do),
 * writes its work, and optionally commits everything itself.
 */
function setup(dep: string, ignore: { gitignore?: string; exclude?: string }, agentCommits: boolean) {
  const ws = workspace();
  const { dir, repo } = ws;
  git(repo, "config", "user.name", "Repo User");
  git(repo, "config", "user.email", "repo@example.com");
  if (ignore.gitignore !== undefined) {
    writeFileSync(join(repo, ".gitignore"), `${ignore.gitignore}\n`);
    git(repo, "add", ".gitignore");
    git(repo, "commit", "-q", "-m", "ignore");
  }
  if (ignore.exclude !== undefined)
    writeFileSync(join(repo, ".git", "info", "exclude"), `${ignore.exclude}\n`);
  mkdirSync(join(repo, dep, "pkg"), { recursive: true });
  writeFileSync(join(repo, dep, "pkg", "index.js"), "module.exports = 1;\n");
  const agent = join(dir, "agent.sh");
  writeFileSync(
    agent,
    [
      "set -eu",
      `test -f ${dep}/pkg/index.js`,
      `mkdir -p ${dep}/.cache && echo cached > ${dep}/.cache/$TERMORCH_TASK_ID`,
      "echo work > work-$TERMORCH_TASK_ID.txt",
      ...(agentCommits ? ["git add -A", "git commit -q -m 'agent work'"] : []),
      "",
    ].join("\n"),
  );
  return { ...ws, agent, base: git(repo, "rev-parse", "HEAD").trim() };
}

/** Commits reachable from the user's branch (since the run's base) that touch `path`. */
function commitsTouching(repo: string, base: string, path: string): string {
  return git(repo, "log", "--full-history", "--format=%H %s", `${base}..main`, "--", path).trim();
}

describe("worktree_include of paths the repository ignores, or not", () => {
  const cases = [
    {
      name: "node_modules in .gitignore (no trailing slash)",
      dep: "node_modules",
      ignore: { gitignore: "node_modules" },
    },
    {
      name: "node_modules/ in .gitignore (the symlink is not ignored)",
      dep: "node_modules",
      ignore: { gitignore: "node_modules/" },
    },
    { name: ".venv in .git/info/exclude", dep: ".venv", ignore: { exclude: ".venv" } },
    { name: "a path not ignored at all", dep: "node_modules", ignore: {} },
  ];
  for (const c of cases) {
    for (const agentCommits of [false, true]) {
      it(`${c.name}${agentCommits ? ", the agent committing everything itself" : ""}: linked, never committed`, async () => {
        const { dir, repo, agent, base } = setup(c.dep, c.ignore, agentCommits);
        const file = writeAssignments(
          dir,
          [
            {
              id: "A",
              command: ["bash", agent],
              success_criteria: { tests_cmd: `test -f ${c.dep}/pkg/index.js` },
            },
            { id: "B", dependencies: ["A"], command: ["bash", agent] },
          ],
          { environment: { worktree_include: [c.dep] } },
        );
        const result = await termorch(["run", file], { socket });
        const report = readReport(dir);
        expect(
          report.tasks.map((t) => [t.id, t.status, t.reason, t.detail ?? null]),
          result.stderr,
        ).toEqual([
          ["A", "success", null, null],
          ["B", "success", null, null],
        ]);
        expect(result.exitCode).toBe(0);
        expect(report.tasks[0]!.gates.find((g) => g.name === "tests_cmd")!.passed).toBe(true);
        expect(report.merge.result).toBe("success");
        expect(readFileSync(join(repo, "work-A.txt"), "utf8")).toBe("work\n");
        expect(readFileSync(join(repo, "work-B.txt"), "utf8")).toBe("work\n");
        // No commit merged into the user's branch ever held the include path.
        expect(commitsTouching(repo, base, c.dep)).toBe("");
        expect(git(repo, "ls-tree", "-r", "--name-only", "main")).not.toContain(c.dep);
        for (const id of ["A", "B"])
          expect(readFileSync(join(dir, "artifacts", id, "changes.patch"), "utf8")).not.toContain(c.dep);
        if (agentCommits) {
          // The agent's own commits are kept, with their message and author, minus the link.
          const log = git(repo, "log", "--format=%an|%s", `${base}..main`).trim().split("\n");
          expect(log.filter((l) => l === "Repo User|agent work")).toHaveLength(2);
        }
        // The caches the tools wrote went into the user's copy (accepted; docs/guides/how-tasks-run.md says so).
        expect(readFileSync(join(repo, c.dep, ".cache", "A"), "utf8")).toBe("cached\n");
        expect(git(repo, "status", "--porcelain", "--untracked-files=no")).toBe("");
      });
    }
  }

  it("the config's defaults.worktree_include, merged with the assignment's list, ignored paths included", async () => {
    const { dir, repo, base } = setup(".venv", { exclude: ".venv\nnode_modules" }, true);
    mkdirSync(join(repo, "node_modules"));
    writeFileSync(join(repo, "node_modules", "x.js"), "x\n");
    const agent = join(dir, "agent2.sh");
    writeFileSync(
      agent,
      "set -eu\ntest -f .venv/pkg/index.js\ntest -f node_modules/x.js\necho w > w.txt\ngit add -A\ngit commit -q -m 'agent work'\n",
    );
    const config = join(dir, "termorch.json");
    writeFileSync(config, JSON.stringify({ defaults: { worktree_include: [".venv"] } }));
    const file = writeAssignments(dir, [{ id: "A", command: ["bash", agent] }], {
      environment: { worktree_include: ["node_modules"] },
    });
    const result = await termorch(["run", file, "--config", config], { socket });
    const report = readReport(dir);
    expect(report.tasks[0]!.status, `${result.stderr}\n${report.tasks[0]!.detail}`).toBe("success");
    expect(result.exitCode).toBe(0);
    expect(commitsTouching(repo, base, ".venv")).toBe("");
    expect(commitsTouching(repo, base, "node_modules")).toBe("");
    expect(git(repo, "ls-tree", "-r", "--name-only", "main").split("\n")).toContain("w.txt");
  });
});
