import stringWidth from "string-width";
import { describe, expect, it } from "vitest";
import type { StatusView, TaskView } from "../../src/contract/status-view.js";
import { Board } from "../../src/watch/board.js";
import { clip } from "../../src/watch/model.js";

function task(id: string): TaskView {
  return {
    id,
    agent: "step",
    state: "running",
    reason: null,
    detail: null,
    attempts: 1,
    exit_code: null,
    started_at: "2026-11-23T00:00:00.000Z",
    finished_at: null,
    elapsed_ms: 1000,
    duration_ms: null,
    last_line: null,
    logs: null,
    session: `termorch-r-${id}`,
    session_exists: true,
    session_live: true,
    attach: null,
    waiting_since: null,
    waiting_for: null,
    waiting_quota_until: null,
    waiting_approval: null,
    waiting_answers: [],
    remote: null,
    wave: 1,
    usage: null,
    attempt_history: [],
    needs_human: false,
    redo: null,
  };
}

const view: StatusView = {
  schema_version: 1,
  generated_at: "2026-11-23T00:00:01.000Z",
  problems: [],
  queued: [],
  runs: [
    {
      run_id: "r",
      run_dir: "/tmp/r",
      phase: "running",
      pid: 1,
      budget: null,
      driver_alive: true,
      started_at: "2026-11-23T00:00:00.000Z",
      updated_at: "2026-11-23T00:00:01.000Z",
      workspace: "/tmp/r/repo",
      socket: "s",
      socket_path: "/tmp/s",
      report: null,
      exit_code: null,
      hint: null,
      notices: [],
      merge: null,
      tasks: [task("A"), task("B"), task("C")],
    },
  ],
};

/** A feed that never changes: the board's keys are pure logic over one view. */
function board(): Board {
  return new Board(
    { current: () => view, subscribe: () => () => {}, refresh: () => {} },
    { env: {}, cwd: "/", scope: "test", now: () => Date.parse(view.generated_at) },
  );
}

describe("watch's board", () => {
  it("takes each of several keys that arrived in one read (a held key, fast typing over SSH)", () => {
    const b = board();
    expect(b.key({ input: "jj" }, 24)).toBeNull();
    expect(b.key({ input: "", return: true }, 24)).toEqual({ kind: "attach", key: { run: "r", task: "C" } });
    b.close();

    const c = board();
    expect(c.key({ input: "j\r" }, 24)).toEqual({ kind: "attach", key: { run: "r", task: "B" } });
    c.close();
  });
});

describe("watch's clip", () => {
  it("counts terminal columns: wide characters never make a line longer than the screen", () => {
    for (const text of [
      "漢字".repeat(40),
      `${"x".repeat(20)}é漢字😀${"y".repeat(40)}`,
      "✅ done 🚀".repeat(10),
    ]) {
      const line = clip(text, 30);
      expect(stringWidth(line), line).toBe(30);
      expect(line.trimEnd().endsWith("…")).toBe(true);
    }
    expect(clip("short", 10)).toBe("short     ");
    expect(clip("a\u001b[2Jb", 10, false)).toBe("a [2Jb");
  });
});
