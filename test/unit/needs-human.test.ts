import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Writable } from "node:stream";
import { afterAll, describe, expect, it } from "vitest";
import { main } from "../../src/cli/main.js";
import { LedgerEntry } from "../../src/contract/ledger-events.js";
import { NotifyConfig, NotifyEvent } from "../../src/contract/notify.js";
import { TaskReport } from "../../src/contract/report.js";
import type { StatusFile } from "../../src/contract/status.js";
import { StatusView } from "../../src/contract/status-view.js";
import type { TaskJournal } from "../../src/fs/run-state-file.js";
import type { StatusFiles } from "../../src/fs/status-files.js";
import type { Ledger } from "../../src/ledger/ledger.js";
import { parseCursor, readChanges, taskSummary } from "../../src/mcp/follow.js";
import { Notifier } from "../../src/notify/notifier.js";
import { statusView } from "../../src/ops/status.js";
import { Redactor } from "../../src/redact/redactor.js";
import { taskReport } from "../../src/report/build.js";
import { TaskRecorder } from "../../src/task/recorder.js";
import { newTaskRun, type TaskRun } from "../../src/task/task-run.js";
import { frame } from "../../src/watch/model.js";
import { taskLine } from "../../src/watch/plain.js";
import { runStateFixture } from "../fixtures/run-state.js";

// A task whose agent decided `blocked` and asked for a person (routing.recommended_next_actor
// "human"): the recorder marks it, and every view says so: its status file and the ledger, the
// report, notify, status (text and JSON), watch (dashboard and plain lines), MCP wait.

const REASON = "the staging database password is not in the environment";

/** A recorder that keeps what it wrote: status files, ledger events and failed tasks. */
function recorded() {
  const status: StatusFile[] = [];
  const ledger: { type: string; data: Record<string, unknown> }[] = [];
  const failed: TaskRun[] = [];
  const recorder = new TaskRecorder(
    {
      runId: "r1",
      interactive: () => false,
      ledger: {
        append: async (type: string, data: Record<string, unknown>) => {
          LedgerEntry.parse({ type, data });
          ledger.push({ type, data });
        },
      } as unknown as Ledger,
      journal: { write: () => {} } as unknown as TaskJournal,
      status: { set: (s: StatusFile) => void status.push(s) } as unknown as StatusFiles,
      redactor: Redactor.from([], []),
      listeners: {
        taskFailed: (t) => void failed.push({ ...t }),
        taskWaitingInput: () => {},
        changed: () => {},
      },
      now: () => 5_000,
      socket: "s",
    },
    [newTaskRun("A", "x", [], ["true"])],
  );
  return { recorder, status, ledger, failed };
}

/** A finished task that ended blocked, asking for a person. */
function blockedTask(): TaskRun {
  return {
    ...newTaskRun("A", "claude", [], ["claude"]),
    state: "failed",
    reason: "blocked",
    detail: REASON,
    attempts: 1,
    startedAt: 1_000,
    finishedAt: 5_000,
    needsHuman: true,
  };
}

const dir = mkdtempSync(join(tmpdir(), "termorch-needs-human-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("a blocked task that needs a person", () => {
  it("is marked by the recorder: its status file, the ledger and the failure listener say so; running again clears it", async () => {
    const { recorder, status, ledger, failed } = recorded();
    await recorder.transition("A", { to: "running" });
    await recorder.transition("A", { to: "failed", reason: "blocked", detail: REASON, needsHuman: true });
    expect(status.at(-1)).toMatchObject({
      state: "failed",
      reason: "blocked",
      detail: REASON,
      needs_human: true,
    });
    expect(ledger.at(-1)).toMatchObject({
      type: "task.failed",
      data: { needs_human: true, reason: "blocked" },
    });
    expect(failed.map((t) => t.needsHuman)).toEqual([true]);
    // A redo runs it again: it no longer needs anyone, and its files stop saying so.
    await recorder.transition("A", { to: "running" });
    expect(recorder.get("A").needsHuman).toBe(false);
    await recorder.transition("A", { to: "failed", reason: "blocked", detail: "another" });
    expect(status.at(-1)).not.toHaveProperty("needs_human");
    expect(recorder.get("A").needsHuman).toBe(false);
  });

  it("is named in the report (and only such a task is)", () => {
    const report = TaskReport.parse(taskReport(blockedTask(), "stderr"));
    expect(report).toMatchObject({ status: "failed", reason: "blocked", detail: REASON, needs_human: true });
    const plain = taskReport({ ...blockedTask(), needsHuman: false }, "stderr");
    expect(plain).not.toHaveProperty("needs_human");
  });

  it("is notified: task.failed, then task.needs_human with the agent's reason; each filtered by the config's events", async () => {
    const sent = async (events?: string[]): Promise<NotifyEvent[]> => {
      const got: NotifyEvent[] = [];
      const n = new Notifier({
        config: NotifyConfig.parse({ command: ["notify"], ...(events ? { events } : {}) }),
        runId: "r1",
        runDir: "/runs/r1",
        redactor: Redactor.from([], []),
        now: () => 0,
        deliver: async (_event, line) => {
          got.push(NotifyEvent.parse(JSON.parse(line)));
          return null;
        },
        onFailure: () => {},
      });
      const t = blockedTask();
      n.taskFailed(t);
      n.taskFailed({ ...t, id: "B", needsHuman: false });
      await n.drained();
      return got;
    };
    const all = await sent();
    expect(all.map((e) => [e.event, "task_id" in e ? e.task_id : null])).toEqual([
      ["task.failed", "A"],
      ["task.needs_human", "A"],
      ["task.failed", "B"],
    ]);
    expect(all[1]).toMatchObject({ reason: REASON, attempts: 1 });
    expect((await sent(["task.needs_human"])).map((e) => e.event)).toEqual(["task.needs_human"]);
    expect((await sent(["task.failed"])).map((e) => e.event)).toEqual(["task.failed", "task.failed"]);
  });

  it("is shown by status (JSON and text), watch (dashboard and plain lines) and MCP wait", async () => {
    const runDir = join(dir, "run");
    mkdirSync(join(runDir, "status"), { recursive: true });
    const other: TaskRun = {
      ...blockedTask(),
      id: "B",
      reason: "exit_code",
      detail: "exit 1",
      needsHuman: false,
    };
    const state = runStateFixture(runDir, {
      phase: "reported",
      pid: 2 ** 22 + 12345,
      // No tmux server of that name: no sessions.
      socket: `termorch-unit-needs-human-${process.pid}`,
      socket_path: join(runDir, "no-socket"),
      tasks: [blockedTask(), other],
    });
    writeFileSync(join(runDir, "state.json"), JSON.stringify(state));
    const view = StatusView.parse(
      await statusView(
        [{ runId: "r1", runDir, state, entry: null, problem: null, siblingRepo: null }],
        () => new Map(),
        10_000,
      ),
    );
    const [a, b] = view.runs[0]!.tasks;
    expect(a).toMatchObject({ id: "A", state: "failed", reason: "blocked", needs_human: true });
    expect(b!.needs_human).toBe(false);

    // MCP wait: who needs a person, with the agent's reason.
    expect(taskSummary(view.runs[0]!).needs_human).toEqual([{ task: "A", reason: REASON }]);

    // watch: the title counts them, the task's line says it instead of its last log line.
    const screen = frame({
      view,
      selected: null,
      offset: 0,
      width: 160,
      height: 24,
      now: 10_000,
      scope: "r1",
      message: null,
      keys: [],
    });
    const text = screen.lines.map((l) => l.map((s) => s.text).join(""));
    expect(text[0]).toContain("1 need a person");
    expect(text.find((l) => l.includes(" A "))).toContain(`needs a person: ${REASON}`);
    expect(text.find((l) => l.includes(" B "))).not.toContain("needs a person");
    expect(taskLine(view.runs[0]!, a!, view.generated_at)).toMatch(/ reason blocked needs_human$/);
    expect(taskLine(view.runs[0]!, b!, view.generated_at)).not.toContain("needs_human");

    // status, as an operator reads it.
    let out = "";
    const stdout = new Writable({
      write(chunk, _encoding, done) {
        out += String(chunk);
        done();
      },
    });
    const code = await main(["node", "termorch", "status", runDir], {
      stdout,
      stderr: stdout,
      env: { PATH: process.env.PATH, HOME: process.env.HOME, TMPDIR: dir },
      cwd: dir,
    });
    expect(code, out).toBe(0);
    expect(out).toContain(`  A: blocked, needs a person: ${REASON}\n`);
    expect(out).not.toContain("B: blocked");
  });

  it("is told by MCP wait's changes: the task's end says needs_human", async () => {
    const runDir = mkdtempSync(join(dir, "ledger-"));
    const line = (seq: number, data: Record<string, unknown>, task: string): string =>
      `${JSON.stringify({ schema_version: 1, seq, ts: "2026-11-27T00:00:00Z", type: "task.failed", task_id: task, data, prev: "0".repeat(64), hash: "f".repeat(64) })}\n`;
    writeFileSync(
      join(runDir, "events.jsonl"),
      line(0, { state: "failed", reason: "blocked", detail: REASON, needs_human: true }, "A") +
        line(1, { state: "failed", reason: "exit_code", detail: "exit 1" }, "B"),
    );
    expect((await readChanges(runDir, parseCursor(undefined))).changes).toEqual([
      {
        event: "task_ended",
        at: "2026-11-27T00:00:00Z",
        task: "A",
        state: "failed",
        reason: "blocked",
        detail: REASON,
        needs_human: true,
      },
      {
        event: "task_ended",
        at: "2026-11-27T00:00:00Z",
        task: "B",
        state: "failed",
        reason: "exit_code",
        detail: "exit 1",
      },
    ]);
  });
});
