import { appendFileSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import type { RunState, TaskRun } from "../../src/contract/state.js";
import { readRunStateFile, TaskJournal } from "../../src/fs/run-state-file.js";
import { newTaskRun } from "../../src/task/task-run.js";
import { runStateFixture } from "../fixtures/run-state.js";

const dir = mkdtempSync(join(tmpdir(), "termorch-journal-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function runState(runDir: string, tasks: TaskRun[], journal: string | null): RunState {
  return runStateFixture(runDir, { waves: [["A", "B"]], tasks, task_journal: journal });
}

describe("state.json with the task journal", () => {
  it("takes each task's last journal line over state.json's copy, and ignores a torn line", () => {
    const runDir = mkdtempSync(join(dir, "run-"));
    const journalPath = join(runDir, "tasks.jsonl");
    const a = newTaskRun("A", "x", [], ["true"]);
    const b = newTaskRun("B", "x", [], ["true"]);
    writeFileSync(join(runDir, "state.json"), JSON.stringify(runState(runDir, [a, b], journalPath)));

    const journal = new TaskJournal(journalPath);
    journal.write({ ...a, state: "running", attempts: 1 });
    journal.write({ ...a, state: "success", attempts: 1, exitCode: 0 });
    journal.close();
    // A crash in the middle of the next append leaves half a line.
    appendFileSync(journalPath, '{"id":"B","state":"runn');

    const read = readRunStateFile(runDir);
    if (!read.ok) throw new Error(read.problem);
    expect(read.state.tasks.map((t) => [t.id, t.state])).toEqual([
      ["A", "success"],
      ["B", "pending"],
    ]);

    // The next process ends the torn line before writing, so its own line stands.
    const again = new TaskJournal(journalPath);
    again.write({ ...b, state: "running", attempts: 1 });
    again.close();
    const after = readRunStateFile(runDir);
    if (!after.ok) throw new Error(after.problem);
    expect(after.state.tasks.map((t) => [t.id, t.state])).toEqual([
      ["A", "success"],
      ["B", "running"],
    ]);
  });

  it("reads a reported run's state.json as it is", () => {
    const runDir = mkdtempSync(join(dir, "run-"));
    const a = { ...newTaskRun("A", "x", [], ["true"]), state: "success" as const };
    writeFileSync(
      join(runDir, "state.json"),
      JSON.stringify({ ...runState(runDir, [a], null), phase: "reported" }),
    );
    const read = readRunStateFile(runDir);
    expect(read.ok && read.state.tasks[0]?.state).toBe("success");
    expect(readRunStateFile(join(dir, "nowhere"))).toMatchObject({ ok: false, problem: "missing" });
  });
});
