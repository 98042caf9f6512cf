import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { git, readReport, STEP, termorch, testFile, writeAssignments } from "./harness.js";

const { socket, workspace } = testFile("rundir");
const cli = (args: string[]) => termorch(args, { socket });

/** An assignments file inside the repository itself (its root), as users often keep it. */
function assignmentsInRepo(repo: string, runId: string, extra: Record<string, unknown> = {}): string {
  const file = join(repo, "assignments.json");
  writeFileSync(
    file,
    JSON.stringify({
      run_id: runId,
      tasks: [
        {
          id: "A",
          agent: "step",
          context_path: "ctx/task.md",
          command: ["bash", STEP],
          env: { WRITE: "a.txt=A", SAY: "hello from A" },
        },
      ],
      environment: { workspace_dir: "." },
      ...extra,
    }),
  );
  // Committed, as a user would: the run then starts from a clean work tree.
  git(repo, "add", "assignments.json");
  git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "assignments");
  return file;
}

describe("the run directory", () => {
  it("keeps a run's files out of git's sight when the assignments file is in the work tree, and says where they are", async () => {
    const { repo } = workspace();
    const file = assignmentsInRepo(repo, "inrepo");
    const first = await cli(["run", file]);
    expect(first.exitCode, first.stderr).toBe(0);
    const runDir = join(repo, ".termorch", "runs", "inrepo");
    expect(first.stderr).toContain(`run directory: ${runDir}`);
    expect(first.stderr).toContain(`report: ${join(runDir, "execution_report.json")}`);
    expect(readReport(runDir).merge.result).toBe("success");
    expect(readdirSync(join(runDir, "logs")).length).toBeGreaterThan(0);
    // The merge brought a.txt; nothing of termorch's shows up.
    expect(git(repo, "status", "--porcelain", "--untracked-files=all")).toBe("");
    expect(existsSync(join(repo, "execution_report.json"))).toBe(false);
    expect(existsSync(join(repo, "logs"))).toBe(false);

    // A second run of the same file gets its own folder; the first run's files stay as they were.
    const firstReport = readFileSync(join(runDir, "execution_report.json"), "utf8");
    const second = await cli(["run", file]);
    expect(second.exitCode, second.stderr).toBe(0);
    const secondDir = join(repo, ".termorch", "runs", "inrepo-2");
    expect(readReport(secondDir).run_id).toBe("inrepo-2");
    expect(readFileSync(join(runDir, "execution_report.json"), "utf8")).toBe(firstReport);
    expect(git(repo, "status", "--porcelain", "--untracked-files=all")).toBe("");
  });

  it("writes no report into the work tree for invalid input", async () => {
    const { repo } = workspace();
    const file = assignmentsInRepo(repo, "bad", { mode: { dry_run: false, verify: "yes" } });
    const r = await cli(["run", file]);
    expect(r.exitCode).toBe(2);
    expect(r.stderr).toContain("mode.verify");
    expect(git(repo, "status", "--porcelain", "--untracked-files=all")).toBe("");
  });

  it("marks a new --out folder inside the work tree as ignored", async () => {
    const { repo } = workspace();
    const file = assignmentsInRepo(repo, "outrepo");
    const r = await cli(["run", file, "--out", join(repo, "runs", "today")]);
    expect(r.exitCode, r.stderr).toBe(0);
    expect(readReport(join(repo, "runs", "today")).merge.result).toBe("success");
    expect(git(repo, "status", "--porcelain", "--untracked-files=all")).toBe("");
  });

  it("refuses a --out folder inside the work tree that holds the user's files", async () => {
    const { repo } = workspace();
    const file = assignmentsInRepo(repo, "outctx");
    const r = await cli(["run", file, "--out", join(repo, "ctx")]);
    expect(r.exitCode).toBe(2);
    expect(r.stderr).toContain("git status");
    expect(readdirSync(join(repo, "ctx"))).toEqual(["task.md"]);
    expect(git(repo, "branch", "--list", "termorch/*")).toBe("");
  });

  it("refuses a second run into a folder that holds another run's files, and changes nothing", async () => {
    const { dir } = workspace();
    const file = writeAssignments(dir, [{ id: "A", env: { WRITE: "a.txt=A" } }]);
    const first = await cli(["run", file]);
    expect(first.exitCode, first.stderr).toBe(0);
    const runId = readReport(dir).run_id;
    const before = readFileSync(join(dir, "execution_report.json"), "utf8");
    const logs = readdirSync(join(dir, "logs")).sort();

    const second = await cli(["run", file]);
    expect(second.exitCode).toBe(2);
    expect(second.stderr).toContain(`holds the files of run ${runId} (finished)`);
    expect(second.stderr).toContain("--out");
    expect(readFileSync(join(dir, "execution_report.json"), "utf8")).toBe(before);
    expect(readdirSync(join(dir, "logs")).sort()).toEqual(logs);

    // With a folder of its own it runs.
    const out = join(dir, "second");
    mkdirSync(out);
    const third = await cli(["run", file, "--out", out]);
    expect(third.exitCode, third.stderr).toBe(0);
    expect(readFileSync(join(dir, "execution_report.json"), "utf8")).toBe(before);
  });

  it("never lets a dry run overwrite a real run's report", async () => {
    const { dir } = workspace();
    const file = writeAssignments(dir, [{ id: "A" }]);
    expect((await cli(["run", file])).exitCode).toBe(0);
    const before = readFileSync(join(dir, "execution_report.json"), "utf8");
    const dry = await cli(["run", file, "--dry-run"]);
    expect(dry.exitCode).toBe(0);
    expect(dry.stderr).toContain("not written");
    expect(readFileSync(join(dir, "execution_report.json"), "utf8")).toBe(before);
    // --json still hands the dry run's report to the caller.
    const json = await cli(["run", file, "--dry-run", "--json"]);
    expect(JSON.parse(json.stdout).dry_run).toBe(true);
    expect(readFileSync(join(dir, "execution_report.json"), "utf8")).toBe(before);
  });
});
