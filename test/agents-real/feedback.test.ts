// Retries that learn, through the real agent CLIs pinned in test/agents-real/package.json: a
// task's tests_cmd fails after attempt 1 (the scripted model writes a wrong greeting), and attempt
// 2's prompt carries the section "What went wrong in attempt 1" with the test's failure line and
// output. The scripted model fixes the file only from what that section says (the value its
// failure line expects: the task's context does not name it), so the run passes only if the
// section reached the model through the CLI. Headless for one CLI of each wire protocol,
// interactive for claude, and an escalation from one CLI to another.
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { execa } from "execa";
import { describe, expect, it } from "vitest";
import type { StatusFile } from "../../src/contract/status.js";
import { type CliRecipe, RECIPES, SECRET } from "./clis.js";
import { allText, ROOT, readReport, realAgentsSuite, stringsIn, stringsOf } from "./harness.js";
import type { RecordedRequest, Script, ScriptUsage } from "./model-server.js";

const { world, server: modelServer } = realAgentsSuite("feedback");

const CONTEXT = "Write a greeting into greeting.txt. FEEDBACK-TASK F\n";
const HEADING = "## What went wrong in attempt 1";
const WANTED = "hello world";
const WRONG = "hello wrld";
const FAILURE_LINE = `FAIL greeting_spec: expected '${WANTED}', got '${WRONG}'`;
/** A test that says what it checked (a line the tail keeps but no failure line), then what failed. */
const TESTS_CMD = `g=$(cat greeting.txt 2>/dev/null); echo "checking greeting.txt"; [ "$g" = '${WANTED}' ] || { echo "FAIL greeting_spec: expected '${WANTED}', got '$g'"; exit 1; }`;
/** The tokens each attempt's final answer reports; each tool call's turn reports 10 in, 5 out. */
const FIRST: ScriptUsage = { input: 1000, output: 50 };
const SECOND: ScriptUsage = { input: 2000, output: 70 };
/** Attempt 1: one write and the answer. Attempt 2: a read, a write and the answer. */
const USAGE = {
  input_tokens: 10 + FIRST.input + 2 * 10 + SECOND.input,
  output_tokens: 5 + FIRST.output + 2 * 5 + SECOND.output,
};

/**
 * The model of a task (FEEDBACK-TASK in its context): it writes a wrong greeting; given a feedback
 * section whose failure line says what the test expected, it reads the file and writes that.
 */
function greeter(): Script {
  return (text) => {
    const prompt = stringsOf(text);
    const expected = /^FAIL greeting_spec: expected '([^']*)', got/m.exec(prompt)?.[1];
    if (prompt.includes(HEADING) && expected !== undefined)
      return [
        // Read first: Claude Code (and opencode) write over a file only once it was read.
        { read: "greeting.txt" },
        { write: "greeting.txt", content: `${expected}\n` },
        { reply: `Fixed: greeting.txt says ${expected}`, usage: SECOND },
      ];
    return [
      { write: "greeting.txt", content: `${WRONG}\n` },
      { reply: "Done: wrote greeting.txt", usage: FIRST },
    ];
  };
}

/**
 * A run of one task F on the first recipe's CLI (the others: its escalation list), its tests_cmd
 * failing until greeting.txt says hello world.
 */
function prepare(
  recipes: CliRecipe[],
  task: Record<string, unknown>,
): { dir: string; repo: string; file: string; config: string; runId: string } {
  const { dir, repo } = world.workspace();
  writeFileSync(join(repo, "ctx", "F.md"), CONTEXT);
  const agents: Record<string, unknown> = {};
  for (const r of recipes) {
    const entry = r.agent(modelServer().url);
    agents[r.preset] = task.interactive ? { ...entry, env: { ...entry.env, ...r.interactiveEnv } } : entry;
  }
  const config = join(dir, "termorch.json");
  writeFileSync(config, JSON.stringify({ agents }));
  const runId = `fb-${recipes.map((r) => r.preset).join("-")}-${Math.random().toString(36).slice(2, 8)}`;
  const file = join(dir, "assignments.json");
  writeFileSync(
    file,
    JSON.stringify({
      run_id: runId,
      tasks: [
        {
          id: "F",
          agent: recipes[0]!.preset,
          context_path: "ctx/F.md",
          dependencies: [],
          retries: 1,
          success_criteria: { tests_cmd: TESTS_CMD },
          ...task,
        },
      ],
      environment: { workspace_dir: "repo", env_vars: [...new Set(recipes.map((r) => r.keyVar))] },
    }),
  );
  return { dir, repo, file, config, runId };
}

const keys = (recipes: CliRecipe[]): Record<string, string> =>
  Object.fromEntries(recipes.map((r) => [r.keyVar, SECRET]));

/** The main requests of task F since `before`: those of attempt 1 (no section) and of attempt 2 (the section). */
function attempts(before: number): { first: RecordedRequest[]; second: RecordedRequest[] } {
  const mine = modelServer()
    .requests.slice(before)
    .filter((q) => q.main && q.text.includes("FEEDBACK-TASK F"));
  return {
    first: mine.filter((q) => !q.text.includes(HEADING)),
    second: mine.filter((q) => q.text.includes(HEADING)),
  };
}

/**
 * What every test checks once the run passed: the fixed file merged, two attempts in the report,
 * the second given the section kept at artifacts/F/attempt-2/feedback.md, which reached the
 * model with the test's failure line and output.
 */
function expectLearned(dir: string, repo: string, before: number, agents: [string, string]): void {
  expect(readFileSync(join(repo, "greeting.txt"), "utf8")).toBe(`${WANTED}\n`);
  const task = readReport(dir).tasks[0]!;
  expect(task).toMatchObject({ status: "success", attempts: 2 });
  expect(task.attempt_history).toHaveLength(2);
  const [one, two] = task.attempt_history!;
  expect(one).toMatchObject({
    n: 1,
    agent: agents[0],
    started_from: null,
    feedback: null,
    reason: "validation",
  });
  expect(two).toMatchObject({
    n: 2,
    agent: agents[1],
    started_from: "last_work",
    feedback: "artifacts/F/attempt-2/feedback.md",
    reason: null,
  });
  const section = readFileSync(join(dir, "artifacts", "F", "attempt-2", "feedback.md"), "utf8");
  expect(section).toContain(HEADING);

  const { first, second } = attempts(before);
  expect(first.length).toBeGreaterThan(0);
  expect(second.length).toBeGreaterThan(0);
  const prompt = stringsOf(second[0]!.text);
  expect(prompt).toContain(HEADING);
  expect(prompt).toContain("### tests_cmd failed");
  // The failure line (in the failure lines and in the output), and the output's line that is none.
  expect(prompt).toContain(`\n${FAILURE_LINE}\n`);
  expect(prompt).toContain("\nchecking greeting.txt\n");
  expect(prompt).toContain("```json termorch-feedback");
  // The CLI passed the prompt on whole (pasted or on stdin): one message of the request is exactly
  // attempt 2's prompt, the task's context followed by the section (then the decision section
  // every prompt ends with), byte for byte.
  const kept = readFileSync(join(dir, "artifacts", "F", "prompt.md"), "utf8");
  expect(kept.slice(0, CONTEXT.length + section.length)).toBe(CONTEXT + section);
  expect(kept.slice(CONTEXT.length + section.length)).toMatch(
    /^\n\n---\n\n## If you cannot finish: your decision\n/,
  );
  expect(stringsIn(second[0]!.text)).toContain(kept);
  // The key went to the CLI (the server saw it) and into no file of the run.
  expect(second.at(-1)!.auth).toContain(SECRET);
  expect(allText(dir)).not.toContain(SECRET);
}

// One CLI of each wire protocol.
describe.each([RECIPES.claude, RECIPES.codex, RECIPES.gemini, RECIPES.opencode])(
  "$preset, headless, a retry after a failed tests_cmd",
  (recipe) => {
    it("attempt 2's prompt carries what went wrong in attempt 1 (the failure line, the output); the model fixes its work from it", async () => {
      modelServer().setScript(greeter());
      const { dir, repo, file, config } = prepare([recipe], {});
      const before = modelServer().requests.length;
      const r = await world.termorch(["run", file, "--config", config], { env: keys([recipe]) });
      expect(r.exitCode, `${r.stderr}\n${readFileSync(join(dir, "execution_report.json"), "utf8")}`).toBe(0);
      expectLearned(dir, repo, before, [recipe.preset, recipe.preset]);
      expect(readReport(dir).tasks[0]!.usage).toMatchObject(USAGE);
    });
  },
);

/** The task's running status file once it satisfies `ok`. */
async function statusWhen(dir: string, ok: (s: StatusFile) => boolean, what: string): Promise<StatusFile> {
  const file = join(dir, "status", "F.running");
  const deadline = Date.now() + 120_000;
  for (;;) {
    try {
      const s = JSON.parse(readFileSync(file, "utf8")) as StatusFile;
      if (ok(s)) return s;
    } catch {
      // Not there yet, or being replaced.
    }
    try {
      const report = readFileSync(join(dir, "execution_report.json"), "utf8");
      throw new Error(`the run ended before ${what}: ${report}`);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "ENOENT") throw error;
    }
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

describe("claude, interactive, a retry after a failed tests_cmd", () => {
  it("attempt 2's pasted prompt carries what went wrong in attempt 1; the model fixes its work from it", async () => {
    const recipe = RECIPES.claude;
    modelServer().setScript(greeter());
    const { dir, repo, file, config, runId } = prepare([recipe], {
      interactive: true,
      waiting_after_s: 3,
      timeout_s: 150,
    });
    const before = modelServer().requests.length;
    const run = execa(process.execPath, [join(ROOT, "bin", "termorch.js"), "run", file, "--config", config], {
      reject: false,
      cwd: world.tmp,
      extendEnv: false,
      env: world.env(keys([recipe])),
      timeout: 170_000,
    });
    // Each attempt: the operator waits for the turn's end and finishes it, as a user does.
    for (const n of [1, 2]) {
      await statusWhen(
        dir,
        (s) => s.attempt === n && /turn is done/.test(s.waiting_for ?? ""),
        `attempt ${n}'s turn to end`,
      );
      const finish = await world.termorch(["finish", "F", "--run", runId]);
      expect(finish.exitCode, finish.stderr).toBe(0);
    }
    const r = await run;
    expect(r.exitCode, `${r.stderr}\n${readFileSync(join(dir, "execution_report.json"), "utf8")}`).toBe(0);
    expectLearned(dir, repo, before, ["claude", "claude"]);
    expect(readReport(dir).tasks[0]!.usage).toMatchObject(USAGE);
  });
});

describe("claude escalating to codex", () => {
  it("attempt 2 runs codex (the Responses API) with the feedback; the history names both agents and usage adds both attempts'", async () => {
    const [from, to] = [RECIPES.claude, RECIPES.codex];
    modelServer().setScript(greeter());
    const { dir, repo, file, config } = prepare([from, to], { escalation: [to.preset] });
    const before = modelServer().requests.length;
    const r = await world.termorch(["run", file, "--config", config], { env: keys([from, to]) });
    expect(r.exitCode, `${r.stderr}\n${readFileSync(join(dir, "execution_report.json"), "utf8")}`).toBe(0);
    expectLearned(dir, repo, before, [from.preset, to.preset]);
    const { first, second } = attempts(before);
    expect(new Set(first.map((q) => q.protocol))).toEqual(new Set([from.protocol]));
    expect(new Set(second.map((q) => q.protocol))).toEqual(new Set([to.protocol]));
    const task = readReport(dir).tasks[0]!;
    expect(task.agent).toBe(from.preset);
    expect(task.escalation?.map((e) => e.agent)).toEqual([to.preset]);
    // Claude Code's attempt (a write, its answer) and codex's (a read, a write, its answer).
    expect(task.usage).toMatchObject(USAGE);
    expect(readReport(dir).summary.usage).toMatchObject(USAGE);
  });
});
