// Every preset's interactive form, the real CLI in a real tmux pane, driven by termorch as a user
// drives it: the prompt goes in only at the CLI's own input prompt and is seen to be taken, the
// agent's state comes from its hooks where it has them, a question of the CLI's is reported and
// never answered, and the user's configuration of each CLI in HOME is the same after as before.
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { execa, type ResultPromise } from "execa";
import { describe, expect, it } from "vitest";
import type { StatusFile } from "../../src/contract/status.js";
import { type CliRecipe, RECIPES, SECRET } from "./clis.js";
import { perTask, ROOT, readReport, realAgentsSuite } from "./harness.js";

const { world, server: modelServer } = realAgentsSuite("interactive");

/** The CLIs whose own events (hooks, notify, plugin) tell termorch their state. */
const HOOKED: ReadonlyArray<CliRecipe["preset"]> = ["claude", "codex", "opencode", "kilo", "pi"];

function prepare(
  recipe: CliRecipe,
  task: Record<string, unknown>,
): { dir: string; repo: string; file: string; config: string } {
  const { dir, repo } = world.workspace("Create the file. WRITE-FILE I\n");
  const config = join(dir, "termorch.json");
  const entry = recipe.agent(modelServer().url);
  const agent = { ...entry, env: { ...entry.env, ...recipe.interactiveEnv } };
  writeFileSync(config, JSON.stringify({ agents: { [recipe.preset]: agent } }));
  const file = join(dir, "assignments.json");
  writeFileSync(
    file,
    JSON.stringify({
      run_id: `i-${recipe.preset}-${Math.random().toString(36).slice(2, 8)}`,
      tasks: [
        {
          id: "I",
          agent: recipe.preset,
          context_path: "ctx/task.md",
          interactive: true,
          waiting_after_s: 3,
          timeout_s: 150,
          ...task,
        },
      ],
      environment: { workspace_dir: "repo", env_vars: [recipe.keyVar] },
    }),
  );
  return { dir, repo, file, config };
}

/** `termorch run` in the background, as a user leaves it running in another terminal. */
function start(recipe: CliRecipe, file: string, config: string): ResultPromise {
  return execa(process.execPath, [join(ROOT, "bin", "termorch.js"), "run", file, "--config", config], {
    reject: false,
    cwd: world.tmp,
    extendEnv: false,
    env: world.env({ [recipe.keyVar]: SECRET }),
    timeout: 170_000,
  });
}

/** The task's running status file once it says the agent waits for input. */
function waiting(dir: string, what: string): Promise<StatusFile> {
  return waitingFor(dir, (s) => Boolean(s.waiting_since), what);
}

/** The task's running status file once it satisfies `ok`. */
async function waitingFor(dir: string, ok: (s: StatusFile) => boolean, what: string): Promise<StatusFile> {
  const file = join(dir, "status", "I.running");
  const deadline = Date.now() + 120_000;
  for (;;) {
    if (existsSync(file)) {
      try {
        const s = JSON.parse(readFileSync(file, "utf8")) as StatusFile;
        if (ok(s)) return s;
      } catch {
        // Being replaced.
      }
    }
    if (existsSync(join(dir, "execution_report.json")))
      throw new Error(
        `the run ended before ${what}: ${readFileSync(join(dir, "execution_report.json"), "utf8")}`,
      );
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/**
 * The question the CLI asks in every new folder before its input prompt (copilot's folder trust),
 * reported and left alone until the operator answers it with the keys its status names first
 * (its first choice, this session only), as a user would.
 */
async function answerFirstQuestion(recipe: CliRecipe, dir: string, runId: string): Promise<void> {
  if (!recipe.asksFirst) return;
  const seen = modelServer().mainRequests().length;
  const asked = await waiting(dir, "the CLI's first question");
  expect(asked.waiting_for).toMatch(recipe.asksFirst);
  expect(modelServer().mainRequests().length).toBe(seen);
  expect(asked.waiting_answers?.[0]?.keys).toEqual(["1"]);
  const answer = await world.termorch(["send", "I", "--keys", "1", "--run", runId]);
  expect(answer.exitCode, answer.stderr).toBe(0);
  await waitingFor(dir, (s) => !s.waiting_since, "the answer to be taken");
}

/**
 * The operator answers the question on screen with the keys its status names first (yes, or
 * allow once), waits for the turn's end, and finishes the task; the run then merges it.
 */
async function answerAndFinish(
  dir: string,
  runId: string,
  run: ResultPromise,
  keys: readonly string[],
): Promise<void> {
  const answer = await world.termorch(["send", "I", "--keys", ...keys, "--run", runId]);
  expect(answer.exitCode, answer.stderr).toBe(0);
  const done = await waitingFor(dir, (s) => /turn is done/.test(s.waiting_for ?? ""), "the turn's end");
  expect(done.waiting_input).toBe(true);
  expect((await world.termorch(["finish", "I", "--run", runId])).exitCode).toBe(0);
  const r = await run;
  expect(r.exitCode, String(r.stderr)).toBe(0);
}

describe.each(Object.values(RECIPES))("$preset, interactive", (recipe) => {
  it("takes the prompt at its input prompt, works, waits, is finished and merged; the user's CLI configuration unchanged", async () => {
    modelServer().setScript(perTask);
    const before = world.cliFiles();
    const { dir, repo, file, config } = prepare(recipe, {});
    const run = start(recipe, file, config);
    await answerFirstQuestion(recipe, dir, JSON.parse(readFileSync(file, "utf8")).run_id);
    const status = await waiting(dir, "the agent to wait after its turn");
    expect(status.waiting_for).toEqual(expect.any(String));
    // The model saw the prompt, once, and wrote the file.
    const prompts = modelServer()
      .mainRequests()
      .filter((q) => q.text.includes("WRITE-FILE I"));
    expect(prompts.length).toBeGreaterThan(0);
    const finish = await world.termorch([
      "finish",
      "I",
      "--run",
      JSON.parse(readFileSync(file, "utf8")).run_id,
    ]);
    expect(finish.exitCode, finish.stderr).toBe(0);
    const r = await run;
    expect(r.exitCode, `${r.stderr}\n${readFileSync(join(dir, "execution_report.json"), "utf8")}`).toBe(0);
    expect(readFileSync(join(repo, "I.txt"), "utf8")).toBe("written for I\n");
    const task = readReport(dir).tasks[0]!;
    const hooked = HOOKED.includes(recipe.preset);
    expect(task.state_from).toBe(hooked ? "hooks" : "screen");
    // From the transcript the CLI keeps of the session, which its events name (opencode's: what
    // termorch's plugin recorded), or which termorch finds among its sessions by the worktree.
    expect(task.agent_result).toMatchObject({ summary: "Done: wrote I.txt", is_error: false });
    expect(task.agent_result?.session_id).toEqual(expect.any(String));
    expect(task.usage).toMatchObject({ input_tokens: 1210, output_tokens: 85, cache_read_tokens: 400 });
    const ledger = readFileSync(join(dir, "events.jsonl"), "utf8");
    expect(ledger).toContain('"task.prompt_delivered"');
    expect(world.cliFiles()).toEqual(before);
  });
});

/** Questions each CLI asks before its input prompt, provoked on purpose: never answered. */
const QUESTIONS: Array<{
  preset: "claude" | "codex";
  why: string;
  asks: RegExp;
  env?: Record<string, string>;
}> = [
  {
    preset: "claude",
    why: "an API key the user has not approved",
    asks: /API key/,
    // Not the key seedHome approved: Claude Code asks about each new key once.
    env: { ANTHROPIC_API_KEY: "sk-termorch-another-key-0123456789abcdef" },
  },
  {
    preset: "codex",
    why: "the offer of a newer model, which this user has not seen",
    asks: /new model/,
  },
];

describe.each(QUESTIONS)("$preset asks about $why", ({ preset, asks, env }) => {
  it("is reported as waiting_input saying what is asked; nothing is typed, nothing of the user's changes", async () => {
    const recipe = RECIPES[preset];
    modelServer().setScript(perTask);
    const before = world.cliFiles();
    const seen = modelServer().mainRequests().length;
    const { dir, file } = prepare(recipe, {});
    if (preset === "codex") {
      // The same agent without the config line that says the user has seen codex's model offer.
      const entry = recipe.agent(modelServer().url);
      const args = entry.args!.filter(
        (a, i, all) => !a.startsWith("notice.") && !all[i + 1]?.startsWith("notice."),
      );
      writeFileSync(join(dir, "termorch.json"), JSON.stringify({ agents: { codex: { ...entry, args } } }));
    }
    const run = execa(
      process.execPath,
      [join(ROOT, "bin", "termorch.js"), "run", file, "--config", join(dir, "termorch.json")],
      {
        reject: false,
        cwd: world.tmp,
        extendEnv: false,
        env: world.env({ [recipe.keyVar]: SECRET, ...env }),
        timeout: 170_000,
      },
    );
    const status = await waiting(dir, "the CLI's question to be reported");
    expect(status.waiting_for).toMatch(asks);
    const runId = (JSON.parse(readFileSync(file, "utf8")) as { run_id: string }).run_id;
    const shown = await world.termorch(["status", runId]);
    expect(shown.stdout).toMatch(asks);
    // Nothing was typed into the question: the model never got the prompt.
    expect(modelServer().mainRequests().length).toBe(seen);
    const cancel = await world.termorch(["cancel", runId]);
    expect(cancel.exitCode, cancel.stderr).toBe(0);
    const r = await run;
    expect(r.exitCode).toBe(130);
    expect(readReport(dir).tasks[0]).toMatchObject({ status: "failed", reason: "cancelled" });
    expect(world.cliFiles()).toEqual(before);
  });
});

describe("codex's model offer, answered with termorch send --keys", () => {
  it("status names the keys of each answer; --keys 2 keeps the model, the prompt reaches the model with it, and ~/.codex changes only by codex's note that the offer was seen", async () => {
    const recipe = RECIPES.codex;
    modelServer().setScript(perTask);
    const before = world.cliFiles();
    const toml = join(world.home, ".codex", "config.toml");
    const tomlBefore = readFileSync(toml, "utf8");
    try {
      const seen = modelServer().mainRequests().length;
      const { dir, repo, file, config } = prepare(recipe, {});
      // The agent without the config line that says the user has seen codex's model offer.
      const entry = recipe.agent(modelServer().url);
      const args = entry.args!.filter(
        (a, i, all) => !a.startsWith("notice.") && !all[i + 1]?.startsWith("notice."),
      );
      writeFileSync(config, JSON.stringify({ agents: { codex: { ...entry, args } } }));
      const runId = (JSON.parse(readFileSync(file, "utf8")) as { run_id: string }).run_id;
      const run = start(recipe, file, config);

      const asked = await waitingFor(
        dir,
        (s) => /new model/.test(s.waiting_for ?? ""),
        "codex's model offer",
      );
      expect(asked.waiting_answers?.[0]).toEqual({
        keys: ["2"],
        picks: expect.stringMatching(/^2\. Use existing model/),
      });
      const shown = await world.termorch(["status", runId]);
      expect(shown.stdout).toContain(
        `answer: termorch send I --keys 2 --run ${runId} (2. Use existing model`,
      );
      expect(modelServer().mainRequests().length).toBe(seen);

      // What the status line says: codex takes the digit as its choice, at once.
      const sent = await world.termorch(["send", "I", "--keys", "2", "--run", runId]);
      expect(sent.exitCode, sent.stderr).toBe(0);
      const done = await waitingFor(dir, (s) => /turn is done/.test(s.waiting_for ?? ""), "the turn's end");
      expect(done.waiting_input).toBe(true);
      // The prompt reached the model, asked of the model the session had.
      const prompts = modelServer()
        .mainRequests()
        .slice(seen)
        .filter((q) => q.text.includes("WRITE-FILE I"));
      expect(prompts.length).toBeGreaterThan(0);
      for (const q of prompts) expect((q.body as { model?: string }).model).toBe("gpt-5.5");
      expect((await world.termorch(["finish", "I", "--run", runId])).exitCode).toBe(0);
      const r = await run;
      expect(r.exitCode, String(r.stderr)).toBe(0);
      expect(readFileSync(join(repo, "I.txt"), "utf8")).toBe("written for I\n");

      // The user's codex configuration: only what codex itself records on "Use existing model",
      // that this offer was seen; its model is not rewritten.
      expect(readFileSync(toml, "utf8")).toBe(
        `${tomlBefore}\n[notice.model_migrations]\n"gpt-5.5" = "gpt-6-sol"\n`,
      );
      const others = (files: Map<string, string>) =>
        new Map([...files].filter(([path]) => path !== ".codex/config.toml"));
      expect(others(world.cliFiles())).toEqual(others(before));
    } finally {
      // The next test's user has not seen the offer either.
      writeFileSync(toml, tomlBefore);
    }
  });
});

describe.each(["claude", "codex"] as const)("%s asks permission for a command", (preset) => {
  it("is reported, the operator answers with termorch send, and the work goes on to the merge", async () => {
    const recipe = RECIPES[preset];
    // A command each CLI's edit mode runs only with the user's yes (claude: not a plain file
    // command; codex: escalated out of its sandbox).
    modelServer().setScript([
      { shell: `node -e "require('fs').writeFileSync('P.txt', 'approved\\n')"`, ask: true },
      { reply: "Done: ran it" },
    ]);
    const before = world.cliFiles();
    const { dir, repo, file, config } = prepare(recipe, {});
    const runId = (JSON.parse(readFileSync(file, "utf8")) as { run_id: string }).run_id;
    const run = start(recipe, file, config);
    // Claude Code's PermissionRequest hook names the tool (the screen's pattern would not; the
    // screen may show the question a moment before the hook names it).
    // The keys come from the question on screen, which its hook names.
    const asks = preset === "claude" ? /asks permission to use Bash/ : /permission/i;
    const asked = await waitingFor(
      dir,
      (s) => asks.test(s.waiting_for ?? "") && (s.waiting_answers ?? []).length > 0,
      "the permission question and its answers",
    );
    expect(asked.waiting_input).toBe(true);
    expect(asked.waiting_answers?.map((a) => a.keys)).toEqual([["1"], ["3"]]);
    // status' last line of a TUI keeps the gaps its cursor moves leave (Claude Code's footer).
    const status = await world.termorch(["status", runId]);
    // Claude Code 2.1 draws its question's footer word by word at columns (ESC [ n G).
    if (preset === "claude") expect(status.stdout).toContain("Esc to cancel · Tab to amend");
    // 1: yes, whatever is highlighted.
    await answerAndFinish(dir, runId, run, ["1"]);
    expect(readFileSync(join(repo, "P.txt"), "utf8")).toBe("approved\n");
    expect(world.cliFiles()).toEqual(before);
  });
});

describe.each(Object.values(RECIPES))("$preset, interactive, an API error", (recipe) => {
  it("the agent waits after its failed turn; finished, the task fails with no_changes, never a quiet success", async () => {
    modelServer().setScript([{ fail: 400, message: "termorch-test: the request was refused" }]);
    const { dir, file, config } = prepare(recipe, {});
    const runId = (JSON.parse(readFileSync(file, "utf8")) as { run_id: string }).run_id;
    const run = start(recipe, file, config);
    await answerFirstQuestion(recipe, dir, runId);
    const status = await waiting(dir, "the agent to wait after its failed turn");
    // claude's StopFailure hook, opencode's session.error event and pi's failed message quote the
    // error; the others' screens show their prompt again.
    if (["claude", "opencode", "kilo", "pi"].includes(recipe.preset))
      expect(status.waiting_for).toContain("the request was refused");
    expect((await world.termorch(["finish", "I", "--run", runId])).exitCode).toBe(0);
    const r = await run;
    expect(r.exitCode).toBe(1);
    expect(readReport(dir).tasks[0]).toMatchObject({ status: "failed", reason: "no_changes" });
  });
});

describe.each(["opencode", "kilo"] as const)("%s asks permission to write outside its folder", (preset) => {
  it("its plugin reports the question, the operator answers with termorch send, and the work goes on to the merge", async () => {
    const recipe = RECIPES[preset];
    const outside = join(world.tmp, `outside-${preset}.txt`);
    // A path out of the worktree: opencode's external_directory permission asks by default.
    modelServer().setScript([
      { write: outside, content: "approved\n" },
      { write: "I.txt", content: "written for I\n" },
      { reply: "Done: wrote both" },
    ]);
    const before = world.cliFiles();
    const { dir, repo, file, config } = prepare(recipe, {});
    const runId = (JSON.parse(readFileSync(file, "utf8")) as { run_id: string }).run_id;
    const run = start(recipe, file, config);
    // Its screen may show the question a moment before its plugin's event names it.
    const asked = await waitingFor(
      dir,
      (s) => /asks permission: external_directory/.test(s.waiting_for ?? ""),
      "the plugin's permission question",
    );
    expect(asked.waiting_input).toBe(true);
    expect(existsSync(outside)).toBe(false);
    // Enter: the question's first answer, allow once (its answers in a row take no digits).
    const answers = await waitingFor(dir, (s) => Boolean(s.waiting_answers?.length), "its answers");
    expect(answers.waiting_answers?.map((a) => a.keys)).toEqual([
      ["Enter"],
      preset === "opencode" ? ["Escape"] : ["Escape", "Enter"],
    ]);
    await answerAndFinish(dir, runId, run, ["Enter"]);
    expect(readFileSync(outside, "utf8")).toBe("approved\n");
    expect(readFileSync(join(repo, "I.txt"), "utf8")).toBe("written for I\n");
    expect(readReport(dir).tasks[0]).toMatchObject({ state_from: "hooks" });
    expect(world.cliFiles()).toEqual(before);
  });
});
