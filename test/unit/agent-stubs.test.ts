import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, describe, expect, it } from "vitest";
import {
  type AgentPreset,
  PRESET_NAMES,
  PRESETS,
  type PresetChoices,
  presetArgv,
} from "../../src/agent/presets.js";

// The stand-in CLIs of test/fixtures/agents run directly (no tmux) with the argv their preset
// builds: they must take exactly that argv, read the prompt the way the real CLI does, and print
// output of the real CLI's documented shape.

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..", "..");
const STUBS = join(ROOT, "test", "fixtures", "agents");
const TMP = mkdtempSync(join(tmpdir(), "termorch-stubs-"));
afterAll(() => rmSync(TMP, { recursive: true, force: true }));

let runs = 0;

interface StubRun {
  status: number | null;
  stdout: string;
  stderr: string;
  /** The working directory the stub ran in. */
  cwd: string;
  argv: string[];
  /** What STUB_ARGV_LOG recorded. */
  loggedArgv: string[];
  /** What STUB_PROMPT_LOG recorded (bytes). */
  loggedPrompt: Buffer | null;
}

/** Runs a preset's stub with its resolved argv, the prompt delivered on the preset's channel. */
function runStub(
  preset: AgentPreset,
  prompt: Buffer | string,
  opts: { choices?: PresetChoices; env?: Record<string, string>; argv?: (argv: string[]) => string[] } = {},
): StubRun {
  const dir = join(TMP, `run-${++runs}`);
  const cwd = join(dir, "worktree");
  const artifacts = join(dir, "artifacts");
  mkdirSync(cwd, { recursive: true });
  mkdirSync(artifacts, { recursive: true });
  const promptFile = join(artifacts, "prompt.md");
  writeFileSync(promptFile, prompt);
  const values: Record<string, string> = {
    task_id: "t-1",
    context_path: join(cwd, "context.md"),
    workspace: cwd,
    artifacts_dir: artifacts,
    run_id: "run-1",
    prompt_file: promptFile,
  };
  let argv = presetArgv(preset, opts.choices).map((a) =>
    a.replace(/\{(\w+)\}/g, (whole, name: string) => values[name] ?? whole),
  );
  if (opts.argv) argv = opts.argv(argv);
  const argvLog = join(dir, "argv.jsonl");
  const promptLog = join(dir, "prompt.bin");
  const result = spawnSync(join(STUBS, preset.binary), argv.slice(1), {
    cwd,
    input: preset.prompt === "stdin" ? prompt : "",
    env: {
      PATH: process.env.PATH ?? "",
      TERMORCH_TASK_ID: "t-1",
      STUB_ARGV_LOG: argvLog,
      STUB_PROMPT_LOG: promptLog,
      ...opts.env,
    },
    maxBuffer: 16 * 1024 * 1024,
  });
  const read = (f: string): Buffer | null => {
    try {
      return readFileSync(f);
    } catch {
      return null;
    }
  };
  return {
    status: result.status,
    stdout: result.stdout.toString("utf8"),
    stderr: result.stderr.toString("utf8"),
    cwd,
    argv,
    loggedArgv: JSON.parse((read(argvLog)?.toString("utf8") ?? "null").split("\n")[0] ?? "null") ?? [],
    loggedPrompt: read(promptLog),
  };
}

const jsonl = (text: string): Array<Record<string, unknown>> =>
  text
    .split("\n")
    .filter((l) => l.trim() !== "")
    .map((l) => JSON.parse(l) as Record<string, unknown>);

/** The result and usage each CLI documents, read the way a parser for its `output` would. */
function parsed(preset: AgentPreset, run: StubRun) {
  switch (preset.output) {
    case "qwen-json":
    case "pi-jsonl":
    case "copilot-jsonl":
    case "cn-json":
      throw new Error(`no stand-in speaks ${preset.output} (see STUBBED)`);
    case "claude-json": {
      const r = JSON.parse(run.stdout) as Record<string, unknown> & { usage: Record<string, number> };
      expect(r).toMatchObject({ type: "result", subtype: "success" });
      expect(typeof r.session_id).toBe("string");
      expect(typeof r.total_cost_usd).toBe("number");
      for (const k of [
        "input_tokens",
        "output_tokens",
        "cache_read_input_tokens",
        "cache_creation_input_tokens",
      ]) {
        expect(typeof r.usage[k], k).toBe("number");
      }
      return { summary: r.result as string, isError: r.is_error as boolean };
    }
    case "codex-jsonl": {
      const events = jsonl(run.stdout);
      expect(events[0]).toMatchObject({ type: "thread.started" });
      expect(typeof events[0]?.thread_id).toBe("string");
      const done = events.find((e) => e.type === "turn.completed") as
        | { usage: Record<string, number> }
        | undefined;
      const failed = events.find((e) => e.type === "turn.failed") as
        | { error: { message: string } }
        | undefined;
      if (failed) return { summary: failed.error.message, isError: true };
      for (const k of ["input_tokens", "cached_input_tokens", "output_tokens"]) {
        expect(typeof done?.usage[k], k).toBe("number");
      }
      const messages = events
        .filter((e) => e.type === "item.completed")
        .map((e) => e.item as { type: string; text?: string })
        .filter((i) => i.type === "agent_message");
      return { summary: messages.at(-1)?.text, isError: false };
    }
    case "gemini-json": {
      if (run.stdout === "") {
        const err = JSON.parse(run.stderr.replace(/^\[ERROR\] /, "")) as { error: { message: string } };
        return { summary: err.error.message, isError: true };
      }
      const r = JSON.parse(run.stdout) as {
        session_id: string;
        response: string;
        stats: { models: Record<string, { tokens: Record<string, number> }> };
      };
      expect(typeof r.session_id).toBe("string");
      const models = Object.values(r.stats.models);
      expect(models.length).toBeGreaterThan(0);
      for (const k of ["prompt", "candidates", "cached", "total"]) {
        expect(typeof models[0]?.tokens[k], k).toBe("number");
      }
      return { summary: r.response, isError: false };
    }
    case "opencode-jsonl": {
      const events = jsonl(run.stdout);
      for (const e of events) {
        expect(typeof e.type).toBe("string");
        expect(typeof e.timestamp).toBe("number");
        expect(typeof e.sessionID).toBe("string");
      }
      const error = events.find((e) => e.type === "error") as
        | { error: { data: { message: string } } }
        | undefined;
      if (error) return { summary: error.error.data.message, isError: true };
      const finish = events.filter((e) => e.type === "step_finish").map((e) => e.part) as Array<{
        cost: number;
        tokens: { input: number; output: number; cache: { read: number; write: number } };
      }>;
      expect(finish.length).toBeGreaterThan(0);
      for (const f of finish) {
        expect(typeof f.cost).toBe("number");
        expect(typeof f.tokens.cache.read).toBe("number");
      }
      const texts = events.filter((e) => e.type === "text").map((e) => (e.part as { text: string }).text);
      return { summary: texts.at(-1), isError: false };
    }
    case "text": {
      const usage = /^Tokens: .* sent, .* received\. Cost: \$[\d.]+ message, \$[\d.]+ session\.$/m.test(
        run.stdout,
      );
      return { summary: run.stdout, isError: !usage };
    }
  }
}

// The presets that have a stand-in here; a later one (qwen) is proven against its real CLI only
// (test/agents-real, npm run test:agents).
const STUBBED = PRESET_NAMES.filter((name) => existsSync(join(STUBS, name)));

describe.each(STUBBED)("the %s stub", (name) => {
  const preset = PRESETS[name];

  it("accepts its preset's argv, reads the prompt on its channel and makes a real edit", () => {
    const run = runStub(preset, "Do the task.\nWRITE src/out.txt: from the stub\n");
    expect(run.stderr).toBe("");
    expect(run.status).toBe(0);
    expect(run.loggedArgv).toEqual(run.argv.slice(1));
    expect(run.loggedPrompt?.toString("utf8")).toBe("Do the task.\nWRITE src/out.txt: from the stub\n");
    expect(readFileSync(join(run.cwd, "STUB_EDITS.md"), "utf8")).toContain(
      `${name} edited this for task t-1`,
    );
    expect(readFileSync(join(run.cwd, "src", "out.txt"), "utf8")).toBe("from the stub\n");
    const result = parsed(preset, run);
    expect(result.isError).toBe(false);
    expect(result.summary).toContain("STUB_EDITS.md");
  });

  it("accepts the bypass and a model", () => {
    const model = name === "opencode" ? "anthropic/claude-sonnet-4-5" : "some-model";
    const run = runStub(preset, "go\n", { choices: { bypass: true, model } });
    expect(run.stderr).toBe("");
    expect(run.status).toBe(0);
    expect(run.loggedArgv).toContain(model);
    for (const flag of preset.bypass) expect(run.loggedArgv).toContain(flag);
  });

  it("rejects a flag its preset does not pass, with exit 2 and a message on stderr", () => {
    const run = runStub(preset, "go\n", { choices: { extra: ["--no-such-flag"] } });
    expect(run.status).toBe(2);
    expect(run.stderr).toContain("--no-such-flag");
    expect(run.stdout).toBe("");
  });

  it("gets a 200 KiB prompt intact (more than one argv string may hold)", () => {
    const line = "0123456789abcdef ünïcödé — the prompt of a task with a big context file\n";
    const prompt = Buffer.from(line.repeat(Math.ceil((200 * 1024) / Buffer.byteLength(line))));
    expect(prompt.length).toBeGreaterThan(200 * 1024);
    const run = runStub(preset, prompt);
    expect(run.status).toBe(0);
    expect(run.loggedPrompt?.equals(prompt)).toBe(true);
    // Nothing of it went through argv.
    expect(run.argv.every((a) => a.length < 4096)).toBe(true);
  });

  it("reports an error the way the real CLI does", () => {
    const run = runStub(preset, "go\n", { env: { STUB_ERROR: "1" } });
    // claude and aider end an API error with exit 0; codex, gemini and opencode exit 1.
    expect(run.status).toBe(name === "claude" || name === "aider" ? 0 : 1);
    expect(parsed(preset, run).isError).toBe(true);
  });

  it("exits with STUB_EXIT", () => {
    expect(runStub(preset, "go\n", { env: { STUB_EXIT: "7" } }).status).toBe(7);
  });
});

describe("presets", () => {
  it("never turn a bypass on by default", () => {
    for (const name of PRESET_NAMES) {
      const argv = presetArgv(PRESETS[name]);
      for (const flag of [
        "--dangerously-skip-permissions",
        "--dangerously-bypass-approvals-and-sandbox",
        "--auto",
      ]) {
        expect(argv, name).not.toContain(flag);
      }
      expect(argv.join(" "), name).not.toMatch(/yolo/);
    }
  });

  it("replace the edit mode with the bypass, and keep a tail last", () => {
    expect(presetArgv(PRESETS.codex, { bypass: true, model: "m", extra: ["--x"] })).toEqual([
      "codex",
      "exec",
      "--json",
      "--dangerously-bypass-approvals-and-sandbox",
      "--model",
      "m",
      "--x",
      "-",
    ]);
    expect(presetArgv(PRESETS.gemini, { bypass: true }).filter((a) => a === "--approval-mode")).toHaveLength(
      1,
    );
  });

  it("deliver the prompt on stdin or through {prompt_file}, never as an argument of its own", () => {
    for (const name of PRESET_NAMES) {
      const p = PRESETS[name];
      expect(p.argv[0]).toBe(p.binary);
      expect(
        p.argv.some((a) => a.includes("{prompt_file}")),
        name,
      ).toBe(p.prompt === "file");
      expect(
        p.argv.some((a) => a.includes("{context_path}")),
        name,
      ).toBe(false);
    }
  });
});
