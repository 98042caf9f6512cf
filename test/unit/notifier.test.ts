import { describe, expect, it } from "vitest";
import { NotifyConfig, NotifyEvent } from "../../src/contract/notify.js";
import { Notifier, type NotifyDelivery, type NotifyFailure } from "../../src/notify/notifier.js";
import { Redactor } from "../../src/redact/redactor.js";

const SECRET = "unit-secret-7d1e93b0";
const T0 = Date.parse("2026-01-02T03:04:05.000Z");

function notifier(
  deliver: NotifyDelivery,
  config: object = { command: ["notify"] },
): { n: Notifier; failures: NotifyFailure[] } {
  const failures: NotifyFailure[] = [];
  const n = new Notifier({
    config: NotifyConfig.parse(config),
    runId: "r1",
    runDir: "/runs/r1",
    redactor: Redactor.from([], [SECRET]),
    now: () => T0,
    deliver,
    onFailure: (f) => failures.push(f),
  });
  return { n, failures };
}

describe("Notifier", () => {
  it("sends task.waiting_input with since and what is asked, in the event schema", async () => {
    const lines: string[] = [];
    const { n } = notifier(async (_event, line) => {
      lines.push(line);
      return null;
    });
    n.taskWaitingInput("t1", T0 - 30_000, "Claude Code asks whether to trust this folder");
    await n.drained();
    expect(lines.map((l) => NotifyEvent.parse(JSON.parse(l)))).toEqual([
      {
        event: "task.waiting_input",
        schema_version: 1,
        run_id: "r1",
        run_dir: "/runs/r1",
        time: "2026-01-02T03:04:05.000Z",
        task_id: "t1",
        since: "2026-01-02T03:03:35.000Z",
        asks: "Claude Code asks whether to trust this folder",
      },
    ]);
  });

  it("delivers one event at a time, in order, each redacted", async () => {
    const log: string[] = [];
    let release!: () => void;
    const first = new Promise<void>((r) => (release = r));
    const { n } = notifier(async (event) => {
      log.push(`start ${event.event}`);
      if (event.event === "task.failed") await first;
      log.push(`end ${event.event}`);
      return null;
    });
    n.taskFailed({ id: "a", reason: "exit_code", detail: `token ${SECRET} leaked`, attempts: 2 });
    n.taskWaitingInput("b", T0, null);
    await new Promise((r) => setImmediate(r));
    expect(log).toEqual(["start task.failed"]);
    release();
    await n.drained();
    expect(log).toEqual([
      "start task.failed",
      "end task.failed",
      "start task.waiting_input",
      "end task.waiting_input",
    ]);
    const seen: NotifyEvent[] = [];
    const other = notifier(async (event) => {
      seen.push(event);
      return null;
    }).n;
    other.taskFailed({ id: "a", reason: "exit_code", detail: `token ${SECRET} leaked`, attempts: 2 });
    await other.drained();
    expect(JSON.stringify(seen)).not.toContain(SECRET);
    expect(seen[0]).toMatchObject({ detail: "token [REDACTED] leaked", attempts: 2 });
  });

  it("sends only the configured events", async () => {
    const seen: string[] = [];
    const { n } = notifier(
      async (event) => {
        seen.push(event.event);
        return null;
      },
      { command: ["notify"], events: ["task.waiting_input"] },
    );
    n.taskFailed({ id: "a", reason: "timeout", detail: null, attempts: 1 });
    n.taskWaitingInput("a", T0, null);
    await n.drained();
    expect(seen).toEqual(["task.waiting_input"]);
  });

  it("reports a failed or throwing delivery, redacted, and goes on with the next event", async () => {
    const seen: string[] = [];
    const { n, failures } = notifier(async (event) => {
      seen.push(event.event);
      if (event.event === "task.failed") return { kind: "failed", detail: `exited with code 3: ${SECRET}` };
      throw new Error("broken");
    });
    n.taskFailed({ id: "a", reason: "timeout", detail: null, attempts: 1 });
    n.taskWaitingInput("a", T0, null);
    await n.drained();
    expect(seen).toEqual(["task.failed", "task.waiting_input"]);
    expect(failures).toEqual([
      { event: "task.failed", task_id: "a", kind: "failed", detail: "exited with code 3: [REDACTED]" },
      { event: "task.waiting_input", task_id: "a", kind: "failed", detail: "broken" },
    ]);
  });
});
