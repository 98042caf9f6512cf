import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import {
  filesContaining,
  git,
  listFiles,
  readReport,
  termorch,
  testFile,
  writeAssignments,
} from "./harness.js";

const { socket, workspace } = testFile("secrets-gate");

const SECRET = "tok-5e1c7a0b9d2f4e68";
/** Passed to the agents as a secret (its name has TOKEN in it), as the campaign's canary is. */
const ENV = { environment: { workspace_dir: "repo", env_vars: ["API_TOKEN"] } };

/** Runs one task whose agent is the bash `script`, beside a well-behaved task. */
async function runAgent(script: string, extra: Record<string, unknown> = {}) {
  const ws = workspace();
  const file = writeAssignments(
    ws.dir,
    [
      { id: "agent", command: ["bash", "-c", script], ...extra },
      { id: "good", env: { WRITE: "good.txt=fine" } },
    ],
    ENV,
  );
  const result = await termorch(["run", file], { socket, env: { API_TOKEN: SECRET } });
  const report = readReport(ws.dir);
  const task = report.tasks.find((t) => t.id === "agent")!;
  return { ...ws, result, report, task };
}

/**
 * Every file termorch wrote under `dir` (the run directory; the repository is the agent's and
 * git's) whose content or path holds the secret.
 */
function leaks(dir: string): string[] {
  const ours = (f: string): boolean => f !== "assignments.json" && !f.startsWith("repo/");
  return [
    ...filesContaining(dir, SECRET).filter(ours),
    ...listFiles(dir).filter((f) => ours(f) && f.includes(SECRET)),
  ];
}

describe("the secrets gate", () => {
  it("fails a task whose changes hold a secret in a file, before termorch commits anything", async () => {
    const { dir, repo, result, report, task } = await runAgent(
      'echo "token=$API_TOKEN" > leak.txt; echo fine > other.txt',
    );
    expect(result.exitCode).toBe(1);
    expect(task).toMatchObject({ status: "failed", reason: "validation" });
    expect(task.detail).toBe(
      "its changes hold the value of a secret environment variable, in: leak.txt; nothing was committed (remove the secret from the task's output, or stop passing it to the agent)",
    );
    expect(task.gates.find((g) => g.name === "secrets")).toMatchObject({ required: true, passed: false });
    expect(task.gates.find((g) => g.name === "commit")).toBeUndefined();
    // No commit of termorch's holds it: the task branch is still at the start commit.
    expect(git(repo, "rev-parse", task.branch!).trim()).toBe(git(repo, "rev-parse", "main").trim());
    expect(task.commit ?? null).toBeNull();
    expect(report.merge.result).toBe("skipped");
    expect(report.tasks.find((t) => t.id === "good")).toMatchObject({ status: "success" });
    expect(leaks(dir)).toEqual([]);
  });

  it("names a file whose name holds a secret redacted, and sees link targets and the agent's own commit messages", async () => {
    const named = await runAgent('echo innocent > "name-$API_TOKEN.txt"');
    expect(named.task).toMatchObject({ status: "failed", reason: "validation" });
    expect(named.task.detail).toContain("in: name-[REDACTED].txt (its name);");
    expect(leaks(named.dir)).toEqual([]);

    const link = await runAgent('ln -s "/nowhere/$API_TOKEN" link');
    expect(link.task).toMatchObject({ status: "failed", reason: "validation" });
    expect(link.task.detail).toContain("in: link;");

    const message = await runAgent('echo x > a.txt && git add a.txt && git commit -qm "uses $API_TOKEN"');
    expect(message.task).toMatchObject({ status: "failed", reason: "validation" });
    expect(message.task.detail).toContain("in: a commit message of the agent's;");
    expect(leaks(message.dir)).toEqual([]);
  });

  it("finds a secret deep in a large file, and lets a task without one through", async () => {
    // 20 MiB of filler, then the secret across the gate's first 8 MiB chunk boundary and beyond.
    const big = await runAgent(
      'head -c $((8 * 1024 * 1024 - 5)) /dev/zero | tr "\\0" a > big.txt; printf "%s\\n" "$API_TOKEN" >> big.txt; head -c 12000000 /dev/zero | tr "\\0" b >> big.txt',
    );
    expect(big.task).toMatchObject({ status: "failed", reason: "validation" });
    expect(big.task.detail).toContain("in: big.txt;");

    // A token format in a fixture is not the run's secret: the gate passes it (logs still redact it).
    const clean = await runAgent('echo "ghp_abcdefghijklmnopqrstuvwxyz0123456789" > fixture.txt');
    expect(clean.result.exitCode).toBe(0);
    expect(clean.task.gates.find((g) => g.name === "secrets")).toMatchObject({
      passed: true,
      detail: "no secret value in its changes",
    });
  });
});

describe("secrets in what a task hands over", () => {
  /** The agent writes a.txt, then its handoff quoting the secret; `commit` commits the handoff too. */
  const handingOver = (commit: boolean) =>
    runAgent(
      [
        "echo a > a.txt",
        'printf "# Handoff\\n## Summary\\nCalled the API with %s.\\n## Files Touched\\n- a.txt\\n## How to Verify\\ncat a.txt\\n" "$API_TOKEN" > "$TERMORCH_HANDOFF"',
        ...(commit
          ? ['git add -A && git add -f "$TERMORCH_HANDOFF" && git commit -qm "a, and its handoff"']
          : []),
      ].join(" && "),
      {
        success_criteria: {
          handoff: true,
          // The kept copy is redacted as it is written: the gates after the handoff's see no secret there.
          tests_cmd:
            '! grep -qF "$API_TOKEN" "$TERMORCH_ARTIFACTS_DIR/handoff.md" && grep -q REDACTED "$TERMORCH_ARTIFACTS_DIR/handoff.md"',
        },
      },
    );

  it("a secret quoted in the handoff alone: the handoff is never committed and is kept redacted, so the task passes", async () => {
    const { dir, repo, result, task } = await handingOver(false);
    expect(result.exitCode, result.stderr).toBe(0);
    expect(task).toMatchObject({ status: "success" });
    expect(task.gates.find((g) => g.name === "secrets")).toMatchObject({ passed: true });
    expect(task.gates.find((g) => g.name === "handoff")).toMatchObject({ passed: true });
    expect(task.gates.find((g) => g.name === "tests_cmd")).toMatchObject({ passed: true });
    expect(readFileSync(join(dir, "artifacts", "agent", "handoff.md"), "utf8")).toContain(
      "Called the API with [REDACTED].",
    );
    // Neither the merged history nor any file termorch wrote holds it.
    expect(git(repo, "log", "-p", "--all")).not.toContain(SECRET);
    expect(git(repo, "show", "--name-only", "--format=", task.commit!).trim()).toBe("a.txt");
    expect(leaks(dir)).toEqual([]);
  });

  it("a handoff holding a secret that the agent committed itself is in its branch: the task fails", async () => {
    const { dir, task } = await handingOver(true);
    expect(task).toMatchObject({ status: "failed", reason: "validation" });
    expect(task.detail).toContain("in: .termorch/handoff.md (as the agent committed it);");
    expect(leaks(dir)).toEqual([]);
  });

  it("renames artifacts named after a secret, redacts a large artifact, and records no ref named after one", async () => {
    const { dir, repo, result, task } = await runAgent(
      [
        'echo x > "$TERMORCH_ARTIFACTS_DIR/name-$API_TOKEN.txt"',
        'mkdir "$TERMORCH_ARTIFACTS_DIR/dir-$API_TOKEN" && echo y > "$TERMORCH_ARTIFACTS_DIR/dir-$API_TOKEN/f"',
        // Larger than what is redacted in memory (64 MiB), the secret at its very end.
        '{ head -c $((65 * 1024 * 1024)) /dev/zero | tr "\\0" a; printf "\\n%s" "$API_TOKEN"; } > "$TERMORCH_ARTIFACTS_DIR/big.txt"',
        'git branch "leak-$API_TOKEN"',
        "echo changed > README.md",
      ].join("; "),
    );
    expect(result.exitCode).toBe(0);
    expect(task.status).toBe("success");
    const artifacts = join(dir, "artifacts", "agent");
    expect(readdirSync(artifacts).sort()).toEqual(
      ["big.txt", "changes.patch", "dir-[REDACTED]", "name-[REDACTED].txt", "prompt.md"].sort(),
    );
    expect(readFileSync(join(artifacts, "dir-[REDACTED]", "f"), "utf8")).toBe("y\n");
    expect(task.artifacts).toContain("artifacts/agent/name-[REDACTED].txt");
    const big = readFileSync(join(artifacts, "big.txt"));
    expect(big.subarray(big.length - 11).toString()).toBe("\n[REDACTED]");
    // The agent's branch stays the agent's (it is the user's repository), reported redacted.
    expect(git(repo, "branch", "--list", "leak-*").trim()).toBe(`leak-${SECRET}`);
    expect(existsSync(join(dir, "state.json"))).toBe(true);
    expect(leaks(dir)).toEqual([]);
    git(repo, "branch", "-D", `leak-${SECRET}`);
  });

  it("fails a task that checked out a branch named after a secret, and records that branch nowhere", async () => {
    const { dir, repo, task } = await runAgent(
      'git checkout -q -b "own-$API_TOKEN"; echo changed > README.md',
    );
    expect(task).toMatchObject({ status: "failed", reason: "validation" });
    expect(task.detail).toContain("in: the name of the branch it checked out;");
    const state = JSON.parse(readFileSync(join(dir, "state.json"), "utf8"));
    expect(state.tasks.find((t: { id: string }) => t.id === "agent").git.refsCreated).toEqual([]);
    expect(leaks(dir)).toEqual([]);
    // The agent's branch is left to the user (termorch deletes only what it recorded).
    expect(git(repo, "branch", "--list", "own-*").trim()).toMatch(/own-/);
  });
});
