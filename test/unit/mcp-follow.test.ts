import { appendFileSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { WaitOutput } from "../../src/contract/mcp.js";
import { MAX_CHANGES, parseCursor, readChanges } from "../../src/mcp/follow.js";
import { TOOLS } from "../../src/mcp/tools.js";
import { runStateFixture } from "../fixtures/run-state.js";

const dir = mkdtempSync(join(tmpdir(), "termorch-follow-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** A ledger line (the chain's hashes are not checked by a reader that follows). */
const line = (seq: number, type: string, data: Record<string, unknown>, task?: string): string =>
  `${JSON.stringify({ schema_version: 1, seq, ts: `2026-11-27T00:00:${String(seq % 60).padStart(2, "0")}Z`, type, ...(task ? { task_id: task } : {}), data, prev: "0".repeat(64), hash: "f".repeat(64) })}\n`;

describe("readChanges (wait's reading of a run's ledger from a cursor)", () => {
  it("answers a long ledger in pieces, each cursor where the last stopped, and never half a line", async () => {
    const ledger = join(dir, "events.jsonl");
    writeFileSync(ledger, line(0, "run.accepted", { tasks: [] }));
    for (let i = 1; i <= 250; i++) appendFileSync(ledger, line(i, "task.launched", { attempt: 1 }, `t${i}`));
    // The driver is writing the next line.
    appendFileSync(ledger, line(251, "report.written", { exit_code: 0, failed_tasks: [] }).slice(0, 40));
    const first = await readChanges(dir, parseCursor(undefined));
    expect(first.changes).toHaveLength(MAX_CHANGES);
    expect(first.changes[0]).toMatchObject({ event: "run_started" });
    expect(first.more).toBe(true);
    const second = await readChanges(dir, first.cursor);
    expect(second.changes).toHaveLength(251 - MAX_CHANGES);
    // Half a line is not more to read: it is the line being written.
    expect(second.more).toBe(false);
    expect(second.changes.at(-1)).toMatchObject({ event: "task_started", task: "t250" });
    expect(second.cursor.seq).toBe(250);
    // Once the line is whole it is read, and only it.
    appendFileSync(ledger, line(251, "report.written", { exit_code: 0, failed_tasks: [] }).slice(40));
    const third = await readChanges(dir, second.cursor);
    expect(third.changes).toEqual([
      { event: "run_finished", at: expect.any(String), exit_code: 0, failed_tasks: [] },
    ]);
    // A ledger shorter than the cursor is another run's: read from its start.
    writeFileSync(ledger, line(0, "run.accepted", { tasks: [{ id: "x", agent: "a", dependencies: [] }] }));
    expect((await readChanges(dir, third.cursor)).changes).toEqual([
      { event: "run_started", at: expect.any(String), tasks: 1 },
    ]);
  });

  it("tells a redo: the task's conflict and the redo's outcome", async () => {
    const sub = mkdtempSync(join(dir, "redo-"));
    writeFileSync(
      join(sub, "events.jsonl"),
      line(0, "merge.redo_started", { redo: 1, attempt: 2, conflicted_with: ["A"], files: ["f.txt"] }, "B") +
        line(1, "merge.redo_finished", { redo: 1, attempt: 2, outcome: "failed", reason: "validation" }, "B"),
    );
    expect((await readChanges(sub, parseCursor(undefined))).changes).toEqual([
      {
        event: "task_redo_started",
        at: expect.any(String),
        task: "B",
        cause: "conflict",
        attempt: 2,
        redo: 1,
        conflicted_with: ["A"],
        files: ["f.txt"],
      },
      {
        event: "task_redo_finished",
        at: expect.any(String),
        task: "B",
        cause: "conflict",
        redo: 1,
        outcome: "failed",
        reason: "validation",
      },
    ]);
  });
});

describe("wait on a finished run whose ledger is longer than one answer", () => {
  it("says finished only with the answer that reaches the ledger's end, run_finished in it", async () => {
    const runDir = mkdtempSync(join(dir, "long-"));
    mkdirSync(join(runDir, "status"));
    const state = runStateFixture(runDir, {
      phase: "reported",
      pid: 2 ** 22 + 12345,
      // No tmux server of that name: no sessions.
      socket: `termorch-unit-follow-${process.pid}`,
      socket_path: join(runDir, "no-socket"),
    });
    writeFileSync(join(runDir, "state.json"), JSON.stringify(state));
    const ledger = join(runDir, "events.jsonl");
    writeFileSync(ledger, line(0, "run.accepted", { tasks: [] }));
    for (let i = 1; i <= 250; i++) appendFileSync(ledger, line(i, "task.launched", { attempt: 1 }, `t${i}`));
    appendFileSync(ledger, line(251, "report.written", { exit_code: 0, failed_tasks: [] }));
    const wait = TOOLS.find((t) => t.name === "wait")!;
    const call = {
      env: { ...process.env, XDG_STATE_HOME: join(runDir, "state-home") },
      cwd: runDir,
      home: null,
      signal: new AbortController().signal,
      progress: async () => {},
    };
    const answer = async (cursor?: string) =>
      WaitOutput.parse(
        await wait.call({ run: runDir, timeout_s: 1, ...(cursor ? { cursor } : {}) } as never, call),
      );
    const first = await answer();
    expect(first).toMatchObject({ phase: "reported", finished: false });
    expect(first.changes).toHaveLength(MAX_CHANGES);
    const second = await answer(first.cursor);
    expect(second).toMatchObject({ phase: "reported", finished: true, timed_out: false });
    expect(second.changes.at(-1)).toMatchObject({ event: "run_finished", exit_code: 0 });
  });
});
