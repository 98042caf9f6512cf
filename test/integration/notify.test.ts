// Notifications (config `notify`) through the built CLI: a command that records the events it
// is given, one that fails, and one that hangs past its timeout. Which events go out and how a
// failed delivery is recorded are the middle tier's (test/middle/notify.test.ts, notify-config.test.ts).
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { NotifyEvent } from "../../src/contract/notify.js";
import { lines, ROOT, readReport, running, termorch, testFile, writeAssignments } from "./harness.js";

const { socket, workspace } = testFile("notify");
const RECORD = join(ROOT, "test", "fixtures", "notify", "record.sh");
// Long, unlike anything termorch prints by itself.
const SECRET = "notify-secret-3f9a1c7e5d";

/** A config whose notify command records into `<dir>/events.log` (with `mode`). */
function config(dir: string, notify: Record<string, unknown> = {}, mode = "ok"): string {
  const file = join(dir, "termorch.json");
  writeFileSync(
    file,
    JSON.stringify({ notify: { command: ["bash", RECORD, join(dir, "events.log"), mode], ...notify } }),
  );
  return file;
}

const recorded = (dir: string): NotifyEvent[] =>
  lines(join(dir, "events.log")).map((line) => NotifyEvent.parse(JSON.parse(line)));

const ledger = (dir: string): Array<{ type: string; task_id?: string; data: Record<string, unknown> }> =>
  lines(join(dir, "events.jsonl")).map((line) => JSON.parse(line));

describe("notifications", () => {
  it("a run with a failing task sends task.failed, then run.finished with the report's summary, redacted", async () => {
    const { dir } = workspace();
    const file = writeAssignments(
      dir,
      [
        { id: "good", env: { TASK_ONLY: "x" } },
        // The program's path carries the secret: the task's detail quotes it.
        { id: "bad", command: [join(dir, SECRET, "no-such-agent")] },
      ],
      { environment: { env_vars: [`DEPLOY_TOKEN=${SECRET}`] } },
    );
    const result = await termorch(["run", file, "--config", config(dir)], { socket });
    expect(result.exitCode).toBe(1);
    const report = readReport(dir);
    const events = recorded(dir);
    expect(events.map((e) => e.event)).toEqual(["task.failed", "run.finished"]);
    const [failed, finished] = events;
    expect(failed).toMatchObject({
      event: "task.failed",
      schema_version: 1,
      run_id: report.run_id,
      run_dir: dir,
      task_id: "bad",
      reason: "launch_error",
      attempts: 1,
    });
    expect(failed?.event === "task.failed" && failed.detail).toContain("[REDACTED]");
    expect(Date.parse(failed!.time)).toBeGreaterThan(0);
    expect(finished).toMatchObject({
      event: "run.finished",
      run_id: report.run_id,
      exit_code: 1,
      summary: report.summary,
      error: null,
      report: join(dir, "execution_report.json"),
    });
    expect(report.summary.failed_tasks).toEqual(["bad"]);
    expect(readFileSync(join(dir, "events.log"), "utf8")).not.toContain(SECRET);
    // The run's environment, not a task's: the assignment's env_vars yes, a task's env and id no.
    expect(lines(join(dir, "events.log.env"))).toEqual([
      `event=task.failed run=${report.run_id} task=unset token=set only=unset`,
      `event=run.finished run=${report.run_id} task=unset token=set only=unset`,
    ]);
    expect(ledger(dir).filter((e) => e.type === "notify.failed")).toEqual([]);
  });

  it("a notify command that fails or cannot start changes nothing in the run, and is logged", async () => {
    const { dir } = workspace();
    const file = writeAssignments(dir, [{ id: "bad", env: { EXIT: "3" } }]);
    const result = await termorch(["run", file, "--config", config(dir, {}, "fail")], { socket });
    expect(result.exitCode).toBe(1);
    expect(readReport(dir).exit_code).toBe(1);
    expect(recorded(dir).map((e) => e.event)).toEqual(["task.failed", "run.finished"]);
    const failures = ledger(dir).filter((e) => e.type === "notify.failed");
    expect(failures.map((e) => [e.data.event, e.data.kind, e.task_id])).toEqual([
      ["task.failed", "failed", "bad"],
      ["run.finished", "failed", undefined],
    ]);
    expect(failures[0]?.data.detail).toContain("exited with code 3");
    expect(failures[0]?.data.detail).toContain("webhook refused the event");
    expect(result.stderr).toContain("notification failed");

    const other = workspace().dir;
    const ok = writeAssignments(other, [{ id: "good" }]);
    const missing = join(other, "termorch.json");
    writeFileSync(missing, JSON.stringify({ notify: { command: [join(other, "no-such-notifier")] } }));
    const started = await termorch(["run", ok, "--config", missing], { socket });
    expect(started.exitCode).toBe(0);
    expect(readReport(other).summary.completed).toBe(true);
    expect(ledger(other).filter((e) => e.type === "notify.failed")).toMatchObject([
      { data: { event: "run.finished", kind: "not_started", detail: expect.stringContaining("not found") } },
    ]);
    expect(started.stderr).toContain("notification failed");
  });

  it("the event's format and the config's notify are documented as JSON Schema", async () => {
    const event = await termorch(["schema", "notify-event"], { socket });
    expect(event.exitCode).toBe(0);
    const variants = JSON.parse(event.stdout).oneOf as Array<{
      properties: Record<string, { const?: string }>;
    }>;
    expect(variants.map((v) => v.properties.event?.const).sort()).toEqual([
      "run.budget_exhausted",
      "run.budget_warning",
      "run.finished",
      "run.waiting_approval",
      "task.failed",
      "task.needs_human",
      "task.waiting_approval",
      "task.waiting_input",
      "task.waiting_quota",
    ]);
    const finished = variants.find((v) => v.properties.event?.const === "run.finished")!;
    expect(Object.keys(finished.properties)).toEqual(
      expect.arrayContaining(["run_id", "time", "summary", "exit_code", "report", "error"]),
    );
    const cfg = await termorch(["schema", "config"], { socket });
    const notify = JSON.parse(cfg.stdout).properties.notify;
    expect(Object.keys(notify.properties).sort()).toEqual(["command", "events", "timeout_s"]);
    expect(notify.properties.timeout_s.default).toBe(10);
  });

  it("a notify command that hangs is killed with its process group at its timeout; the run's result stays", async () => {
    const { dir } = workspace();
    const file = writeAssignments(dir, [{ id: "good" }]);
    const before = Date.now();
    const result = await termorch(["run", file, "--config", config(dir, { timeout_s: 1 }, "hang")], {
      socket,
    });
    expect(result.exitCode).toBe(0);
    expect(Date.now() - before).toBeLessThan(30_000);
    expect(readReport(dir).summary.completed).toBe(true);
    expect(recorded(dir).map((e) => e.event)).toEqual(["run.finished"]);
    expect(ledger(dir).filter((e) => e.type === "notify.failed")).toMatchObject([
      { data: { event: "run.finished", kind: "timeout", detail: expect.stringContaining("within 1 s") } },
    ]);
    // The command's grandchild went with its group.
    const pid = Number(readFileSync(join(dir, "events.log.pid"), "utf8"));
    expect(existsSync(join(dir, "events.log.pid"))).toBe(true);
    expect(running(pid)).toBe(false);
  });
});
