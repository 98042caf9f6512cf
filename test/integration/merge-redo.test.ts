import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { execa } from "execa";
import { describe, expect, it } from "vitest";
import { ConflictBlock } from "../../src/contract/conflict-block.js";
import { NotifyEvent } from "../../src/contract/notify.js";
import type { Report } from "../../src/contract/report.js";
import { StatusView, type TaskView } from "../../src/contract/status-view.js";
import { parseCursor, readChanges, taskSummary } from "../../src/mcp/follow.js";
import { frame } from "../../src/watch/model.js";
import { describeWith } from "../needs.js";
import {
  BIN,
  cliEnv,
  git,
  lastAnswer,
  lines as logLines,
  ROOT,
  readReport,
  termorch,
  testFile,
  waitFor,
  writeAssignments,
} from "./harness.js";

const { socket, workspace } = testFile("merge-redo");
const RESOLVE = join(import.meta.dirname, "..", "fixtures", "agents", "resolve.mjs");
const RECORD = join(ROOT, "test", "fixtures", "notify", "record.sh");

type Edit =
  | { set: string; line: number; text: string }
  | { append: string; text: string }
  | { rename: string; to: string }
  | { delete: string }
  | { write: string; text: string };

/** A task of the resolve stand-in: its edits, and how it resolves a conflict. */
const task = (id: string, edits: Edit[], extra: Record<string, unknown> = {}) => {
  const { env, ...rest } = extra as { env?: Record<string, string> };
  return {
    id,
    agent: "resolve",
    command: ["node", RESOLVE],
    env: { EDITS: JSON.stringify(edits), ...env },
    ...rest,
  };
};

/** A repository whose first commit also holds `files`. */
function repoWith(files: Record<string, string>) {
  const ws = workspace();
  for (const [name, text] of Object.entries(files)) writeFileSync(join(ws.repo, name), text);
  git(ws.repo, "add", "-A");
  git(ws.repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "files");
  return ws;
}

const lines = (n: number, prefix = "line") =>
  Array.from({ length: n }, (_, i) => `${prefix}${i + 1}\n`).join("");

type Ran = { exitCode: number; report: Report; repo: string; dir: string };

async function runBoth(
  files: Record<string, string>,
  tasks: ReturnType<typeof task>[],
  testsCmd: string,
  merge: Record<string, unknown> = {},
): Promise<Record<"halt" | "redo", Ran>> {
  return runIn(["halt", "redo"], files, tasks, testsCmd, merge);
}

/**
 * A run with on_conflict "redo" only: what halt would report for the same shape (the conflict
 * and its tasks) is checkMerge's, asserted in git-merge.test without a run.
 */
async function runRedo(files: Record<string, string>, tasks: ReturnType<typeof task>[], testsCmd: string) {
  return (await runIn(["redo"], files, tasks, testsCmd, {})).redo;
}

async function runIn<M extends "halt" | "redo">(
  modes: readonly M[],
  files: Record<string, string>,
  tasks: ReturnType<typeof task>[],
  testsCmd: string,
  merge: Record<string, unknown>,
): Promise<Record<M, Ran>> {
  const out = {} as Record<M, Ran>;
  for (const mode of modes) {
    const { dir, repo } = repoWith(files);
    const file = writeAssignments(dir, tasks as never, {
      success_criteria: { tests_cmd: testsCmd },
      mode: { merge: { on_conflict: mode, ...merge } },
    });
    const r = await termorch(["run", file], { socket });
    out[mode] = { exitCode: r.exitCode, report: readReport(dir), repo, dir };
  }
  return out;
}

const show = (repo: string, path: string) => readFileSync(join(repo, path), "utf8");

describe("merge.on_conflict", () => {
  it("same lines: halt reports the pair; redo runs the later task again on top of the earlier and merges both", async () => {
    const r = await runBoth(
      { "f.txt": lines(3) },
      [task("A", [{ set: "f.txt", line: 2, text: "A" }]), task("B", [{ set: "f.txt", line: 2, text: "B" }])],
      "grep -qx A f.txt && grep -qx B f.txt",
    );
    expect(r.halt.exitCode).toBe(3);
    expect(r.halt.report.merge).toMatchObject({ result: "conflict", on_conflict: "halt", redone: [] });
    expect(r.halt.report.merge.conflicts).toEqual([
      { tasks: ["A", "B"], files: ["f.txt"], detail: "B conflicts with A: content in f.txt" },
    ]);

    const { report, repo, dir } = r.redo;
    expect(r.redo.exitCode).toBe(0);
    expect(report.merge).toMatchObject({ result: "success", on_conflict: "redo", conflicts: [] });
    expect(report.summary.validation).toBe("passed");
    expect(show(repo, "f.txt")).toBe("line1\nA\nB\nline3\n");
    expect(git(repo, "rev-parse", "HEAD").trim()).toBe(report.merge.result_commit);
    expect(report.merge.redone).toHaveLength(1);
    const redo = report.merge.redone[0]!;
    const b = report.tasks.find((t) => t.id === "B")!;
    expect(redo).toMatchObject({
      task: "B",
      redo: 1,
      attempt: 2,
      conflicted_with: ["A"],
      files: ["f.txt"],
      outcome: "resolved",
      commit: b.commit,
      conflict_section: "artifacts/B/redo-1/conflict.md",
    });
    expect(b).toMatchObject({ status: "success", attempts: 2 });
    // Its attempt record is closed, saying where it started and what it was told.
    expect(b.attempt_history!.map((h) => [h.n, h.started_from, h.feedback, h.reason])).toEqual([
      [1, null, null, null],
      [2, "integration", "artifacts/B/redo-1/conflict.md", null],
    ]);
    expect(b.attempt_history!.every((h) => h.finished_at !== null)).toBe(true);
    // The redo started from A's result; its earlier result is superseded, and no ref keeps it.
    expect(redo.start_commit).toBe(report.tasks.find((t) => t.id === "A")!.commit);
    expect(git(repo, "for-each-ref", "refs/termorch/")).toBe("");
    // Its prompt carried the conflict: A's hunk, its own earlier one, the block for tools.
    const prompt = readFileSync(join(dir, "artifacts", "B", "prompt.md"), "utf8");
    expect(prompt).toContain("## Your earlier work conflicts with what was merged before it");
    expect(prompt).toContain("+A\n");
    expect(prompt).toContain("+B\n");
    // The block holds the same facts, hunks included, in the documented schema.
    const block = ConflictBlock.parse(
      JSON.parse(/```json termorch-conflict\n([\s\S]*?)\n```/.exec(prompt)![1]!),
    );
    expect(block).toMatchObject({
      schema_version: 1,
      task: "B",
      redo: 1,
      of: 1,
      before_commit: redo.before_commit,
      start_commit: redo.start_commit,
      merged_before: ["A"],
      files: ["f.txt"],
      conflicts: [{ kind: "content", paths: ["f.txt"], with: ["A"] }],
      others: [{ task: "A", changes: [{ status: "M", path: "f.txt" }], handoff: null }],
      own_diff: { file: "artifacts/B/redo-1/before.patch", truncated: false },
      previous: [],
    });
    expect(block.hunks.theirs).toMatchObject({ truncated: false, see: expect.stringMatching(/^git diff /) });
    expect(block.hunks.theirs.diff).toMatch(/^-line2\n\+A$/m);
    expect(block.hunks.yours.diff).toMatch(/^-line2\n\+B$/m);
    const schema = JSON.parse((await termorch(["schema", "conflict-block"], { socket })).stdout);
    expect(Object.keys(schema.properties)).toEqual(Object.keys(block));
    expect(existsSync(join(dir, "artifacts", "B", "redo-1", "before.patch"))).toBe(true);
    const events = readFileSync(join(dir, "events.jsonl"), "utf8");
    expect(events).toContain('"merge.redo_started"');
    expect(events).toContain('"merge.redo_finished"');
  });

  it("an edit against a rename: a rename alone merges with no redo; a rename that changed the same line redoes the edit in the renamed file", async () => {
    const base = { "config.txt": lines(8, "key") };
    const pure = await runRedo(
      base,
      [
        task("A", [{ rename: "config.txt", to: "settings.txt" }]),
        task("B", [{ set: "config.txt", line: 5, text: "B5" }]),
      ],
      "grep -qx B5 settings.txt",
    );
    expect(pure.exitCode).toBe(0);
    expect(pure.report.merge.redone).toEqual([]);
    expect(show(pure.repo, "settings.txt")).toContain("B5\n");

    const r = await runRedo(
      base,
      [
        task("A", [
          { rename: "config.txt", to: "settings.txt" },
          { set: "settings.txt", line: 1, text: "A1" },
        ]),
        task("B", [{ set: "config.txt", line: 1, text: "B1" }]),
      ],
      "test ! -e config.txt && grep -qx A1 settings.txt && grep -qx B1 settings.txt",
    );
    expect(r.exitCode).toBe(0);
    expect(r.report.merge.redone).toMatchObject([{ task: "B", conflicted_with: ["A"], outcome: "resolved" }]);
    expect(existsSync(join(r.repo, "config.txt"))).toBe(false);
    expect(show(r.repo, "settings.txt")).toMatch(/^A1\nB1\nkey2\n/);
  });

  it("a delete against a modify: the modifying task's change lands in the file that replaced the deleted one", async () => {
    const r = await runRedo(
      { "legacy.cfg": "old=1\nold=2\n" },
      [
        task("A", [{ delete: "legacy.cfg" }, { write: "app.cfg", text: "new=1" }]),
        task("B", [{ append: "legacy.cfg", text: "b=1" }]),
      ],
      "test ! -e legacy.cfg && grep -qx new=1 app.cfg && grep -qx b=1 app.cfg",
    );
    expect(r.exitCode).toBe(0);
    expect(r.report.merge.redone).toMatchObject([
      { task: "B", files: ["legacy.cfg"], conflicted_with: ["A"], outcome: "resolved" },
    ]);
    expect(existsSync(join(r.repo, "legacy.cfg"))).toBe(false);
    expect(show(r.repo, "app.cfg")).toBe("new=1\nb=1\n");
  });

  it("three deep: a redone task's dependents are replayed on its new result, and one that now conflicts is redone too", async () => {
    // c1 -> c2 -> c3; b0 (no dependencies) merges before c1 and conflicts with it. c2 changed
    // c1's line, so on top of c1's resolution it conflicts too; c3 only added a file.
    const r = await runRedo(
      { "chain.txt": lines(6) },
      [
        task("b0", [{ set: "chain.txt", line: 2, text: "b0" }]),
        task("c1", [{ set: "chain.txt", line: 2, text: "c1" }]),
        task("c2", [{ set: "chain.txt", line: 2, text: "c1 c2" }], { dependencies: ["c1"] }),
        task("c3", [{ write: "c3.txt", text: "c3" }], { dependencies: ["c2"] }),
      ],
      "grep -qx b0 chain.txt && grep -qx 'c1 c2' chain.txt && grep -qx c3 c3.txt",
    );
    expect(r.report.merge.order).toEqual(["b0", "c1", "c2", "c3"]);
    expect(r.exitCode).toBe(0);
    expect(r.report.merge.redone.map((x) => [x.task, x.conflicted_with, x.outcome])).toEqual([
      ["c1", ["b0"], "resolved"],
      ["c2", ["b0", "c1"], "resolved"],
    ]);
    expect(r.report.summary.validation).toBe("passed");
    expect(show(r.repo, "c3.txt")).toBe("c3\n");
    // c3 was not run again: its own work was replayed on c2's new result.
    expect(r.report.tasks.find((t) => t.id === "c3")).toMatchObject({ attempts: 1 });
    const c2 = r.report.merge.redone[1]!;
    expect(c2.start_commit).not.toBe(r.report.merge.redone[0]!.start_commit);
    // The history: c3 was replayed onto c2's redo, so c1's and c2's first results stay in it as
    // its ancestors. No two task commits read alike: each says its attempt (and a redo which).
    const commits = git(r.repo, "log", "--format=%H%x00%s%x00%(trailers:only,unfold)%x01", "HEAD")
      .split("\x01")
      .map((c) => c.trim().split("\0"))
      .filter((c) => c[2]?.includes("Termorch-Task:"));
    const subject = (task: string, attempt: string) =>
      `termorch: task ${task} (agent resolve, run ${r.report.run_id}, attempt ${attempt})`;
    expect(commits.map((c) => c[1]!).sort()).toEqual([
      subject("b0", "1"),
      subject("c1", "1"),
      subject("c1", "2: redo 1 of its conflict with b0"),
      subject("c2", "1"),
      subject("c2", "2: redo 1 of its conflict with b0, c1"),
      subject("c3", "1"),
    ]);
    for (const [, subject, trailers] of commits)
      expect(trailers).toContain(`Termorch-Attempt: ${/attempt (\d+)/.exec(subject!)![1]}`);
    // The integration says which tasks were redone, and why their earlier results are still there.
    const integration = git(r.repo, "log", "-1", "--format=%B", r.report.merge.result_commit!);
    expect(integration.split("\n")[0]).toBe(`termorch: integrate run ${r.report.run_id} (c1, c2 redone)`);
    expect(integration).toMatch(/^- c2 \(attempt 2: redo 1 of its conflict with b0, c1, [0-9a-f]{12}\)$/m);
    expect(integration).toMatch(
      /^c1 was redone: its attempt 1 \([0-9a-f]{12}\) conflicted with b0 in chain\.txt; its attempt 2 is merged\. Its attempt 1 \([0-9a-f]{12}\) stays in this history as the start of c3, /m,
    );
    expect(integration).toContain("Termorch-Redone: c1, c2");
  });

  it("a wrong resolution is stopped by the task's gate: its earlier result is put back and the run halts as halt would", async () => {
    const { dir, repo } = repoWith({ "f.txt": lines(3) });
    const file = writeAssignments(
      dir,
      [
        task("A", [{ set: "f.txt", line: 2, text: "A" }]),
        task("B", [{ set: "f.txt", line: 2, text: "B" }], {
          env: { RESOLVE: "wrong" },
          // On a redo, what merged before it must still be there.
          success_criteria: {
            tests_cmd: 'grep -qx B f.txt && { [ "$TERMORCH_ATTEMPT" = 1 ] || grep -qx A f.txt; }',
          },
        }),
      ] as never,
      { mode: { merge: { on_conflict: "redo" } } },
    );
    const head = git(repo, "rev-parse", "HEAD");
    const r = await termorch(["run", file], { socket });
    expect(r.exitCode).toBe(3);
    const report = readReport(dir);
    const b = report.tasks.find((t) => t.id === "B")!;
    expect(report.merge).toMatchObject({ result: "conflict", result_commit: null });
    expect(report.merge.reason).toMatch(
      /^B's redo did not resolve its conflict with A \(redo 1\/1: validation/,
    );
    expect(report.merge.conflicts).toEqual([
      { tasks: ["A", "B"], files: ["f.txt"], detail: "B conflicts with A: content in f.txt" },
    ]);
    const [redo] = report.merge.redone;
    expect(redo).toMatchObject({ task: "B", outcome: "failed", reason: "validation" });
    expect(redo!.gates.find((g) => g.name === "tests_cmd")).toMatchObject({ passed: false });
    // Its earlier result is back, on its branch too; the user's branch is untouched.
    expect(b).toMatchObject({ status: "success", commit: redo!.before_commit, attempts: 2 });
    expect(git(repo, "rev-parse", `termorch/${report.run_id}/B`).trim()).toBe(redo!.before_commit);
    expect(git(repo, "rev-parse", "HEAD")).toBe(head);
    expect(git(repo, "status", "--porcelain")).toBe("");
    expect(readFileSync(join(dir, "artifacts", "B", "changes.patch"), "utf8")).toContain("+B");
  });

  it("redo_attempts 2: a first wrong redo is followed by a second, told why the first failed", async () => {
    const { dir, repo } = repoWith({ "f.txt": lines(3) });
    const file = writeAssignments(
      dir,
      [
        task("A", [{ set: "f.txt", line: 2, text: "A" }]),
        task("B", [{ set: "f.txt", line: 2, text: "B" }], {
          env: { RESOLVE: "wrong@2" },
          success_criteria: {
            tests_cmd: 'grep -qx B f.txt && { [ "$TERMORCH_ATTEMPT" = 1 ] || grep -qx A f.txt; }',
          },
        }),
      ] as never,
      { mode: { merge: { on_conflict: "redo", redo_attempts: 2 } } },
    );
    const r = await termorch(["run", file], { socket });
    expect(r.exitCode).toBe(0);
    const report = readReport(dir);
    expect(report.merge.redone.map((x) => [x.redo, x.attempt, x.outcome])).toEqual([
      [1, 2, "failed"],
      [2, 3, "resolved"],
    ]);
    expect(show(repo, "f.txt")).toBe("line1\nA\nB\nline3\n");
    const second = readFileSync(join(dir, "artifacts", "B", "redo-2", "conflict.md"), "utf8");
    expect(second).toContain("### Your earlier redos that failed");
    expect(second).toMatch(/- Redo 1: validation/);
  });

  it("halt writes artifacts/redo/<task>.json for each conflicting task; running it redoes the task on top of what merged, and merges", async () => {
    const { dir, repo } = repoWith({ "f.txt": lines(3) });
    const file = writeAssignments(
      dir,
      [
        task("A", [{ set: "f.txt", line: 2, text: "A" }]),
        task("B", [{ set: "f.txt", line: 2, text: "B" }], { env: { API_TOKEN: "s3cr3t-value-of-B" } }),
        task("C", [{ write: "c.txt", text: "C" }]),
        task("D", [{ append: "f.txt", text: "D" }], { dependencies: ["B"] }),
      ] as never,
      { success_criteria: { tests_cmd: "grep -qx A f.txt && grep -qx B f.txt && grep -qx C c.txt" } },
    );
    const head = git(repo, "rev-parse", "HEAD").trim();
    const config = join(dir, "termorch.json");
    writeFileSync(config, JSON.stringify({ notify: { command: ["bash", RECORD, join(dir, "events.log")] } }));
    const first = await termorch(["run", file, "--config", config], { socket });
    expect(first.exitCode).toBe(3);
    const halted = readReport(dir);
    expect(halted.merge.redo_assignments).toEqual(["artifacts/redo/B.json"]);
    // The halt says what to run: the file, its conflict, and the command line itself.
    const redoFile = join(dir, "artifacts", "redo", "B.json");
    const command = `termorch run ${redoFile} --out ${join(dir, "redo-B")}`;
    expect(first.stderr).toContain(
      `  to redo B on top of what merged cleanly (its conflict: ${join(dir, "artifacts", "redo", "B.md")}):\n    ${command}\n`,
    );
    const step = {
      task: "B",
      assignments: redoFile,
      conflict: join(dir, "artifacts", "redo", "B.md"),
      command,
    };
    // So do the notification of its end and MCP wait's merge change, read from the ledger it wrote.
    const finished = logLines(join(dir, "events.log"))
      .map((l) => NotifyEvent.parse(JSON.parse(l)))
      .at(-1);
    expect(finished).toMatchObject({ event: "run.finished", redo: [step] });
    const { changes } = await readChanges(dir, parseCursor(undefined));
    expect(changes.find((c) => c.event === "merge")).toMatchObject({ result: "conflict", redo: [step] });
    expect(git(repo, "rev-parse", "HEAD").trim()).toBe(head);
    const doc = JSON.parse(readFileSync(redoFile, "utf8"));
    // B, and D that carries it; A and C merged cleanly and are in the start.
    expect(doc.tasks.map((t: { id: string }) => t.id)).toEqual(["B", "D"]);
    expect(doc.tasks[0]).toMatchObject({ dependencies: [], conflict_file: "B.md" });
    expect(doc.tasks[1]).toMatchObject({ dependencies: ["B"] });
    expect(doc.environment.workspace_dir).toBe(repo);
    // The secret's value is no file's: its name passes through from the environment.
    expect(readFileSync(redoFile, "utf8")).not.toContain("s3cr3t");
    expect(doc.tasks[0].env.API_TOKEN).toBeUndefined();
    expect(doc.environment.env_vars).toContain("API_TOKEN");
    const start = doc.tasks[0].start_commit as string;
    expect(git(repo, "show", `${start}:f.txt`)).toBe("line1\nA\nline3\n");
    expect(git(repo, "show", `${start}:c.txt`)).toBe("C\n");
    const section = readFileSync(join(dir, "artifacts", "redo", "B.md"), "utf8");
    const block = ConflictBlock.parse(
      JSON.parse(/```json termorch-conflict\n([\s\S]*?)\n```/.exec(section)![1]!),
    );
    // As a redo's block has them: git's kind and the paths (not the report's sentence).
    expect(block.conflicts.map((c) => [c.kind, c.paths])).toEqual([
      ["content", ["f.txt"]],
      ["content", ["f.txt"]],
    ]);
    expect(block.conflicts[0]!.with).toEqual(["A"]);
    expect(block.hunks.yours.diff).toMatch(/^\+B$/m);

    // The line it printed, as it is.
    const [program, ...args] = command.split(" ");
    expect(program).toBe("termorch");
    const again = await termorch(args, { socket, env: { API_TOKEN: "s3cr3t-value-of-B" } });
    expect(again.exitCode).toBe(0);
    const second = readReport(join(dir, "redo-B"));
    expect(second.merge).toMatchObject({ result: "success", redone: [] });
    expect(show(repo, "f.txt")).toBe("line1\nA\nB\nline3\nD\n");
    expect(show(repo, "c.txt")).toBe("C\n");
    // Its start is held by main now: clean of the halted run drops the ref that kept it.
    expect(git(repo, "for-each-ref", "--format=%(refname)", "refs/termorch/")).toBe(
      `refs/termorch/${halted.run_id}/redo-base\n`,
    );
    expect((await termorch(["clean", halted.run_id!], { socket })).exitCode).toBe(0);
    expect(git(repo, "for-each-ref", "refs/termorch/")).toBe("");
  });

  it('refuses "redo" with workers (backend bullmq), before anything starts (exit 2)', async () => {
    const { dir, repo } = repoWith({ "f.txt": lines(3) });
    const config = join(dir, "config.json");
    writeFileSync(config, JSON.stringify({ backend: "bullmq", redis: "redis://127.0.0.1:1" }));
    const file = writeAssignments(dir, [task("A", [{ set: "f.txt", line: 1, text: "A" }])] as never, {
      mode: { merge: { on_conflict: "redo" } },
    });
    for (const command of ["validate", "run"]) {
      const r = await termorch([command, file, "--config", config], { socket });
      expect(r.exitCode).toBe(2);
      expect(r.stderr).toContain(
        'field mode.merge.on_conflict: on_conflict "redo" is not supported with backend bullmq',
      );
    }
    expect(existsSync(join(dir, "state.json"))).toBe(false);
    expect(git(repo, "branch", "--list", "termorch/*")).toBe("");
  });

  it("refuses a start_commit that is not a commit of the repository, or shares no history with HEAD (exit 2, nothing started)", async () => {
    const { dir, repo } = repoWith({ "f.txt": lines(3) });
    const orphan = git(
      repo,
      "commit-tree",
      git(repo, "rev-parse", "HEAD^{tree}").trim(),
      "-m",
      "orphan",
    ).trim();
    const file = writeAssignments(dir, [
      task("A", [{ set: "f.txt", line: 1, text: "A" }], { start_commit: "0".repeat(40) }),
      task("B", [{ set: "f.txt", line: 1, text: "B" }], { start_commit: orphan }),
    ] as never);
    const r = await termorch(["validate", file], { socket });
    expect(r.exitCode).toBe(2);
    expect(r.stderr).toContain("tasks[0].start_commit");
    expect(r.stderr).toContain("is not a commit of the repository");
    expect(r.stderr).toContain("shares no history with HEAD");
    const run = await termorch(["run", file], { socket });
    expect(run.exitCode).toBe(2);
    expect(git(repo, "branch", "--list", "termorch/*")).toBe("");
  });

  it("a redo under way is shown by status, watch and report.html", async () => {
    const { dir } = repoWith({ "f.txt": lines(3) });
    const release = join(dir, "release");
    const file = writeAssignments(
      dir,
      [
        task("A", [{ set: "f.txt", line: 2, text: "A" }]),
        task("B", [{ set: "f.txt", line: 2, text: "B" }], { env: { HOLD: release } }),
      ] as never,
      { mode: { merge: { on_conflict: "redo" } } },
    );
    const runId = JSON.parse(readFileSync(file, "utf8")).run_id as string;
    const run = termorch(["run", file], { socket });
    // Polled through the CLI, as an operator would: bounded, then the view is asserted.
    const taskB = async (): Promise<TaskView | null> => {
      const r = await termorch(["status", runId, "--json"], { socket });
      // Not registered yet: exit 2.
      if (r.exitCode !== 0) return null;
      return StatusView.parse(JSON.parse(r.stdout)).runs[0]?.tasks.find((t) => t.id === "B") ?? null;
    };
    let b = await lastAnswer(taskB, (t) => t !== null, 30_000);
    // `watch | cat` from before the redo: it prints a line for each state the task goes through.
    const watch = execa(process.execPath, [BIN, "watch", runId], {
      reject: false,
      cwd: ROOT,
      env: cliEnv(socket),
      stdin: "ignore",
    });
    let out = "";
    watch.stdout?.on("data", (d: Buffer) => {
      out += d.toString();
    });
    // Its redo's attempt started (its agent holds on): attempt 2.
    const redoing = (t: TaskView | null): boolean => t?.state === "redo" && t.attempts === 2;
    b = await lastAnswer(taskB, redoing, 30_000);
    // One state: `redo` in the JSON, its redo's facts beside it; running again, so not finished.
    expect(b).toMatchObject({
      state: "redo",
      redo: { n: 1, of: 1, with: ["A"], files: ["f.txt"] },
      finished_at: null,
      exit_code: null,
    });
    const human = (await termorch(["status", runId], { socket })).stdout;
    expect(human).toMatch(/^ {2}B +redo +- +2 /m);
    expect(human).toContain("B: redo 1/1, its result conflicted with A in f.txt");
    await waitFor(
      () => out.includes(`${runId} B redo wave 1 attempt 2 redo 1/1 with A`),
      20_000,
      "watch's redo line",
    );
    // Its time is when the redo began, not the task's first start.
    expect(out).toContain(`${b!.redo!.started_at} ${runId} B redo wave 1 attempt 2`);
    expect(Date.parse(b!.redo!.started_at!)).toBeGreaterThan(Date.parse(b!.started_at!));
    // The dashboard's title and MCP wait count it as what it is, from the same view.
    const view = StatusView.parse(
      JSON.parse((await termorch(["status", runId, "--json"], { socket })).stdout),
    );
    const title = frame({
      view,
      selected: null,
      offset: 0,
      width: 120,
      height: 10,
      now: Date.now(),
      scope: runId,
      message: null,
      keys: [],
    })
      .lines[0]!.map((seg) => seg.text)
      .join("");
    expect(title).toContain("0 running · 1 redo · 1 ok");
    expect(taskSummary(view.runs[0]!).tasks).toEqual({ success: 1, redo: 1 });
    writeFileSync(release, "");
    expect((await run).exitCode).toBe(0);
    expect((await watch).exitCode).toBe(0);
    const html = readFileSync(join(dir, "report.html"), "utf8");
    expect(html).toMatch(/data-task="B" data-attempt="1" data-outcome="conflicted"/);
    expect(html).toMatch(/data-task="B" data-attempt="2" data-outcome="success"[^>]*data-redo="1"/);
    expect(html).toContain("<h3>Redone</h3>");
  });
});

describeWith("bwrap", "test/integration/merge-redo.test.ts")("merge.on_conflict redo, sandboxed", () => {
  it("a sandboxed task is redone in its sandbox: it sees the new start's objects, and its resolution is merged", async () => {
    const { dir, repo } = repoWith({ "f.txt": lines(3) });
    const sandbox = { network: "none" };
    const file = writeAssignments(
      dir,
      [
        task("A", [{ set: "f.txt", line: 2, text: "A" }], { sandbox }),
        task("B", [{ set: "f.txt", line: 2, text: "B" }], { sandbox }),
      ] as never,
      {
        success_criteria: { tests_cmd: "grep -qx A f.txt && grep -qx B f.txt" },
        mode: { merge: { on_conflict: "redo" } },
      },
    );
    const r = await termorch(["run", file], { socket });
    expect(r.exitCode, r.stderr).toBe(0);
    const report = readReport(dir);
    expect(report.merge.redone).toMatchObject([{ task: "B", outcome: "resolved" }]);
    expect(show(repo, "f.txt")).toBe("line1\nA\nB\nline3\n");
    const launched = readFileSync(join(dir, "events.jsonl"), "utf8")
      .split("\n")
      .filter((l) => l.includes('"task.launched"') && l.includes('"task_id":"B"'));
    expect(launched).toHaveLength(2);
    for (const l of launched) expect(JSON.parse(l).data.sandbox).toEqual({ network: "none" });
  });
});
