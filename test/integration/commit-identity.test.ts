import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { git, readReport, termorch, testFile, writeAssignments } from "./harness.js";

const { socket, workspace } = testFile("identity");

/** A1, A2 independent, M from their merge (a merge commit termorch makes), then the integration. */
function diamond(dir: string): string {
  return writeAssignments(dir, [
    { id: "A1", env: { WRITE: "a1.txt=A1" } },
    { id: "A2", env: { WRITE: "a2.txt=A2" } },
    { id: "M", dependencies: ["A1", "A2"], env: { WRITE: "m.txt=M" } },
    { id: "Z", env: { WRITE: "z.txt=Z" } },
  ]);
}

/** Every commit the run added to main: author|committer|subject|run trailer|task trailer. */
function commitsOfRun(repo: string, base: string): string[] {
  return git(
    repo,
    "log",
    "--format=%an <%ae>|%cn <%ce>|%s|%(trailers:key=Termorch-Run,valueonly,separator=)|%(trailers:key=Termorch-Task,valueonly,separator=)",
    `${base}..main`,
  )
    .trim()
    .split("\n");
}

describe("who termorch's commits are by", () => {
  it("the repository's configured user, with the run and task in trailers", async () => {
    const { dir, repo } = workspace();
    git(repo, "config", "user.name", "Repo User");
    git(repo, "config", "user.email", "repo@example.com");
    const base = git(repo, "rev-parse", "HEAD").trim();
    const result = await termorch(["run", diamond(dir)], { socket });
    expect(result.exitCode, result.stderr).toBe(0);
    const runId = readReport(dir).run_id;
    const commits = commitsOfRun(repo, base);
    // 4 task commits, M's start (a merge of A1 and A2), the integration merge.
    expect(commits).toHaveLength(6);
    for (const c of commits)
      expect(c).toMatch(/^Repo User <repo@example.com>\|Repo User <repo@example\.com>\|/);
    expect(
      commits
        .filter((c) =>
          c.startsWith("Repo User <repo@example.com>|Repo User <repo@example.com>|termorch: task "),
        )
        .map((c) => c.split("|").slice(3))
        .sort(),
    ).toEqual([
      [runId, "A1"],
      [runId, "A2"],
      [runId, "M"],
      [runId, "Z"],
    ]);
    expect(
      commits
        .find((c) => c.includes("|termorch: merge A1, A2 for "))!
        .split("|")
        .slice(3),
    ).toEqual([runId, "M"]);
    expect(
      commits
        .find((c) => c.includes("|termorch: integrate run "))!
        .split("|")
        .slice(3),
    ).toEqual([runId, ""]);
    expect(git(repo, "log", "--format=%an", `${base}..main`)).not.toContain("termorch");
  });

  it("the config's git.author when given", async () => {
    const { dir, repo } = workspace();
    git(repo, "config", "user.name", "Repo User");
    git(repo, "config", "user.email", "repo@example.com");
    const base = git(repo, "rev-parse", "HEAD").trim();
    const config = join(dir, "termorch.json");
    writeFileSync(config, JSON.stringify({ git: { author: { name: "Bot", email: "bot@example.com" } } }));
    const result = await termorch(["run", diamond(dir), "--config", config], { socket });
    expect(result.exitCode, result.stderr).toBe(0);
    const commits = commitsOfRun(repo, base);
    expect(commits).toHaveLength(6);
    for (const c of commits) expect(c).toMatch(/^Bot <bot@example.com>\|Bot <bot@example\.com>\|/);
  });

  it("termorch itself when no user is configured anywhere", async () => {
    const { dir, repo } = workspace();
    const base = git(repo, "rev-parse", "HEAD").trim();
    const result = await termorch(["run", diamond(dir)], {
      socket,
      env: { GIT_CONFIG_GLOBAL: "/dev/null", GIT_CONFIG_NOSYSTEM: "1" },
    });
    expect(result.exitCode, result.stderr).toBe(0);
    for (const c of commitsOfRun(repo, base))
      expect(c).toMatch(/^termorch <termorch@localhost>\|termorch <termorch@localhost>\|/);
  });

  it("rejects a config git.author git could not record", async () => {
    const { dir } = workspace();
    const config = join(dir, "termorch.json");
    writeFileSync(config, JSON.stringify({ git: { author: { name: "Bot <x>", email: "bot@example.com" } } }));
    const result = await termorch(["run", diamond(dir), "--config", config], { socket });
    expect(result.exitCode).toBe(2);
    expect(result.stderr).toMatch(/git\.author\.name/);
  });
});
