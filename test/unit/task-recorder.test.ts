import { describe, expect, it } from "vitest";
import type { TaskJournal } from "../../src/fs/run-state-file.js";
import type { StatusFiles } from "../../src/fs/status-files.js";
import type { Ledger } from "../../src/ledger/ledger.js";
import { Redactor } from "../../src/redact/redactor.js";
import { TaskRecorder } from "../../src/task/recorder.js";
import { newTaskRun } from "../../src/task/task-run.js";

/** A recorder whose ledger, journal, status files and listeners write down what each was told, in order. */
function recorded() {
  const said: string[] = [];
  const recorder = new TaskRecorder(
    {
      runId: "r",
      interactive: () => true,
      ledger: { append: async (type: string) => void said.push(`ledger ${type}`) } as unknown as Ledger,
      journal: {
        write: (t: { state: string }) => void said.push(`journal ${t.state}`),
      } as unknown as TaskJournal,
      status: {
        set: (s: { state: string }) => void said.push(`status ${s.state}`),
      } as unknown as StatusFiles,
      redactor: Redactor.from([], ["hunter2"]),
      listeners: {
        taskFailed: (t) => void said.push(`failed ${t.id}`),
        taskWaitingInput: (id) => void said.push(`waiting ${id}`),
        changed: () => void said.push("changed"),
      },
      now: () => 1_000,
      socket: "s",
    },
    [newTaskRun("A", "x", [], ["true"])],
  );
  return { recorder, said };
}

describe("TaskRecorder", () => {
  it("tells of a change of state in the crash-safe order: ledger, journal, status file, then its listeners", async () => {
    const { recorder, said } = recorded();
    await recorder.transition("A", { to: "running" });
    await recorder.transition("A", { to: "failed", reason: "exit_code", detail: "exited with code 1" });
    expect(said).toEqual([
      "ledger task.running",
      "journal running",
      "status running",
      "changed",
      "ledger task.failed",
      "journal failed",
      "status failed",
      "failed A",
      "changed",
    ]);
    expect(recorder.get("A")).toMatchObject({ state: "failed", reason: "exit_code", finishedAt: 1_000 });
  });

  it("keeps notes in memory and writes a checkpoint to the journal alone", () => {
    const { recorder, said } = recorded();
    recorder.note("A", { attempts: 1 });
    expect(said).toEqual([]);
    recorder.checkpoint("A", { current: { dir: "/x/1" } });
    expect(said).toEqual(["journal pending"]);
    // A group's facts merge into it: the rest of the group stays.
    expect(recorder.get("A")).toMatchObject({ attempts: 1, current: { dir: "/x/1", agentIndex: 0 } });
  });

  it("marks an interactive task waiting and resumed, the wait notified once", async () => {
    const { recorder, said } = recorded();
    await recorder.transition("A", { to: "running" });
    said.length = 0;
    await recorder.markWaiting("A", 2_000, "a question");
    await recorder.markWaiting("A", null);
    expect(said).toEqual([
      "ledger task.waiting_input",
      "journal running",
      "status running",
      "waiting A",
      "changed",
      "ledger task.input_resumed",
      "journal running",
      "status running",
      "changed",
    ]);
    expect(recorder.get("A")).toMatchObject({ waiting: { since: null, for: null } });
  });
});
