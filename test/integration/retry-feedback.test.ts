// A retry is told what went wrong (its feedback section) and, by default, goes on from the
// failed attempt's work: real tmux, real git, stand-in agents that read their prompt.
import { execFileSync } from "node:child_process";
import { existsSync, lstatSync, mkdirSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { FeedbackBlock } from "../../src/contract/feedback-block.js";
import { readReport, termorch, testFile, writeAssignments } from "./harness.js";

const { socket, workspace } = testFile("feedback");

const git = (cwd: string, args: string[]): string =>
  execFileSync("git", args, { cwd, encoding: "utf8" }).trim();

/** A stand-in agent: attempt 1 does `first`, a later one `then`, both in bash, in its worktree. */
function agent(first: string, then: string): string[] {
  return ["bash", "-c", `if [ "$TERMORCH_ATTEMPT" = 1 ]; then ${first}; else ${then}; fi`];
}

/** The JSON block of a kept feedback section, parsed by its own schema. */
function blockOf(section: string): FeedbackBlock {
  const json = /```json termorch-feedback\n([\s\S]*?)\n```/.exec(section)?.[1];
  if (!json) throw new Error(`no feedback block in:\n${section}`);
  return FeedbackBlock.parse(JSON.parse(json));
}

describe("failures that teach", () => {
  it("by default a retry goes on from the failed attempt's work (kept at its work ref) and is told what went wrong", async () => {
    const { dir } = workspace();
    const seen = join(dir, "seen-prompt.md");
    const file = writeAssignments(dir, [
      {
        id: "fix",
        retries: 1,
        expect_changes: true,
        command: agent(
          "echo half > part.txt; echo 'it broke here' >&2; exit 1",
          `cp "$TERMORCH_PROMPT_FILE" ${seen}; test -e part.txt && echo done > done.txt`,
        ),
      },
    ]);
    const result = await termorch(["run", file, "--keep-branches"], { socket });
    expect(result.exitCode, result.stderr).toBe(0);
    const t = readReport(dir).tasks[0]!;
    expect(t).toMatchObject({ status: "success", attempts: 2 });
    const prompt = readFileSync(seen, "utf8");
    expect(prompt).toContain("## What went wrong in attempt 1");
    expect(prompt).toContain("exited with code 1");
    expect(prompt).toContain("holds the failed attempt's work");
    const block = blockOf(prompt);
    expect(block).toMatchObject({
      attempt: 1,
      reason: "exit_code",
      changed_files: ["part.txt"],
      next_starts_from: "last_work",
    });
    // Kept, and named by the attempt it was given to.
    const history = t.attempt_history!;
    expect(history.map((h) => [h.n, h.started_from, h.reason])).toEqual([
      [1, null, "exit_code"],
      [2, "last_work", null],
    ]);
    expect(history[1]!.feedback).toBe("artifacts/fix/attempt-2/feedback.md");
    expect(readFileSync(join(dir, history[1]!.feedback!), "utf8")).toContain(
      "## What went wrong in attempt 1",
    );
    // The failed work is kept at its ref; the task's change is the whole of it, from its start.
    const repo = join(dir, "repo");
    expect(git(repo, ["show", `${history[0]!.work_ref}:part.txt`])).toBe("half");
    expect(readFileSync(join(repo, "part.txt"), "utf8")).toBe("half\n");
    // The failed attempt's commit stays at its ref only: the merged history has the task's one commit.
    const failedCommit = git(repo, ["rev-parse", history[0]!.work_ref!]).trim();
    expect(git(repo, ["rev-list", "HEAD"]).split("\n")).not.toContain(failedCommit);
    expect(git(repo, ["rev-list", "--count", `${t.commit}^..${t.commit}`]).trim()).toBe("1");
    expect(git(repo, ["rev-parse", `${t.commit}^`]).trim()).toBe(
      git(repo, ["rev-parse", `${failedCommit}^`]).trim(),
    );
    const patch = readFileSync(join(dir, "artifacts", "fix", "changes.patch"), "utf8");
    expect(patch).toContain("part.txt");
    expect(patch).toContain("done.txt");
    // The views show each attempt: status --json (and MCP wait, serve) and report.html.
    const status = await termorch(["status", readReport(dir).run_id!, "--json"], { socket });
    const view = JSON.parse(status.stdout) as { runs: { tasks: { attempt_history: unknown[] }[] }[] };
    expect(view.runs[0]!.tasks[0]!.attempt_history).toEqual(history);
    const html = readFileSync(join(dir, "report.html"), "utf8");
    expect(html).toContain('<li data-attempt="2">attempt 2 (agent step, from last work)');
    expect(html).toContain('href="./artifacts/fix/attempt-2/feedback.md"');
    // The timeline's bar of attempt 2 names its agent and what it was told.
    expect(html).toMatch(
      /title="fix attempt 2 \(step\): [^"]*it was told what went wrong before: artifacts\/fix\/attempt-2\/feedback\.md"/,
    );
    // `termorch clean` takes the work refs with the branches it keeps.
    const cleaned = await termorch(["clean", readReport(dir).run_id!], { socket });
    expect(cleaned.exitCode, cleaned.stderr).toBe(0);
    expect(git(repo, ["for-each-ref", "refs/termorch/"])).toBe("");
  });

  it("tests_cmd's failure: its output's end and failure lines, redacted, reach the next attempt", async () => {
    const { dir } = workspace();
    const seen = join(dir, "seen-prompt.md");
    const file = writeAssignments(dir, [
      {
        id: "tested",
        retries: 1,
        expect_changes: true,
        env: { SERVICE_TOKEN: "s3cr3t-value-991" },
        command: agent(
          "echo wrong > answer.txt",
          `cp "$TERMORCH_PROMPT_FILE" ${seen}; echo right > answer.txt`,
        ),
        success_criteria: {
          tests_cmd: `for i in $(seq 1 400); do echo "line $i"; done; echo "token $SERVICE_TOKEN"; grep -q right answer.txt || { echo "AssertionError: expected right, got $(cat answer.txt)"; exit 7; }`,
        },
      },
    ]);
    const result = await termorch(["run", file], { socket });
    expect(result.exitCode, result.stderr).toBe(0);
    const prompt = readFileSync(seen, "utf8");
    const block = blockOf(prompt);
    expect(block.tests).toMatchObject({ exit_code: 7, how: "exit code 7", truncated: true });
    expect(block.tests!.failure_lines).toEqual(["AssertionError: expected right, got wrong"]);
    // The end of it: at most 200 lines, the last one the assertion.
    const tail = block.tests!.tail.split("\n");
    expect(tail.length).toBeLessThanOrEqual(200);
    expect(tail.at(-1)).toBe("AssertionError: expected right, got wrong");
    expect(tail).not.toContain("line 1");
    expect(prompt).not.toContain("s3cr3t-value-991");
    expect(readFileSync(join(dir, "artifacts", "tested", "attempt-2", "feedback.md"), "utf8")).not.toContain(
      "s3cr3t-value-991",
    );
    // Merged: the failed attempt's work ref went with the task branch (its work is in the artifacts).
    expect(git(join(dir, "repo"), ["for-each-ref", "refs/termorch/"])).toBe("");
  });

  it("missing required artifacts and files outside allowed_paths are named for the next attempt", async () => {
    const { dir } = workspace();
    const seen = join(dir, "seen-prompt.md");
    const file = writeAssignments(dir, [
      {
        id: "gated",
        retries: 1,
        expect_changes: true,
        allowed_paths: ["src/**", "out/**"],
        success_criteria: { required_artifacts: ["out/report.md"] },
        command: agent(
          "mkdir -p src && echo a > src/a.txt && echo b > stray.txt",
          `cp "$TERMORCH_PROMPT_FILE" ${seen}; rm -f stray.txt; mkdir -p out && echo r > out/report.md`,
        ),
      },
    ]);
    const result = await termorch(["run", file], { socket });
    expect(result.exitCode, result.stderr).toBe(0);
    const block = blockOf(readFileSync(seen, "utf8"));
    expect(block.missing_artifacts).toEqual(["out/report.md"]);
    expect(block.outside_allowed_paths).toEqual(["stray.txt"]);
    expect(block.failed_gates.map((g) => g.name)).toEqual(["required_artifacts", "allowed_paths"]);
  });

  it("the handoff's problems: files it lists that the task did not change, and those it left out", async () => {
    const { dir } = workspace();
    const seen = join(dir, "seen-prompt.md");
    const handoff = (files: string) =>
      `printf '## Summary\\nsome\\n## Files Touched\\n${files}\\n## How to Verify\\ncat\\n' > "$TERMORCH_HANDOFF"`;
    const file = writeAssignments(dir, [
      {
        id: "handed",
        retries: 1,
        expect_changes: true,
        success_criteria: { handoff: true },
        command: agent(
          `echo a > a.txt; echo b > b.txt; ${handoff("- a.txt\\n- ghost.txt")}`,
          `cp "$TERMORCH_PROMPT_FILE" ${seen}; ${handoff("- a.txt\\n- b.txt")}`,
        ),
      },
    ]);
    const result = await termorch(["run", file], { socket });
    expect(result.exitCode, result.stderr).toBe(0);
    const block = blockOf(readFileSync(seen, "utf8"));
    expect(block.handoff).toEqual({
      missing_sections: [],
      listed_not_changed: ["ghost.txt"],
      changed_not_listed: ["b.txt"],
    });
  });

  it("after a timeout the retry starts from the last committed state, not from a torn worktree", async () => {
    const { dir } = workspace();
    const seen = join(dir, "seen.txt");
    const file = writeAssignments(dir, [
      {
        id: "slow",
        retries: 1,
        timeout_s: 1,
        expect_changes: true,
        command: agent(
          "echo torn > torn.txt; sleep 30",
          `(test -e torn.txt && echo present || echo absent) > ${seen}; grep -c 'Timed out' "$TERMORCH_PROMPT_FILE" >> ${seen}; echo ok > ok.txt`,
        ),
      },
    ]);
    const result = await termorch(["run", file], { socket });
    expect(result.exitCode, result.stderr).toBe(0);
    expect(readFileSync(seen, "utf8")).toBe("absent\n1\n");
    const t = readReport(dir).tasks[0]!;
    expect(t.attempt_history!.map((h) => h.started_from)).toEqual([null, "last_commit"]);
    expect(t.attempt_history![0]!.work_ref).toBeNull();
  });

  it("a secret in the failed work is never committed: the retry is told where, not what", async () => {
    const { dir } = workspace();
    const seen = join(dir, "seen-prompt.md");
    const file = writeAssignments(dir, [
      {
        id: "leaky",
        retries: 1,
        expect_changes: true,
        env: { API_KEY: "k-0123456789-secret" },
        command: agent(
          'echo "$API_KEY" > creds.txt; exit 1',
          `cp "$TERMORCH_PROMPT_FILE" ${seen}; rm creds.txt; echo fine > fine.txt`,
        ),
      },
    ]);
    const result = await termorch(["run", file], { socket });
    expect(result.exitCode, result.stderr).toBe(0);
    const prompt = readFileSync(seen, "utf8");
    expect(blockOf(prompt).secrets).toEqual(["creds.txt"]);
    expect(prompt).not.toContain("k-0123456789-secret");
    const t = readReport(dir).tasks[0]!;
    expect(t.attempt_history![0]!.work_ref).toBeNull();
    const repo = join(dir, "repo");
    expect(git(repo, ["log", "--all", "-p"])).not.toContain("k-0123456789-secret");
  });

  it("a link the agent left where the next feedback goes is not followed", async () => {
    const { dir } = workspace();
    const outside = join(dir, "outside");
    mkdirSync(outside);
    const file = writeAssignments(dir, [
      {
        id: "planted",
        retries: 1,
        expect_changes: true,
        command: agent(`ln -s ${outside} "$TERMORCH_ARTIFACTS_DIR/attempt-2"; exit 1`, "echo ok > ok.txt"),
      },
    ]);
    const result = await termorch(["run", file], { socket });
    expect(result.exitCode, result.stderr).toBe(0);
    expect(readdirSync(outside)).toEqual([]);
    const kept = join(dir, "artifacts", "planted", "attempt-2");
    expect(lstatSync(kept).isDirectory()).toBe(true);
    expect(readFileSync(join(kept, "feedback.md"), "utf8")).toContain("## What went wrong in attempt 1");
  });

  it('retry_from "base": the failed work is kept at its ref, and the retry starts without it', async () => {
    const { dir } = workspace();
    const seen = join(dir, "seen.txt");
    const file = writeAssignments(dir, [
      {
        id: "fresh",
        retries: 1,
        retry_from: "base",
        expect_changes: true,
        command: agent(
          "echo half > part.txt; exit 1",
          `(test -e part.txt && echo present || echo absent) > ${seen}; echo ok > ok.txt`,
        ),
      },
    ]);
    const result = await termorch(["run", file, "--keep-branches"], { socket });
    expect(result.exitCode, result.stderr).toBe(0);
    expect(readFileSync(seen, "utf8")).toBe("absent\n");
    const t = readReport(dir).tasks[0]!;
    expect(t.attempt_history![1]!.started_from).toBe("base");
    expect(git(join(dir, "repo"), ["show", `${t.attempt_history![0]!.work_ref}:part.txt`])).toBe("half");
    expect(existsSync(join(dir, "repo", "part.txt"))).toBe(false);
  });
});
