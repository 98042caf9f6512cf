// Interactive tasks in the pipeline, with the fake runner's screens and fake timers: the prompt is
// pasted once the screen settles, waiting for input is marked (status, ledger, notification) and
// cleared, and `termorch finish` (its file) ends the agent as done.
import { appendFileSync, existsSync, mkdirSync, readFileSync, utimesSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it, vi } from "vitest";
import type { NotifyEvent } from "../../src/contract/notify.js";
import { finishFileOf, privateDirOf } from "../../src/fs/private-dir.js";
import { runAssignments } from "../../src/run/runner.js";
import { MiddleRun, middleTier } from "./harness.js";

let run: MiddleRun;

middleTier(() => run);

/** What `termorch finish <task>` leaves for the run's driver; returns its path. */
function requestFinish(taskId: string): string {
  const finish = finishFileOf(privateDirOf(run.dir, "middle"), taskId);
  mkdirSync(join(finish, ".."), { recursive: true });
  writeFileSync(finish, "{}");
  return finish;
}

/** The task's prompt as written (its context file, then termorch's sections): what is pasted. */
function promptOf(taskId: string): string {
  const prompt = readFileSync(join(run.dir, "artifacts", taskId, "prompt.md"), "utf8");
  expect(prompt).toMatch(/^# the task\n/);
  return prompt;
}

describe("interactive tasks in the pipeline", () => {
  it("paste the prompt once the screen settles, mark waiting and its end, and end as done on finish", async () => {
    run = new MiddleRun([{ id: "a", interactive: true, waiting_after_s: 5 }], {
      config: { notify: { command: ["never-run"] } },
    });
    const events: NotifyEvent[] = [];
    const done = runAssignments({
      assignmentsFile: run.file,
      ...run.options({
        seams: {
          notify: async (e) => {
            events.push(e);
            return null;
          },
        },
      }),
    });
    const a = await run.host.launched("a");
    expect(a.spec.tty).toBe(true);
    expect(a.spec.stdin).toBeUndefined();
    // Nothing drawn: no paste.
    await vi.advanceTimersByTimeAsync(2000);
    expect(a.pasted).toEqual([]);
    a.screen = "stub> ";
    await vi.advanceTimersByTimeAsync(1000);
    expect(a.pasted).toEqual([promptOf("a")]);

    a.screen = "stub> # the task\nQuestion?";
    await vi.advanceTimersByTimeAsync(6000);
    const status = JSON.parse(readFileSync(join(run.dir, "status", "a.running"), "utf8"));
    expect(status).toMatchObject({ waiting_input: true });
    expect(Date.parse(status.waiting_since)).toBeGreaterThan(0);
    expect(events.map((e) => e.event)).toEqual(["task.waiting_input"]);

    a.screen += "\nyes";
    await vi.advanceTimersByTimeAsync(1000);
    expect(JSON.parse(readFileSync(join(run.dir, "status", "a.running"), "utf8"))).toMatchObject({
      waiting_input: false,
      waiting_since: null,
    });

    const finish = requestFinish("a");
    await vi.advanceTimersByTimeAsync(1000);
    expect(a.stops).toHaveLength(1);
    const report = run.report(await done);
    expect(report.tasks[0]).toMatchObject({ id: "a", status: "success" });
    expect(existsSync(finish)).toBe(false);
    const types = readFileSync(join(run.dir, "events.jsonl"), "utf8")
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l).type as string);
    expect(types).toEqual(
      expect.arrayContaining([
        "task.prompt_pasted",
        "task.waiting_input",
        "task.input_resumed",
        "task.finish_requested",
      ]),
    );
  });

  it("an interactive task stopped by its timeout fails as timed out, not done", async () => {
    run = new MiddleRun([{ id: "a", interactive: true, timeout_s: 3 }]);
    const done = runAssignments({ assignmentsFile: run.file, ...run.options() });
    const a = await run.host.launched("a");
    a.screen = "stub> ";
    await vi.advanceTimersByTimeAsync(4000);
    expect(a.pasted).toHaveLength(1);
    const report = run.report(await done);
    expect(report.tasks[0]).toMatchObject({ id: "a", status: "failed", reason: "timeout" });
  });

  it("a done_when file appearing in the worktree ends the agent and counts the task as done", async () => {
    run = new MiddleRun([{ id: "a", interactive: true, done_when: "out/done.flag", waiting_after_s: 600 }]);
    const done = runAssignments({ assignmentsFile: run.file, ...run.options() });
    const a = await run.host.launched("a");
    a.screen = "stub> ";
    await vi.advanceTimersByTimeAsync(3000);
    expect(a.pasted).toEqual([promptOf("a")]);
    expect(a.stops).toEqual([]);
    // The agent writes it (the task runs in place: the workspace is not a repository).
    const flag = join(run.dir, "ws", "out", "done.flag");
    mkdirSync(join(flag, ".."));
    writeFileSync(flag, "done\n");
    const now = Date.now() / 1000;
    utimesSync(flag, now, now);
    await vi.advanceTimersByTimeAsync(1000);
    // Ended (TERM), not left to exit by itself.
    expect(a.stops).toHaveLength(1);
    const report = run.report(await done);
    expect(report.exit_code).toBe(0);
    expect(report.tasks[0]).toMatchObject({ id: "a", status: "success" });
    expect(run.events().find((e) => e.type === "task.finish_requested")?.data).toMatchObject({
      by: "done_when",
    });
  });

  it("a done_when file the worktree already holds does not end the task before any work", async () => {
    run = new MiddleRun([{ id: "a", interactive: true, done_when: "ctx/task.md", waiting_after_s: 1 }]);
    // The file is older than the attempt, as a tracked file of the worktree is.
    const old = Date.now() / 1000 - 3600;
    utimesSync(join(run.dir, "ws", "ctx", "task.md"), old, old);
    const done = runAssignments({ assignmentsFile: run.file, ...run.options() });
    const a = await run.host.launched("a");
    a.screen = "stub> ";
    await vi.advanceTimersByTimeAsync(3000);
    // The prompt gets pasted and the agent waits for its answer: the tracked file did not end it.
    expect(a.pasted).toEqual([promptOf("a")]);
    a.screen = "stub> # the task\nQuestion?";
    await vi.advanceTimersByTimeAsync(3000);
    expect(JSON.parse(readFileSync(join(run.dir, "status", "a.running"), "utf8"))).toMatchObject({
      waiting_input: true,
    });
    expect(a.stops).toEqual([]);
    requestFinish("a");
    await vi.advanceTimersByTimeAsync(1000);
    const report = run.report(await done);
    expect(report.exit_code).toBe(0);
    expect(report.tasks[0]).toMatchObject({ id: "a", status: "success" });
    expect(run.events().find((e) => e.type === "task.finish_requested")?.data).toMatchObject({
      by: "finish",
    });
  });

  /** A preset's run, its binary a file on the agent's PATH (the fake runner starts nothing). */
  function presetRun(
    preset: "opencode" | "gemini",
    env: Record<string, string> = {},
  ): { done: ReturnType<typeof runAssignments> } {
    run = new MiddleRun(
      [{ id: "a", agent: preset, command: undefined, interactive: true, expect_changes: false }],
      {
        config: { agents: { [preset]: { preset, env } } },
      },
    );
    const bin = join(run.dir, "bin");
    mkdirSync(bin);
    writeFileSync(join(bin, preset), "#!/bin/sh\n", { mode: 0o755 });
    const options = run.options();
    return {
      done: runAssignments({
        assignmentsFile: run.file,
        ...options,
        env: { ...options.env, PATH: `${bin}:${process.env.PATH}` },
      }),
    };
  }

  it("opencode's plugin: written before its launch, named for it; its events deliver, name its question and keep a failed turn's words", async () => {
    const { done } = presetRun("opencode");
    const a = await run.host.launched("a");
    const configDir = a.spec.env.OPENCODE_CONFIG_DIR!;
    expect(configDir).toBe(join(privateDirOf(run.dir, "middle"), "agent-config", "a"));
    expect(readFileSync(join(configDir, "plugins", "termorch-events.js"), "utf8")).toContain(
      "TERMORCH_AGENT_EVENTS",
    );
    const events = a.spec.env.TERMORCH_AGENT_EVENTS!;
    const emit = (record: object): void => appendFileSync(events, `${JSON.stringify(record)}\n`);
    const waitingFor = (): string | null =>
      JSON.parse(readFileSync(join(run.dir, "status", "a.running"), "utf8")).waiting_for;

    a.screen = "Ask anything… \n";
    await vi.advanceTimersByTimeAsync(1500);
    expect(a.pasted).toEqual([promptOf("a")]);
    // Taken: its busy status, though the screen shows nothing new.
    emit({ type: "session.status", session: "s", status: "busy" });
    await vi.advanceTimersByTimeAsync(1500);
    // Its question: the screen's pattern for it, and the plugin's words, which win.
    a.screen = "△ Permission required\n";
    emit({ type: "permission.asked", session: "s", permission: "external_directory", patterns: ["/x/*"] });
    await vi.advanceTimersByTimeAsync(1500);
    expect(waitingFor()).toBe("opencode asks permission: external_directory (/x/*)");
    // A failed turn, then the session idle: the failure's words stay.
    emit({ type: "session.error", session: "s", message: "the request was refused" });
    emit({ type: "session.idle", session: "s" });
    a.screen = "Ask anything… \n";
    await vi.advanceTimersByTimeAsync(1500);
    expect(waitingFor()).toBe("its turn failed: the request was refused");
    // The next prompt taken clears it; the turn's end is then the usual one.
    emit({ type: "session.status", session: "s", status: "busy" });
    emit({ type: "session.idle", session: "s" });
    await vi.advanceTimersByTimeAsync(1500);
    expect(waitingFor()).toMatch(/^its turn is done/);

    requestFinish("a");
    await vi.advanceTimersByTimeAsync(1000);
    expect(run.report(await done).tasks[0]).toMatchObject({
      id: "a",
      status: "success",
      state_from: "hooks",
    });
  });

  it("a question its plugin names while the screen still shows the busy turn: waiting until the screen moves on, with the keys of the question on screen", async () => {
    const { done } = presetRun("opencode");
    const a = await run.host.launched("a");
    const emit = (record: object): void =>
      appendFileSync(a.spec.env.TERMORCH_AGENT_EVENTS!, `${JSON.stringify(record)}\n`);
    const status = (): { waiting_for?: string | null; waiting_answers?: unknown } =>
      JSON.parse(readFileSync(join(run.dir, "status", "a.running"), "utf8"));

    a.screen = "Ask anything… \n";
    await vi.advanceTimersByTimeAsync(1500);
    emit({ type: "session.status", session: "s", status: "busy" });
    a.screen = "┃  Build · model\nesc interrupt\n";
    await vi.advanceTimersByTimeAsync(1500);
    // Its question, sampled before its prompt is drawn: the busy footer is the turn's, from before.
    emit({ type: "permission.asked", session: "s", permission: "external_directory", patterns: ["/x/*"] });
    a.screen = "┃  Build · model\nesc interrupt \n";
    await vi.advanceTimersByTimeAsync(1100);
    expect(status()).toMatchObject({ waiting_for: "opencode asks permission: external_directory (/x/*)" });
    expect(status().waiting_answers).toBeUndefined();
    // Its prompt drawn: the plugin's words stay, the prompt's keys come with them.
    a.screen = "△ Permission required\n  Allow once   Allow always   Reject\n";
    await vi.advanceTimersByTimeAsync(1100);
    expect(status()).toMatchObject({
      waiting_for: "opencode asks permission: external_directory (/x/*)",
      waiting_answers: [
        { keys: ["Enter"], picks: expect.stringMatching(/^Allow once/) },
        { keys: ["Escape"], picks: "Reject" },
      ],
    });
    const asked = run.events().filter((e) => e.type === "task.waiting_input");
    expect(asked.at(-1)?.data).toMatchObject({ answers: [{ keys: ["Enter"] }, { keys: ["Escape"] }] });
    // Answered in the pane: busy again, no longer waiting.
    a.screen = "┃  Build · model\nesc interrupt\n";
    await vi.advanceTimersByTimeAsync(1100);
    expect(status()).toMatchObject({ waiting_for: null, waiting_input: false });

    requestFinish("a");
    await vi.advanceTimersByTimeAsync(1000);
    expect(run.report(await done).tasks[0]).toMatchObject({ id: "a", status: "success" });
  });

  it("opencode with a config folder of the user's own: it is kept, and the screen decides", async () => {
    const { done } = presetRun("opencode", { OPENCODE_CONFIG_DIR: "/home/someone/.opencode-work" });
    const a = await run.host.launched("a");
    expect(a.spec.env.OPENCODE_CONFIG_DIR).toBe("/home/someone/.opencode-work");
    expect(existsSync(join(privateDirOf(run.dir, "middle"), "agent-config", "a"))).toBe(false);
    a.screen = "Ask anything… \n";
    await vi.advanceTimersByTimeAsync(1500);
    a.screen = "> # the task\nAsk anything… \n";
    await vi.advanceTimersByTimeAsync(1500);
    requestFinish("a");
    await vi.advanceTimersByTimeAsync(1000);
    expect(run.report(await done).tasks[0]).toMatchObject({
      id: "a",
      status: "success",
      state_from: "screen",
    });
  });

  it("gemini's paste left unsent in its input box (its Enter taken as a line break): Enter once more, then delivered", async () => {
    const { done } = presetRun("gemini");
    const a = await run.host.launched("a");
    const empty = "│ > Type your message or @path/to/file │\n";
    const held = "│ > [Pasted Text: 17 lines]             │\n│                                     │\n";
    a.screen = empty;
    await vi.advanceTimersByTimeAsync(1500);
    expect(a.pasted).toEqual([promptOf("a")]);
    // Drawn, then held: only after the screen stayed so is Enter pressed again, once.
    a.screen = held;
    await vi.advanceTimersByTimeAsync(1000);
    expect(a.submits).toBe(0);
    await vi.advanceTimersByTimeAsync(1500);
    expect(a.submits).toBe(1);
    // Taken: the empty input box is back on a new screen.
    a.screen = `✦ working on it\n${empty}`;
    await vi.advanceTimersByTimeAsync(1500);
    await vi.advanceTimersByTimeAsync(10_000);
    expect(a.submits).toBe(1);
    requestFinish("a");
    await vi.advanceTimersByTimeAsync(1000);
    expect(run.report(await done).tasks[0]).toMatchObject({ id: "a", status: "success" });
    const types = run.events().map((e) => e.type);
    expect(types.filter((t) => t.startsWith("task.prompt_"))).toEqual([
      "task.prompt_pasted",
      "task.prompt_resubmitted",
      "task.prompt_delivered",
    ]);
  });

  it("a held paste is pressed at most twice, then the task fails as prompt_not_delivered", async () => {
    const { done } = presetRun("gemini");
    const a = await run.host.launched("a");
    a.screen = "│ > Type your message or @path/to/file │\n";
    await vi.advanceTimersByTimeAsync(1500);
    a.screen = "│ > [Pasted Text: 17 lines]             │\n";
    await vi.advanceTimersByTimeAsync(65_000);
    expect(a.submits).toBe(2);
    expect(run.report(await done).tasks[0]).toMatchObject({
      status: "failed",
      reason: "prompt_not_delivered",
    });
  });
});
