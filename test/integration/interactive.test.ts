// Interactive tasks through the built CLI with real tmux: the prompt pasted into the agent's
// terminal as one bracketed paste, waiting-for-input detection, `termorch send`, `termorch finish`
// and `done_when`. The agent is test/fixtures/agents/interactive-stub, a small raw-mode TUI.
import { existsSync, mkdirSync, readFileSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { execa, type ResultPromise } from "execa";
import { describe, expect, it } from "vitest";
import { WaitOutput } from "../../src/contract/mcp.js";
import { StatusFile } from "../../src/contract/status.js";
import { StatusView } from "../../src/contract/status-view.js";
import { describeWith } from "../needs.js";
import {
  BIN,
  cliEnv,
  git,
  lines,
  ROOT,
  readReport,
  STEP,
  termorch,
  testFile,
  waitFor,
  writeAssignments,
} from "./harness.js";

const { socket, workspace } = testFile("interactive");
const STUB = join(ROOT, "test", "fixtures", "agents", "interactive-stub");
// Several lines, blank ones and double spaces: a paste line by line would submit at the first.
const CONTEXT = "# Paint the button\n\nLine two of the task.\n  indented  line three\nlast line\n";

interface Started {
  dir: string;
  repo: string;
  out: string;
  run: ResultPromise;
  runId: string;
}

/**
 * Starts `termorch run` of one interactive task `ask` on the stub, without waiting for it;
 * `doc` adds to the assignments (other tasks before it, the merge's mode).
 */
function start(
  task: Record<string, unknown> = {},
  stubEnv: Record<string, string> = {},
  sandboxed = false,
  doc: { before?: Record<string, unknown>[]; [key: string]: unknown } = {},
): Started {
  const { before = [], ...extra } = doc;
  const { dir, repo } = workspace();
  const out = join(dir, "out");
  // The stub reports into `out`, which a sandbox must then let it write.
  if (sandboxed) task = { ...task, sandbox: { network: "none", filesystem: { allow_write: [out] } } };
  mkdirSync(out);
  writeFileSync(join(repo, "ctx", "task.md"), CONTEXT);
  git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "context");
  const runId = `i${Math.random().toString(36).slice(2, 8)}`;
  const assignments = {
    run_id: runId,
    tasks: [
      ...before,
      {
        id: "ask",
        agent: "istub",
        context_path: "ctx/task.md",
        interactive: true,
        waiting_after_s: 1,
        env: { STUB_OUT: out, ...stubEnv },
        ...task,
      },
    ],
    environment: { workspace_dir: "repo" },
    ...extra,
  };
  writeFileSync(join(dir, "assignments.json"), JSON.stringify(assignments));
  writeFileSync(
    join(dir, "termorch.json"),
    JSON.stringify({ agents: { istub: { command: [STUB], expect_changes: false } } }),
  );
  const run = execa(
    process.execPath,
    [BIN, "run", join(dir, "assignments.json"), "--config", join(dir, "termorch.json")],
    { reject: false, cwd: ROOT, env: cliEnv(socket), timeout: 120_000 },
  );
  return { dir, repo, out, run, runId };
}

const MENU_STUB = join(ROOT, "test", "fixtures", "agents", "menu-stub");

/**
 * Starts `termorch run` of one interactive task `ask` on the menu stub: as an agent of the
 * user's own (`own`: it takes the prompt, then asks its colour menu), or as the codex preset's
 * CLI (`codex`: it opens on codex's model offer, which the preset knows).
 */
/** The task's whole prompt as termorch wrote it (the context file, then its sections): what must be pasted. */
function promptOf(runDir: string): string {
  const prompt = readFileSync(join(runDir, "artifacts", "ask", "prompt.md"), "utf8");
  expect(prompt.startsWith(CONTEXT)).toBe(true);
  return prompt;
}

function startMenu(as: "own" | "codex"): Started {
  const { dir, repo } = workspace();
  const out = join(dir, "out");
  mkdirSync(out);
  writeFileSync(join(repo, "ctx", "task.md"), CONTEXT);
  git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "context");
  const bin = join(dir, "bin");
  mkdirSync(bin);
  symlinkSync(MENU_STUB, join(bin, "codex"));
  const runId = `m${Math.random().toString(36).slice(2, 8)}`;
  writeFileSync(
    join(dir, "assignments.json"),
    JSON.stringify({
      run_id: runId,
      tasks: [
        {
          id: "ask",
          agent: as === "codex" ? "codex" : "mstub",
          context_path: "ctx/task.md",
          interactive: true,
          waiting_after_s: 1,
          expect_changes: false,
          env: { STUB_OUT: out, ...(as === "codex" ? { STUB_MENU: "codex" } : {}) },
        },
      ],
      environment: { workspace_dir: "repo" },
    }),
  );
  writeFileSync(
    join(dir, "termorch.json"),
    JSON.stringify({ agents: as === "codex" ? {} : { mstub: { command: [MENU_STUB] } } }),
  );
  const run = execa(
    process.execPath,
    [BIN, "run", join(dir, "assignments.json"), "--config", join(dir, "termorch.json")],
    // The agents' PATH is termorch's: the stub is the codex found there.
    {
      reject: false,
      cwd: ROOT,
      env: cliEnv(socket, { PATH: `${bin}:${process.env.PATH}` }),
      timeout: 120_000,
    },
  );
  return { dir, repo, out, run, runId };
}

/** The stub's picks so far, once there are `n`. */
function picks(out: string, n: number): Promise<Array<{ picked: string; keys: string[] }>> {
  return waitFor(
    () => {
      const all = existsSync(join(out, "picks.log")) ? lines(join(out, "picks.log")) : [];
      return all.length >= n ? all.map((l) => JSON.parse(l)) : null;
    },
    20_000,
    `pick ${n} of the menu`,
  );
}

const ledger = (dir: string): Array<{ type: string; task_id?: string; data: Record<string, unknown> }> =>
  lines(join(dir, "events.jsonl")).map((line) => JSON.parse(line));

/** The running status file once it says the agent waits for input. */
function waitingStatus(dir: string): Promise<StatusFile> {
  return waitFor(
    () => {
      const file = join(dir, "status", "ask.running");
      if (!existsSync(file)) return null;
      try {
        const status = StatusFile.parse(JSON.parse(readFileSync(file, "utf8")));
        return status.waiting_input ? status : null;
      } catch {
        return null; // being replaced
      }
    },
    30_000,
    "the task to be marked waiting for input",
  );
}

describe("interactive tasks", () => {
  it("pastes the prompt whole, is detected as waiting, is answered with termorch send, and finishes", async () => {
    const s = start();
    const status = await waitingStatus(s.dir);
    expect(Date.parse(status.waiting_since!)).toBeGreaterThan(0);

    // The prompt arrived exactly, in one bracketed paste, with nothing typed outside it.
    expect(readFileSync(join(s.out, "prompt.txt"), "utf8")).toBe(promptOf(s.dir));
    expect(JSON.parse(readFileSync(join(s.out, "prompt.meta"), "utf8"))).toEqual({ pastes: 1, outside: "" });
    const types = ledger(s.dir).map((e) => e.type);
    expect(types).toContain("task.prompt_pasted");
    expect(types).toContain("task.waiting_input");

    // termorch status shows it.
    const shown = await termorch(["status", s.dir, "--json"], { socket });
    expect(shown.exitCode).toBe(0);
    const view = StatusView.parse(JSON.parse(shown.stdout));
    expect(view.runs[0]?.tasks[0]?.waiting_since).toBe(status.waiting_since);
    const human = await termorch(["status", s.dir], { socket });
    expect(human.stdout).toContain(`ask: waiting for input since ${status.waiting_since}`);

    const sent = await termorch(["send", "ask", "blue,\nwith a  white border", "--run", s.runId], { socket });
    expect(sent.exitCode, sent.stderr).toBe(0);

    const result = await s.run;
    expect(result.exitCode, String(result.stderr)).toBe(0);
    expect(readReport(s.dir).tasks[0]).toMatchObject({ id: "ask", status: "success" });
    expect(readFileSync(join(s.out, "answer.txt"), "utf8")).toBe("blue,\nwith a  white border");
    // The agent's work was merged.
    expect(readFileSync(join(s.repo, "answer.txt"), "utf8")).toBe("blue,\nwith a  white border\n");

    // Sending to a task that no longer runs, or to none: exit 2.
    expect((await termorch(["send", "ask", "more", "--run", s.runId], { socket })).exitCode).toBe(2);
    expect((await termorch(["send", "nosuch", "more", "--run", s.runId], { socket })).exitCode).toBe(2);
  });

  it("termorch finish ends the agent and counts the task as done", async () => {
    const s = start({}, { STUB_STAY: "1" });
    await waitingStatus(s.dir);
    // An answer from a file arrives whole, in one paste, like the prompt.
    const answer = join(s.dir, "answer.md");
    writeFileSync(answer, "green\n\nand round corners");
    const sent = await termorch(["send", "ask", "--file", answer, "--run", s.runId], { socket });
    expect(sent.exitCode, sent.stderr).toBe(0);
    const logged = await waitFor(
      () => lines(join(s.out, "answers.log"))[0],
      20_000,
      "the stub to take the answer",
    );
    expect(JSON.parse(logged)).toEqual({ text: "green\n\nand round corners", pastes: 1, outside: "" });
    const finished = await termorch(["finish", "ask", "--run", s.runId], { socket });
    expect(finished.exitCode, finished.stderr).toBe(0);
    const result = await s.run;
    expect(result.exitCode, String(result.stderr)).toBe(0);
    expect(readReport(s.dir).tasks[0]).toMatchObject({ id: "ask", status: "success" });
    // It was ended (TERM), not left to exit by itself.
    expect(existsSync(join(s.out, "terminated"))).toBe(true);
    expect(ledger(s.dir).find((e) => e.type === "task.finish_requested")?.data).toMatchObject({
      by: "finish",
    });
    // Finishing a task that is done: exit 2.
    expect((await termorch(["finish", "ask", "--run", s.runId], { socket })).exitCode).toBe(2);
  });

  it("termorch agents shows each agent's interactive command line (a preset's with the config's model)", async () => {
    const { dir } = workspace();
    const config = join(dir, "termorch.json");
    writeFileSync(
      config,
      JSON.stringify({ agents: { claude: { model: "opus" }, istub: { command: [STUB] } } }),
    );
    const r = await termorch(["agents", "--json", "--config", config], { socket });
    expect(r.exitCode).toBe(0);
    const rows = JSON.parse(r.stdout) as { name: string; interactive_argv: string[] }[];
    const by = new Map(rows.map((row) => [row.name, row.interactive_argv]));
    // The hooks that report its state come per invocation, before the config's choices.
    const claude = by.get("claude")!;
    expect(claude.slice(0, 4)).toEqual(["claude", "--permission-mode", "acceptEdits", "--settings"]);
    expect(JSON.parse(claude[4]!)).toHaveProperty("hooks.Stop");
    expect(claude.slice(5)).toEqual(["--model", "opus"]);
    expect(by.get("istub")).toEqual([STUB]);
  });

  it("termorch finish and termorch send refuse a running task that is not interactive: exit 2", async () => {
    const { dir } = workspace();
    const release = join(dir, "release");
    const file = writeAssignments(dir, [{ id: "plain", env: { WAIT_FILE: release } }]);
    const run = execa(process.execPath, [BIN, "run", file], {
      reject: false,
      cwd: ROOT,
      env: cliEnv(socket),
      timeout: 120_000,
    });
    await waitFor(() => existsSync(join(dir, "status", "plain.running")), 20_000, "the task to run");
    const runId = (JSON.parse(readFileSync(file, "utf8")) as { run_id: string }).run_id;
    const r = await termorch(["finish", "plain", "--run", runId], { socket });
    expect(r.exitCode).toBe(2);
    expect(r.stderr).toContain("is not an interactive task");
    const sent = await termorch(["send", "plain", "yes", "--run", runId], { socket });
    expect(sent.exitCode).toBe(2);
    expect(sent.stderr).toContain("is not an interactive task: send answers only those");
    writeFileSync(release, "");
    expect((await run).exitCode).toBe(0);
  });

  it("a redo of an interactive task: the conflict is pasted into its input prompt, its question makes it waiting_input, and send resolves it", async () => {
    const { dir, repo, out, run, runId } = start({}, {}, false, {
      before: [
        {
          id: "A",
          agent: "step",
          context_path: "ctx/task.md",
          command: ["bash", STEP],
          env: { WRITE: "answer.txt=from A" },
        },
      ],
      success_criteria: { tests_cmd: "grep -q 'from A' answer.txt && grep -q 'from B' answer.txt" },
      mode: { merge: { on_conflict: "redo" } },
    });
    await waitingStatus(dir);
    expect(readFileSync(join(out, "prompt.txt"), "utf8")).not.toContain("termorch-conflict");
    expect((await termorch(["send", "ask", "from B", "--run", runId], { socket })).exitCode).toBe(0);

    // Its answer.txt collides with A's: the redo pastes the conflict section over its prompt, and asks again.
    await waitFor(
      () => readFileSync(join(out, "prompt.txt"), "utf8").includes("```json termorch-conflict"),
      60_000,
      "the redo's prompt pasted",
    );
    const status = await waitingStatus(dir);
    expect(status.state).toBe("running");
    expect(JSON.parse(readFileSync(join(out, "prompt.meta"), "utf8"))).toEqual({ pastes: 1, outside: "" });
    const shown = StatusView.parse(
      JSON.parse((await termorch(["status", runId, "--json"], { socket })).stdout),
    );
    const ask = shown.runs[0]?.tasks.find((t) => t.id === "ask");
    expect(ask).toMatchObject({ attempts: 2, redo: { n: 1, of: 1, with: ["A"], files: ["answer.txt"] } });
    expect(ask?.waiting_since).not.toBeNull();
    expect((await termorch(["send", "ask", "from A and from B", "--run", runId], { socket })).exitCode).toBe(
      0,
    );

    const result = await run;
    expect(result.exitCode, String(result.stderr)).toBe(0);
    const report = readReport(dir);
    expect(report.merge.redone).toMatchObject([{ task: "ask", attempt: 2, outcome: "resolved" }]);
    expect(readFileSync(join(repo, "answer.txt"), "utf8")).toBe("from A and from B\n");
    const types = ledger(dir)
      .filter((e) => e.task_id === "ask")
      .map((e) => e.type);
    expect(types.filter((t) => t === "task.prompt_pasted")).toHaveLength(2);
    expect(types.filter((t) => t === "task.waiting_input").length).toBeGreaterThanOrEqual(2);
  });
});

describe("termorch send --keys: a menu, which takes keys and ignores a paste", () => {
  it("presses named keys and characters in order, each taken alone; a pasted answer only confirms the highlighted option; a key termorch does not send is refused before any is pressed", async () => {
    const s = startMenu("own");
    await waitingStatus(s.dir);
    expect(readFileSync(join(s.out, "prompt.txt"), "utf8")).toBe(promptOf(s.dir));
    const send = (...args: string[]) => termorch(["send", "ask", ...args, "--run", s.runId], { socket });

    // The answer as text: the menu ignores the paste, and its Enter confirms the highlighted option.
    expect((await send("2")).exitCode).toBe(0);
    expect((await picks(s.out, 1))[0]).toEqual({ picked: "Red", keys: ["paste", "enter"] });

    // A digit picks its option at once.
    expect((await send("--keys", "2")).exitCode).toBe(0);
    expect((await picks(s.out, 2))[1]).toEqual({ picked: "Blue", keys: ["2"] });

    // Named keys in order, each read alone: an Escape merged with the key after it would be another key.
    const moved = await send("--keys", "Down", "Down", "Esc", "Down", "Enter");
    expect(moved.exitCode, moved.stderr).toBe(0);
    expect((await picks(s.out, 3))[2]).toEqual({
      picked: "Blue",
      keys: ["down", "down", "escape", "down", "enter"],
    });

    // A key termorch does not send: exit 2, naming it, and nothing pressed (not even the good ones before it).
    const bad = await send("--keys", "Down", "enter");
    expect(bad.exitCode).toBe(2);
    expect(bad.stderr).toContain('key 2: "enter" is not a key termorch sends (did you mean "Enter"?)');
    const both = await send("blue", "--keys", "2");
    expect(both.exitCode).toBe(2);
    expect(both.stderr).toContain(
      "give one of text (TEXT), a file (--file F) and keys (--keys K...): text and keys were given",
    );
    expect((await send("--keys", "3")).exitCode).toBe(0);
    expect((await picks(s.out, 4))[3]).toEqual({ picked: "Green", keys: ["3"] });

    expect((await termorch(["finish", "ask", "--run", s.runId], { socket })).exitCode).toBe(0);
    const result = await s.run;
    expect(result.exitCode, String(result.stderr)).toBe(0);
  });

  it("a preset's known menu: status and MCP wait name the keys of each answer, MCP send presses them, and the prompt goes in after the answer", async () => {
    const s = startMenu("codex");
    const status = await waitingStatus(s.dir);
    expect(status.waiting_for).toMatch(/codex offers a new model/);
    expect(status.waiting_answers).toEqual([
      { keys: ["2"], picks: expect.stringMatching(/^2\. Use existing model/) },
      { keys: ["1"], picks: expect.stringMatching(/^1\. Try new model/) },
    ]);
    // Nothing typed into the question.
    expect(existsSync(join(s.out, "picks.log"))).toBe(false);
    const human = await termorch(["status", s.runId], { socket });
    expect(human.stdout).toContain(
      `answer: termorch send ask --keys 2 --run ${s.runId} (2. Use existing model (codex notes in ~/.codex/config.toml that you saw the offer)); or: termorch send ask --keys 1 --run ${s.runId} (1. Try new model`,
    );
    const view = StatusView.parse(
      JSON.parse((await termorch(["status", s.runId, "--json"], { socket })).stdout),
    );
    expect(view.runs[0]?.tasks[0]?.waiting_answers.map((a) => a.keys)).toEqual([["2"], ["1"]]);

    // An agent orchestrating through MCP hears the same keys, and sends them.
    const client = new Client({ name: "termorch-test", version: "1" });
    await client.connect(
      new StdioClientTransport({
        command: process.execPath,
        args: [BIN, "mcp"],
        cwd: s.dir,
        env: { ...(process.env as Record<string, string>), ...cliEnv(socket) },
        stderr: "pipe",
      }),
    );
    try {
      const call = async (name: string, args: Record<string, unknown>) =>
        (await client.callTool({ name, arguments: args })) as CallToolResult;
      const waited = WaitOutput.parse((await call("wait", { run: s.runId, timeout_s: 0 })).structuredContent);
      expect(waited.waiting_input).toEqual([
        { task: "ask", asks: status.waiting_for, answers: status.waiting_answers },
      ]);
      expect(waited.changes.find((c) => c.event === "task_waiting_input")).toMatchObject({
        answers: status.waiting_answers,
      });
      // Keys termorch does not send, or text and keys at once: refused, nothing typed.
      expect((await call("send", { task: "ask", run: s.runId, keys: ["C-c"] })).isError).toBe(true);
      const both = await call("send", { task: "ask", run: s.runId, text: "2", keys: ["2"] });
      expect(both.isError).toBe(true);
      expect(JSON.stringify(both.content)).toContain("text and keys were given");
      const sent = await call("send", { task: "ask", run: s.runId, keys: ["2"] });
      expect(sent.isError, JSON.stringify(sent.content)).toBeFalsy();
    } finally {
      await client.close();
    }
    expect(await picks(s.out, 1)).toEqual([{ picked: "Use existing model", keys: ["2"] }]);
    // Past the question, at its input prompt: the task's prompt is pasted there.
    await waitFor(() => existsSync(join(s.out, "prompt.txt")), 20_000, "the prompt pasted after the answer");
    expect(readFileSync(join(s.out, "prompt.txt"), "utf8")).toBe(promptOf(s.dir));
    const asked = ledger(s.dir).find((e) => e.type === "task.waiting_input");
    expect(asked?.data.answers).toEqual(status.waiting_answers);

    expect((await termorch(["finish", "ask", "--run", s.runId], { socket })).exitCode).toBe(0);
    const result = await s.run;
    expect(result.exitCode, String(result.stderr)).toBe(0);
  });
});

describeWith("bwrap", "test/integration/interactive.test.ts (sandboxed)")(
  "an interactive task in the sandbox",
  () => {
    it("gets its prompt pasted, waits, is answered with termorch send, and its work is merged", async () => {
      const s = start({}, {}, true);
      await waitingStatus(s.dir);
      expect(readFileSync(join(s.out, "prompt.txt"), "utf8")).toBe(promptOf(s.dir));
      const sent = await termorch(["send", "ask", "sandboxed answer", "--run", s.runId], { socket });
      expect(sent.exitCode, sent.stderr).toBe(0);
      const result = await s.run;
      expect(result.exitCode, String(result.stderr)).toBe(0);
      expect(readFileSync(join(s.repo, "answer.txt"), "utf8")).toBe("sandboxed answer\n");
      const launched = ledger(s.dir).find((e) => e.type === "task.launched");
      expect(launched?.data.sandbox).toEqual({ network: "none" });
    });
  },
);
