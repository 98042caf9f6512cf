import { existsSync, mkdirSync, readdirSync, readFileSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { git, readReport, STEP, termorch, testFile, waitFor, writeAssignments } from "./harness.js";

// A folder that holds another run's files (a second run refused, a dry run not written over it) is
// the middle tier's (test/middle/run-dir.test.ts); here, the folders a git work tree decides.
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
          // A second run writes what the first merged already: no change, and that is fine here.
          expect_changes: false,
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

  it("uses a folder git ignores, also when its path goes through a symlink", async () => {
    const { dir, repo } = workspace();
    writeFileSync(join(repo, ".gitignore"), "runs/\n");
    git(repo, "add", ".gitignore");
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "ignore runs");
    mkdirSync(join(repo, "runs"));
    symlinkSync(repo, join(dir, "link"));
    const file = writeAssignments(join(repo, "runs"), [{ id: "A", env: { WRITE: "a.txt=A" } }], {
      environment: { workspace_dir: ".." },
    });
    const r = await cli(["run", join(dir, "link", "runs", "assignments.json")]);
    expect(r.exitCode, r.stderr).toBe(0);
    expect(r.stderr).not.toContain("run directory:");
    expect(readReport(join(repo, "runs")).merge.result).toBe("success");
    expect(existsSync(join(repo, "runs", ".termorch", "runs"))).toBe(false);
    expect(git(repo, "status", "--porcelain", "--untracked-files=all")).toBe("");
    expect(file).toBe(join(repo, "runs", "assignments.json"));
  });

  it("a second run of the same file while the first still runs finds the workspace locked (exit 4), naming the run", async () => {
    const { dir, stamps } = workspace();
    const release = join(dir, "release");
    const file = writeAssignments(dir, [{ id: "A", env: { WAIT_FILE: release, STAMPS: stamps } }]);
    // A first run that fails keeps its branch: the next run of the file needs a fresh id.
    const out1 = join(dir, "one");
    const failing = writeAssignments(dir, [{ id: "A", env: { EXIT: "1" } }], {}, "failing.json");
    const runId = JSON.parse(readFileSync(failing, "utf8")).run_id as string;
    writeFileSync(file, readFileSync(file, "utf8").replace(/"run_id": "[^"]+"/, `"run_id": "${runId}"`));
    expect((await cli(["run", failing, "--out", out1])).exitCode).toBe(1);

    const out2 = join(dir, "two");
    const live = termorch(["run", file, "--out", out2], { socket });
    await waitFor(() => existsSync(join(stamps, "A.start")), 30_000, "the live run's agent");
    const second = await cli(["run", file, "--out", join(dir, "three")]);
    expect(second.exitCode).toBe(4);
    expect(second.stderr).toContain(`locked by run ${runId}-2`);
    expect(second.stderr).toContain(`run directory ${out2}`);
    // Into the live run's own folder: the lock answers first, not the folder check.
    const same = await cli(["run", file, "--out", out2]);
    expect(same.exitCode).toBe(4);
    writeFileSync(release, "");
    const finished = await live;
    expect(finished.exitCode).toBe(0);
    // The file's run id was taken by the first run's kept branch: the run says what it is called.
    expect(finished.stderr).toContain(`run id ${runId} is taken`);
    expect(finished.stderr).toContain(`so this run is ${runId}-2`);
  });
});
