// Every preset's headless form through the built termorch CLI, with the real CLI pinned in
// test/agents-real/package.json talking to the scripted model server: the edit is merged, the
// report's agent_result and usage are what the server sent, a dependent's prompt carries its
// dependency's result, the key never reaches a file, and the failure paths say what failed.
import { existsSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { PRESETS } from "../../src/agent/presets.js";
import { type CliRecipe, RECIPES, SECRET } from "./clis.js";
import { allText, perTask, readReport, realAgentsSuite, type World } from "./harness.js";

const { world, server: modelServer } = realAgentsSuite("headless");

/** A run of the given tasks, all on one preset, in a fresh repository. */
function prepare(
  recipe: CliRecipe,
  tasks: Array<{ id: string; context: string; dependencies?: string[]; [k: string]: unknown }>,
): { dir: string; repo: string; file: string } {
  const { dir, repo } = world.workspace();
  for (const t of tasks) writeFileSync(join(repo, "ctx", `${t.id}.md`), t.context);
  writeFileSync(
    join(dir, "termorch.json"),
    JSON.stringify({ agents: { [recipe.preset]: recipe.agent(modelServer().url) } }),
  );
  const file = join(dir, "assignments.json");
  writeFileSync(
    file,
    JSON.stringify({
      run_id: `${recipe.preset}-${Math.random().toString(36).slice(2, 8)}`,
      tasks: tasks.map(({ context: _, ...t }) => ({
        agent: recipe.preset,
        context_path: `ctx/${t.id}.md`,
        dependencies: [],
        ...t,
      })),
      environment: { workspace_dir: "repo", env_vars: [recipe.keyVar] },
    }),
  );
  return { dir, repo, file };
}

function run(recipe: CliRecipe, dir: string, file: string): ReturnType<World["termorch"]> {
  return world.termorch(["run", file, "--config", join(dir, "termorch.json")], {
    env: { [recipe.keyVar]: SECRET },
  });
}

describe.each(Object.values(RECIPES))("$preset, headless", (recipe) => {
  it("edits are merged; agent_result, usage and the dependency's result in the prompt are right", async () => {
    modelServer().setScript(perTask);
    const { dir, repo, file } = prepare(recipe, [
      { id: "A", context: "Create the file. WRITE-FILE A\n" },
      { id: "B", context: "Create the next file. WRITE-FILE B\n", dependencies: ["A"] },
    ]);
    const before = modelServer().requests.length;
    const r = await run(recipe, dir, file);
    expect(r.exitCode, r.stderr).toBe(0);
    expect(readFileSync(join(repo, "A.txt"), "utf8")).toBe("written for A\n");
    expect(readFileSync(join(repo, "B.txt"), "utf8")).toBe("written for B\n");
    const report = readReport(dir);
    // cn 1.5 prints its answer alone: its tokens and session id come from the session it keeps.
    for (const t of report.tasks) {
      expect(t.status).toBe("success");
      expect(t.agent_result).toMatchObject({ summary: `Done: wrote ${t.id}.txt`, is_error: false });
      expect(t.agent_result?.session_id).toEqual(expect.any(String));
      // The tool call's turn (10 in, 5 out) and the answer's (1200 in, 400 of them cache reads),
      // counted alike whichever way the CLI counts cached input.
      expect(t.usage).toMatchObject({ input_tokens: 1210, output_tokens: 85, cache_read_tokens: 400 });
      // Cache writes, where the API reports them: Anthropic's, and OpenAI Responses' (codex kept them from 0.171).
      if (recipe.preset === "claude" || recipe.preset === "codex")
        expect(t.usage?.cache_write_tokens).toBe(100);
    }
    expect(report.summary.usage).toMatchObject({
      input_tokens: 2420,
      output_tokens: 170,
      cache_read_tokens: 800,
    });
    // B's requests carry A's summary: termorch put it in B's prompt.
    const bRequests = modelServer()
      .requests.slice(before)
      .filter((q) => q.main && q.text.includes("WRITE-FILE B"));
    expect(bRequests.length).toBeGreaterThan(0);
    expect(bRequests[0]!.text).toContain("Done: wrote A.txt");
    // The key went to the CLI (the server saw it) and into no file of the run.
    expect(modelServer().mainRequests().at(-1)!.auth).toContain(SECRET);
    expect(allText(dir)).not.toContain(SECRET);
  });

  // Qwen Code and cn retry a 429 for minutes and take no setting that stops it (gemini, whose
  // fork Qwen Code is, does: general.maxAttempts, in the test user's settings).
  it.each(recipe.preset === "qwen" || recipe.preset === "cn" ? [400] : [400, 429])(
    "an API error (HTTP %i) fails the task, and the console line says what the API said",
    async (status) => {
      modelServer().setScript([{ fail: status, message: "termorch-test: the request was refused" }]);
      // A 429 the CLI gave up on is a rate limit: `fail` ends the task with its reason (the default waits).
      const { dir, file } = prepare(recipe, [
        { id: "E", context: "Do the thing.\n", rate_limit: { on: "fail" } },
      ]);
      const r = await run(recipe, dir, file);
      expect(r.exitCode).toBe(1);
      const t = readReport(dir).tasks[0]!;
      expect(t.status).toBe("failed");
      if (status === 429) expect(t.reason).toBe("rate_limited");
      else expect(t.reason).not.toBe("rate_limited");
      expect(t.agent_result?.is_error).toBe(true);
      // codex gives up on a 429 with a message of its own: "exceeded retry limit, last status: 429 …".
      const said =
        status === 429 && recipe.preset === "codex" ? "last status: 429" : "the request was refused";
      expect(t.agent_result?.summary).toContain(said);
      // gemini exits with the HTTP status mod 256, its error object bare on stderr.
      if (recipe.preset === "gemini") expect(t.exit_code).toBe(status % 256);
      expect(r.stderr).toContain(said);
    },
  );

  // The CLIs that give up on a 429 at once or after a few of their own retries (each honouring the
  // retry-after, 3 s): how many of its requests the provider refuses until the CLI gives up.
  const GIVES_UP_AFTER: Partial<Record<CliRecipe["preset"], number>> = {
    claude: 1,
    codex: 1,
    gemini: 1,
    opencode: 6,
    kilo: 6,
    pi: 12,
    copilot: 6,
  };
  const refusals = GIVES_UP_AFTER[recipe.preset];
  it.skipIf(refusals === undefined)(
    "a 429 with retry-after 3 that its CLI gives up on: the task waits for it to lift, then the attempt runs again and merges",
    async () => {
      modelServer().setScript(perTask);
      modelServer().failFirst(refusals!, {
        fail: 429,
        message: "Rate limit reached for test-model on requests per min (RPM). Please try again in 3s.",
        retryAfter: "3",
      });
      const { dir, repo, file } = prepare(recipe, [
        {
          id: "A",
          context: "WRITE-FILE A\n",
          retries: 0,
          rate_limit: { on: "wait", backoff_s: 3, max_wait_s: 120 },
        },
      ]);
      const r = await run(recipe, dir, file);
      const t = readReport(dir).tasks[0]!;
      expect(r.exitCode, `${r.stderr}\n${JSON.stringify(t, null, 2)}`).toBe(0);
      expect(t).toMatchObject({ status: "success", attempts: 2 });
      const [limited, again] = t.attempt_history!;
      expect(limited).toMatchObject({ reason: "rate_limited" });
      expect(limited!.detail).toMatch(/^its CLI gave up on a rate limit/);
      // About 3 s: the retry-after it passed on (opencode, kilo) or said (pi), else the task's backoff_s.
      const waited = Date.parse(again!.waited_until!) - Date.parse(limited!.finished_at!);
      // A reset read from the CLI's words counts from when termorch read them, a moment before the attempt closed.
      expect(waited).toBeGreaterThanOrEqual(2500);
      expect(waited).toBeLessThanOrEqual(3100);
      expect(existsSync(join(repo, "A.txt"))).toBe(true);
    },
  );

  // Qwen Code retries a 429 by itself for about 40 minutes, saying so on stderr: termorch ends it
  // after the task's rate_limit.max_retrying_s, as a rate limit of its own to deal with.
  it.skipIf(recipe.preset !== "qwen")(
    "a 429 its CLI retries by itself for minutes: ended after rate_limit.max_retrying_s as rate_limited",
    async () => {
      modelServer().setScript(perTask);
      // A retry-after of 1 s keeps its inner tries short (0 leaves its own backoff, about 110 s).
      modelServer().failFirst(100_000, {
        fail: 429,
        message: "Rate limit reached for test-model.",
        retryAfter: "1",
      });
      const { dir, file } = prepare(recipe, [
        { id: "Q", context: "WRITE-FILE Q\n", rate_limit: { on: "fail", max_retrying_s: 5 } },
      ]);
      const started = Date.now();
      const r = await run(recipe, dir, file);
      modelServer().failFirst(0, { fail: 429, message: "" });
      const t = readReport(dir).tasks[0]!;
      expect(r.exitCode, `${r.stderr}\n${JSON.stringify(t, null, 2)}`).toBe(1);
      expect(t).toMatchObject({ status: "failed", reason: "rate_limited", attempts: 1 });
      expect(t.detail).toMatch(
        /^its CLI kept retrying a rate limit by itself for \d+ s, past rate_limit.max_retrying_s; termorch ended it: Retrying in \d+s \(attempt \d+\/\d+\)/,
      );
      // Minutes sooner than its own retrying would have ended.
      expect(Date.now() - started).toBeLessThan(120_000);
    },
  );

  it("an agent that exits 0 having changed nothing fails with no_changes; a 200 KiB prompt arrives whole", async () => {
    modelServer().setScript([{ reply: "I looked and did nothing." }]);
    // Over Linux's 128 KiB limit of one argument: the prompt must go in on stdin, whole.
    const marker = `END-OF-CONTEXT-${recipe.preset}-${Date.now()}`;
    const context = `Do the thing.\n${"lorem ipsum dolor sit amet\n".repeat(7600)}${marker}\n`;
    const { dir, repo, file } = prepare(recipe, [{ id: "N", context }]);
    const head = readFileSync(join(repo, ".git", "HEAD"), "utf8");
    const r = await run(recipe, dir, file);
    expect(r.exitCode).toBe(1);
    const t = readReport(dir).tasks[0]!;
    expect(t).toMatchObject({ status: "failed", reason: "no_changes", exit_code: 0 });
    expect(
      modelServer()
        .mainRequests()
        .some((q) => q.text.includes(marker)),
    ).toBe(true);
    expect(t.gates.find((g) => g.name === "changes")?.passed).toBe(false);
    expect(readFileSync(join(repo, ".git", "HEAD"), "utf8")).toBe(head);
  });
});

describe("claude's permission bypass as root", () => {
  it("is refused up front (exit 2, nothing started) unless the agent says IS_SANDBOX=1, as the CLI itself requires", async () => {
    const recipe = RECIPES.claude;
    modelServer().setScript(perTask);
    const { dir, repo, file } = prepare(recipe, [{ id: "R", context: "Create the file. WRITE-FILE R\n" }]);
    const bypass = (extra: Record<string, string>): void => {
      const entry = recipe.agent(modelServer().url);
      writeFileSync(
        join(dir, "termorch.json"),
        JSON.stringify({
          agents: {
            claude: { ...entry, env: { ...entry.env, ...extra }, dangerously_bypass_permissions: true },
          },
        }),
      );
    };
    bypass({});
    const refused = await run(recipe, dir, file);
    if (process.getuid?.() === 0) {
      expect(refused.exitCode).toBe(2);
      expect(refused.stderr).toContain("refuses to run as root");
      expect(refused.stderr).toContain("IS_SANDBOX=1");
      expect(readdirSync(join(dir))).not.toContain("logs");
      // Claude Code lets its bypass run as root in a sandbox: so does termorch.
      bypass({ IS_SANDBOX: "1" });
    }
    const r = await run(recipe, dir, file);
    expect(r.exitCode, r.stderr).toBe(0);
    expect(readFileSync(join(repo, "R.txt"), "utf8")).toBe("written for R\n");
  });
});

describe.each(Object.values(RECIPES))("$preset, headless, a handoff", (recipe) => {
  it("the agent fills the template termorch made; the gate passes and the dependent's prompt carries it", async () => {
    const handoff = [
      "# Handoff: H",
      "",
      "## Summary",
      `Wrote H.txt with ${recipe.preset}.`,
      "",
      "## Files Touched",
      "- H.txt",
      "",
      "## How to Verify",
      "cat H.txt",
      "",
    ].join("\n");
    modelServer().setScript((text) =>
      text.includes("WRITE-FILE D")
        ? perTask(text)
        : [
            // Read first: Claude Code writes over a file only once it was read.
            { read: ".termorch/handoff.md" },
            { write: "H.txt", content: "handed over\n" },
            { write: ".termorch/handoff.md", content: handoff },
            { reply: "Done: wrote H.txt and the handoff" },
          ],
    );
    const { dir, repo, file } = prepare(recipe, [
      { id: "H", context: "Create H.txt and fill in your handoff.\n", success_criteria: { handoff: true } },
      { id: "D", context: "Create the next file. WRITE-FILE D\n", dependencies: ["H"] },
    ]);
    const before = modelServer().requests.length;
    const r = await run(recipe, dir, file);
    expect(r.exitCode, `${r.stderr}\n${readFileSync(join(dir, "execution_report.json"), "utf8")}`).toBe(0);
    const h = readReport(dir).tasks.find((t) => t.id === "H")!;
    expect(h.gates.find((g) => g.name === "handoff")?.passed).toBe(true);
    expect(readFileSync(join(dir, "artifacts", "H", "handoff.md"), "utf8")).toBe(handoff);
    // The handoff is scratch: never merged.
    expect(readFileSync(join(repo, "H.txt"), "utf8")).toBe("handed over\n");
    expect(existsSync(join(repo, ".termorch", "handoff.md"))).toBe(false);
    const dRequest = modelServer()
      .requests.slice(before)
      .find((q) => q.main && q.text.includes("WRITE-FILE D"));
    expect(dRequest?.text).toContain(`Wrote H.txt with ${recipe.preset}.`);
  });
});

describe.each(Object.values(RECIPES))(
  "$preset, headless, the config's model and permission bypass",
  (recipe) => {
    it("runs with the CLI's bypass flag in place of its edit mode, and asks the server for the model the config names", async () => {
      modelServer().setScript(perTask);
      const { dir, repo, file } = prepare(recipe, [{ id: "M", context: "Create the file. WRITE-FILE M\n" }]);
      const entry = recipe.agent(modelServer().url);
      const preset = PRESETS[recipe.preset];
      const configure = (bypass: boolean): void =>
        writeFileSync(
          join(dir, "termorch.json"),
          JSON.stringify({
            agents: {
              [recipe.preset]: {
                ...entry,
                // The model is the config's now (codex's entry names one with -m: a second is refused).
                ...(entry.args
                  ? { args: entry.args.filter((a, i, all) => a !== "-m" && all[i - 1] !== "-m") }
                  : {}),
                // Claude Code runs its bypass as root only in a sandbox it is told of.
                env: { ...entry.env, ...(recipe.preset === "claude" ? { IS_SANDBOX: "1" } : {}) },
                ...(recipe.model ? { model: recipe.model.config } : {}),
                dangerously_bypass_permissions: bypass,
              },
            },
          }),
        );
      configure(true);
      if (preset.bypass.length === 0) {
        // pi has no bypass: asking for one is refused up front, and nothing starts.
        const refused = await run(recipe, dir, file);
        expect(refused.exitCode).toBe(2);
        expect(refused.stderr).toContain("has no flag that bypasses its permissions");
        configure(false);
      }
      const before = modelServer().requests.length;
      const r = await run(recipe, dir, file);
      expect(r.exitCode, r.stderr).toBe(0);
      expect(readFileSync(join(repo, "M.txt"), "utf8")).toBe("written for M\n");
      const argv = readReport(dir).tasks[0]!.argv;
      for (const flag of preset.bypass) expect(argv).toContain(flag);
      for (const flag of preset.edit_mode.filter((f) => !preset.bypass.includes(f)))
        expect(argv).not.toContain(flag);
      if (recipe.model) {
        const sent = modelServer()
          .requests.slice(before)
          .filter((q) => q.main)
          .map((q) =>
            q.protocol === "gemini"
              ? /\/models\/([^/:]+):/.exec(q.path)?.[1]
              : (q.body as { model?: string }).model,
          );
        expect(sent.length).toBeGreaterThan(0);
        expect(new Set(sent)).toEqual(new Set([recipe.model.sent]));
      }
    });
  },
);
