import {
  appendFileSync,
  mkdtempSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import type { RunState, TaskRun } from "../../src/contract/state.js";
import { JournalReader, JournalReaders, readRunStateFile, TaskJournal } from "../../src/fs/run-state-file.js";
import { newTaskRun } from "../../src/task/task-run.js";
import { flatTaskRun } from "../fixtures/flat-task-run.js";
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
    journal.write({ ...a, state: "success", attempts: 1, result: { ...a.result, exitCode: 0 } });
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

describe("a live view's readers (JournalReaders)", () => {
  it("parse state.json again only when it was replaced, while the journal's moves still show", () => {
    const runDir = mkdtempSync(join(dir, "run-"));
    const journalPath = join(runDir, "tasks.jsonl");
    const a = newTaskRun("A", "x", [], ["true"]);
    const b = newTaskRun("B", "x", [], ["true"]);
    const statePath = join(runDir, "state.json");
    writeFileSync(statePath, JSON.stringify(runState(runDir, [a, b], journalPath)));
    const readers = new JournalReaders();
    const read = (): RunState => {
      const r = readRunStateFile(runDir, readers);
      if (!r.ok) throw new Error(r.problem);
      return r.state;
    };

    const first = read();
    const journal = new TaskJournal(journalPath);
    journal.write({ ...a, state: "running", attempts: 1 });
    const second = read();
    // The same parse of state.json under the journal's newer task.
    expect(second.tasks.map((t) => t.state)).toEqual(["running", "pending"]);
    expect(second.tasks[1]).toBe(first.tasks[1]);

    // Replaced (as the driver's atomic write does): read again.
    const replaced = `${statePath}.new`;
    writeFileSync(replaced, JSON.stringify({ ...runState(runDir, [a, b], journalPath), pid: 4242 }));
    renameSync(replaced, statePath);
    expect(read().pid).toBe(4242);
    journal.close();

    // A run gone from view is forgotten.
    readers.keepOnly(new Set(), new Set());
    expect(readers.keptState(statePath, statSync(statePath))).toBeUndefined();
  });
});

describe("a journal read as it grows (JournalReader)", () => {
  it("parses only what was appended since its last read, a line only once it is whole, and a replaced journal from its start", () => {
    const path = join(mkdtempSync(join(dir, "grow-")), "tasks.jsonl");
    const a = newTaskRun("A", "x", [], ["true"]);
    const reader = new JournalReader(path);
    expect(reader.read().size).toBe(0);
    const journal = new TaskJournal(path);
    journal.write({ ...a, state: "running", attempts: 1 });
    expect(reader.read().get("A")?.state).toBe("running");
    // Half of the next line: not taken yet; taken once its end is written.
    const line = `${JSON.stringify({ ...a, state: "success", attempts: 1 })}\n`;
    appendFileSync(path, line.slice(0, 20));
    expect(reader.read().get("A")?.state).toBe("running");
    appendFileSync(path, line.slice(20));
    expect(reader.read().get("A")?.state).toBe("success");
    // What was read is not parsed again: its last line changed in place (same length) stays as read.
    const text = readFileSync(path, "utf8");
    writeFileSync(path, text.replace('"success"', '"skipped"'));
    expect(reader.read().get("A")?.state).toBe("success");
    // A shorter file is another journal: read from its start.
    writeFileSync(path, `${JSON.stringify({ ...a, state: "failed", attempts: 2 })}\n`);
    expect(reader.read().get("A")?.state).toBe("failed");
    journal.close();
  });
});

describe("state.json and the task journal of an earlier version (flat task records)", () => {
  const grouped = (): TaskRun => ({
    ...newTaskRun("A", "x", [], ["true"]),
    state: "running",
    attempts: 2,
    startedAt: 10,
    git: {
      branch: "termorch/r1/A",
      startCommit: "a".repeat(40),
      commit: null,
      refsCreated: ["refs/x"],
      controls: [],
    },
    current: {
      agentIndex: 1,
      dir: "/run/.termorch/tasks/A/2",
      startedAt: 20,
      session: "termorch-r1-A",
      usage: null,
    },
    waiting: {
      since: 30,
      for: "a question",
      answers: [],
      stateFrom: "screen",
      quotaUntil: null,
      approval: null,
    },
    result: {
      exitCode: null,
      logs: { stdout: "logs/A.out", stderr: "logs/A.err" },
      artifacts: [],
      gates: [],
      agentResult: null,
      usage: null,
    },
  });

  it("reads a flat record of state.json and of the journal into the groups", () => {
    const runDir = mkdtempSync(join(dir, "run-"));
    const journalPath = join(runDir, "tasks.jsonl");
    const a = grouped();
    const b = { ...newTaskRun("B", "x", ["A"], ["true"]), git: { ...a.git, branch: "termorch/r1/B" } };
    const state = { ...runState(runDir, [], journalPath), tasks: [flatTaskRun(a), flatTaskRun(b)] };
    writeFileSync(join(runDir, "state.json"), JSON.stringify(state));
    writeFileSync(journalPath, `${JSON.stringify(flatTaskRun({ ...a, attempts: 3 }))}\n`);

    const read = readRunStateFile(runDir);
    if (!read.ok) throw new Error(read.problem);
    expect(read.state.tasks).toEqual([{ ...a, attempts: 3 }, b]);
  });

  it("reads a flat record without the fields added later with their defaults", () => {
    const runDir = mkdtempSync(join(dir, "run-"));
    const {
      refsCreated: _r,
      gitControls: _g,
      agentIndex: _i,
      waitingSince: _s,
      waitingFor: _f,
      waitingAnswers: _w,
      stateFrom: _b,
      agentResult: _a,
      usage: _u,
      redo: _d,
      redone: _e,
      hosts: _h,
      history: _y,
      next: _n,
      needsHuman: _m,
      ...oldest
    } = flatTaskRun(grouped());
    writeFileSync(
      join(runDir, "state.json"),
      JSON.stringify({ ...runState(runDir, [], null), tasks: [oldest] }),
    );
    const read = readRunStateFile(runDir);
    if (!read.ok) throw new Error(read.problem);
    expect(read.state.tasks[0]).toEqual({
      ...grouped(),
      git: { ...grouped().git, refsCreated: [] },
      current: { ...grouped().current, agentIndex: 0 },
      waiting: { since: null, for: null, answers: [], stateFrom: null, quotaUntil: null, approval: null },
    });
  });

  it("names the file and the field of a record it cannot read", () => {
    const runDir = mkdtempSync(join(dir, "run-"));
    const broken = { ...flatTaskRun(grouped()), attempts: "two" };
    writeFileSync(
      join(runDir, "state.json"),
      JSON.stringify({ ...runState(runDir, [], null), tasks: [broken] }),
    );
    const read = readRunStateFile(runDir);
    expect(read).toMatchObject({ ok: false, path: join(runDir, "state.json") });
    expect(read.ok ? "" : read.problem).toMatch(/^unreadable: tasks\.0\.attempts: /);
  });
});
