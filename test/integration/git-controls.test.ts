import { existsSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { git, readReport, termorch, testFile, writeAssignments } from "./harness.js";

// Files an agent writes that steer git for whoever checks its result out (issue 35, item 4):
// named in the report and merged by default, refused with success_criteria.git_control_files.
const { socket, workspace } = testFile("git-controls");

const AGENT = [
  "bash",
  "-c",
  [
    "echo 'x filter=lfs' > .gitattributes",
    "mkdir -p .husky && printf '#!/bin/sh\\necho hook\\n' > .husky/pre-commit",
    "git init -q nested && git -C nested -c user.name=a -c user.email=a@a commit -q --allow-empty -m inner",
    "echo work > work.txt",
  ].join(" && "),
];

async function run(criteria: Record<string, unknown> | undefined) {
  const ws = workspace();
  const file = writeAssignments(
    ws.dir,
    [{ id: "t", command: AGENT }],
    criteria ? { success_criteria: criteria } : {},
  );
  const r = await termorch(["run", file], { socket });
  return { ws, r, task: readReport(ws.dir).tasks[0]!, report: readReport(ws.dir) };
}

const NAMED = [
  { path: ".gitattributes", kind: "attributes" },
  { path: ".husky/pre-commit", kind: "hooks" },
  { path: "nested", kind: "nested_repository" },
];

describe("files that steer git in a task's changes", () => {
  it("are named in the report and merged like any file by default", async () => {
    const { ws, r, task } = await run(undefined);
    expect(r.exitCode, r.stderr).toBe(0);
    expect(task.status).toBe("success");
    expect(task.git_control_files).toEqual(NAMED);
    expect(task.gates.find((g) => g.name === "git_control_files")).toMatchObject({
      required: false,
      passed: null,
      detail: expect.stringContaining(".gitattributes (attributes)"),
    });
    expect(existsSync(join(ws.repo, ".gitattributes"))).toBe(true);
  });

  it('fail the task\'s gate with success_criteria.git_control_files "refuse", and nothing is merged', async () => {
    const { ws, task, report } = await run({ git_control_files: "refuse" });
    expect(task).toMatchObject({
      status: "failed",
      reason: "validation",
      detail: expect.stringContaining('git_control_files is "refuse"'),
    });
    expect(task.git_control_files).toEqual(NAMED);
    expect(task.gates.find((g) => g.name === "git_control_files")).toMatchObject({
      required: true,
      passed: false,
    });
    expect(report.merge.result).not.toBe("success");
    expect(existsSync(join(ws.repo, ".gitattributes"))).toBe(false);
    expect(git(ws.repo, "ls-files")).not.toContain(".husky");
  });

  it("refused, a task without them passes its gate, which says so", async () => {
    const ws = workspace();
    const file = writeAssignments(ws.dir, [{ id: "t", env: { WRITE: "a.txt=a" } }], {
      success_criteria: { git_control_files: "refuse" },
    });
    const r = await termorch(["run", file], { socket });
    expect(r.exitCode, r.stderr).toBe(0);
    const task = readReport(ws.dir).tasks[0]!;
    expect(task.git_control_files).toBeUndefined();
    expect(task.gates.find((g) => g.name === "git_control_files")).toMatchObject({
      required: true,
      passed: true,
      detail: "none in its changes",
    });
  });
});
