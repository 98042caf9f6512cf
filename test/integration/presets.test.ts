// The built-in agent presets, through the built CLI, with the stand-in CLIs of
// test/fixtures/agents/ first on PATH: each accepts exactly its preset's flags, reads the prompt
// where the real CLI would, edits the worktree and prints the real CLI's documented output. How
// what a CLI prints decides its task's outcome (agent_error, an error kept in agent_result) is
// the middle tier's: test/middle/agent-result.test.ts.
import { existsSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { delimiter, join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { git, killServer, makeWorkspace, ROOT, readReport, termorch, uniqueSocket } from "./harness.js";

const socket = uniqueSocket("presets");
const STUBS = join(ROOT, "test", "fixtures", "agents");
const cleanups: (() => void)[] = [];
afterAll(() => {
  killServer(socket);
  for (const c of cleanups) c();
});

function workspace(): ReturnType<typeof makeWorkspace> {
  const ws = makeWorkspace();
  cleanups.push(ws.cleanup);
  return ws;
}

/** An assignments file whose tasks tell the stand-ins where to log (agents see only the variables they are given). */
function assignments(dir: string, tasks: object[], stub: Record<string, string> = {}): string {
  const file = join(dir, "assignments.json");
  writeFileSync(
    file,
    JSON.stringify({
      run_id: `p${Math.random().toString(36).slice(2, 8)}`,
      tasks: tasks.map((t) => ({
        context_path: "ctx/task.md",
        dependencies: [],
        env: { STUB_ARGV_LOG: join(dir, "argv.jsonl"), ...stub },
        ...t,
      })),
      environment: { workspace_dir: "repo" },
    }),
  );
  return file;
}

/** The stand-in CLIs first on PATH (the agents' PATH is termorch's). */
const withStubs = (): Record<string, string> => ({ PATH: `${STUBS}${delimiter}${process.env.PATH}` });

const argvLog = (dir: string): string[][] =>
  readFileSync(join(dir, "argv.jsonl"), "utf8")
    .split("\n")
    .filter(Boolean)
    .map((l) => JSON.parse(l) as string[]);

describe("agent presets", () => {
  it.each(["claude", "codex", "aider", "gemini", "opencode"])(
    "%s runs with no config: its documented flags, its prompt, its work merged, its result parsed",
    async (name) => {
      const { dir, repo } = workspace();
      const file = assignments(dir, [{ id: "t", agent: name }]);
      const r = await termorch(["run", file], { socket, env: withStubs() });
      expect(r.stderr + r.stdout).not.toMatch(/unknown option/);
      expect(r.exitCode).toBe(0);
      const report = readReport(dir);
      expect(report.tasks[0]).toMatchObject({ status: "success", argv: expect.arrayContaining([name]) });
      // The stub's edit reached the user's branch.
      expect(git(repo, "show", "HEAD:STUB_EDITS.md")).toContain("t");
      expect(argvLog(dir)).toHaveLength(1);
      if (name !== "aider") expect(report.tasks[0]!.agent_result).toMatchObject({ is_error: false });
      expect(report.tasks[0]!.usage).not.toBeNull();
      expect(report.summary.usage).toEqual(report.tasks[0]!.usage);
      expect(readFileSync(join(dir, "artifacts", "t", "prompt.md"), "utf8")).toContain("# do the thing");
      // The agent's unredacted copy does not outlive the report.
      expect(existsSync(join(dir, ".termorch", report.run_id!, "prompts"))).toBe(false);
    },
  );

  it("gives a dependent task its context followed by what its dependency did, on standard input", async () => {
    const { dir } = workspace();
    const file = assignments(dir, [
      { id: "a", agent: "claude" },
      { id: "b", agent: "claude", dependencies: ["a"] },
    ]);
    const r = await termorch(["run", file], { socket, env: withStubs() });
    expect(r.exitCode).toBe(0);
    const report = readReport(dir);
    const a = report.tasks.find((t) => t.id === "a")!;
    const prompt = readFileSync(join(dir, "artifacts", "b", "prompt.md"), "utf8");
    expect(prompt.startsWith("# do the thing\n")).toBe(true);
    expect(prompt).toContain("### a");
    expect(prompt).toContain("STUB_EDITS.md");
    expect(prompt).toContain(a.agent_result!.summary!.split("\n")[0]!);
    // Both tasks' usage adds up in the summary.
    const b = report.tasks.find((t) => t.id === "b")!;
    expect(report.summary.usage!.cost_usd).toBeCloseTo(a.usage!.cost_usd! + b.usage!.cost_usd!, 6);
  });

  it.each(["claude", "aider"])(
    "%s gets a context file over 128 KiB intact, never as one argument",
    async (name) => {
      const { dir, repo } = workspace();
      const big = `# big\n${"x".repeat(200 * 1024)}\n`;
      writeFileSync(join(repo, "ctx", "big.md"), big);
      git(repo, "add", "-A");
      git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "big context");
      const prompts = join(dir, "prompt.log");
      const file = assignments(dir, [{ id: "big", agent: name, context_path: "ctx/big.md" }], {
        STUB_PROMPT_LOG: prompts,
      });
      const r = await termorch(["run", file], { socket, env: withStubs() });
      expect(r.exitCode).toBe(0);
      // Whole, and followed by termorch's own sections only.
      const got = readFileSync(prompts, "utf8");
      expect(got.startsWith(big)).toBe(true);
      expect(got.slice(big.length)).toMatch(/^\n\n---\n\n## If you cannot finish: your decision\n/);
      for (const argv of argvLog(dir)) expect(Math.max(...argv.map((arg) => arg.length))).toBeLessThan(4096);
    },
  );

  it("prices a CLI that reports tokens but no cost; an escalation's costs add up, each said how it was known", async () => {
    const { dir } = workspace();
    const config = join(dir, "termorch.json");
    // gemini's stand-in reports tokens only; claude's reports its cost (issue 37's prices).
    writeFileSync(
      config,
      JSON.stringify({ prices: { gemini: { input: 1.25, output: 10, cache_read: 0.31 } } }),
    );
    // The first attempt (gemini) fails its tests; the second, escalated to claude, passes them.
    const once = join(dir, "failed-once");
    const file = assignments(dir, [
      {
        id: "t",
        agent: "gemini",
        escalation: ["claude"],
        retries: 1,
        success_criteria: { tests_cmd: `test -e ${once} || { touch ${once}; exit 1; }` },
      },
    ]);
    const r = await termorch(["run", file], { socket, env: { ...withStubs(), TERMORCH_CONFIG: config } });
    expect(r.exitCode).toBe(0);
    const task = readReport(dir).tasks[0]!;
    const [first, second] = task.attempt_history ?? [];
    expect(first).toMatchObject({ agent: "gemini", reason: "validation", usage: { cost_source: "prices" } });
    expect(second).toMatchObject({ agent: "claude", reason: null, usage: { cost_source: "cli" } });
    const u = first!.usage!;
    const fresh = u.input_tokens! - (u.cache_read_tokens ?? 0) - (u.cache_write_tokens ?? 0);
    const priced =
      (fresh * 1.25 +
        (u.cache_read_tokens ?? 0) * 0.31 +
        (u.cache_write_tokens ?? 0) * 1.25 +
        u.output_tokens! * 10) /
      1e6;
    expect(u.cost_usd).toBeCloseTo(priced, 6);
    expect(u.cost_usd).toBeGreaterThan(0);
    expect(task.usage).toMatchObject({ cost_source: "mixed" });
    expect(task.usage!.cost_usd).toBeCloseTo(u.cost_usd! + second!.usage!.cost_usd!, 6);
    expect(task.usage!.input_tokens).toBe(u.input_tokens! + second!.usage!.input_tokens!);
    const page = readFileSync(join(dir, "report.html"), "utf8");
    expect(page).toContain("partly from prices");
    expect(page).toMatch(/data-attempt="1">[^<]*gemini.*from prices/);
  });

  /** The file with `environment.resource_limits` set. */
  const limited = (file: string, limits: object): string => {
    const a = JSON.parse(readFileSync(file, "utf8")) as { environment: Record<string, unknown> };
    a.environment.resource_limits = limits;
    writeFileSync(file, JSON.stringify(a));
    return file;
  };

  it("refuses a budget in USD over an agent whose cost nobody reports, naming it and what to add; prices make it keepable", async () => {
    const { dir } = workspace();
    const file = limited(
      assignments(dir, [{ id: "t", agent: "gemini", escalation: ["claude"], retries: 1 }]),
      {
        max_cost_usd: 1,
      },
    );
    const r = await termorch(["validate", file], { socket, env: withStubs() });
    expect(r.exitCode).toBe(2);
    expect(r.stderr).toMatch(
      /environment\.resource_limits\.max_cost_usd.*a budget in USD cannot be kept: agent "gemini" reports no cost and the config's "prices" have none for "gemini"; add "prices": \{"gemini"/,
    );
    // claude, its escalation, reports its cost: only gemini is named.
    expect(r.stderr).not.toMatch(/"claude" reports no cost/);
    expect(existsSync(join(dir, "status"))).toBe(false);
    const config = join(dir, "termorch.json");
    writeFileSync(config, JSON.stringify({ prices: { gemini: { input: 1.25, output: 10 } } }));
    const priced = await termorch(["validate", file, "--config", config], { socket, env: withStubs() });
    expect(priced.stderr).toBe("");
    expect(priced.exitCode).toBe(0);
    // A budget in tokens needs no price.
    limited(file, { max_tokens: 1000 });
    expect((await termorch(["validate", file], { socket, env: withStubs() })).exitCode).toBe(0);
  });

  it("stops starting tasks at the run's budget: the rest fail with reason budget, as any failure does", async () => {
    const { dir, repo } = workspace();
    const file = limited(
      assignments(dir, [
        { id: "a", agent: "claude" },
        { id: "b", agent: "claude", dependencies: ["a"] },
        { id: "c", agent: "claude", dependencies: ["b"] },
      ]),
      { max_tokens: 1 },
    );
    const r = await termorch(["run", file], { socket, env: withStubs() });
    expect(r.exitCode).toBe(1);
    const report = readReport(dir);
    expect(report.tasks.map((t) => [t.id, t.status, t.reason])).toEqual([
      ["a", "success", null],
      ["b", "failed", "budget"],
      ["c", "skipped", "dependency_failed"],
    ]);
    expect(report.tasks[1]!.detail).toMatch(
      /^the run's budget of 1 tokens is spent: [\d,]+; it did not start$/,
    );
    expect(report.summary.budget).toMatchObject({ max_tokens: 1, max_cost_usd: null, exhausted: true });
    expect(report.summary.budget!.spent_tokens).toBe(
      report.tasks[0]!.usage!.input_tokens! + report.tasks[0]!.usage!.output_tokens!,
    );
    // The views say it too: status, in words and in its JSON (MCP wait's budget is the same view's).
    const status = await termorch(["status", dir], { socket });
    expect(status.stdout).toMatch(
      /budget: [\d,]+ tokens of 1 \(\d+ %\) spent: exhausted, no new attempt starts/,
    );
    const json = JSON.parse((await termorch(["status", dir, "--json"], { socket })).stdout) as {
      runs: { budget: unknown }[];
    };
    expect(json.runs[0]!.budget).toEqual(report.summary.budget);
    // As with any failed task: nothing merged, a's work kept on its branch.
    expect(report.merge.result).toBe("skipped");
    expect(git(repo, "show", `${report.tasks[0]!.branch}:STUB_EDITS.md`)).toContain("a");
  });

  it("resume with a raised budget goes on where the budget stopped the run: by flag, or in the file; nothing that finished runs again", async () => {
    const { dir, repo } = workspace();
    const file = limited(
      assignments(dir, [
        { id: "a", agent: "claude" },
        { id: "b", agent: "claude", dependencies: ["a"] },
        { id: "c", agent: "claude", dependencies: ["b"] },
      ]),
      { max_tokens: 1 },
    );
    expect((await termorch(["run", file], { socket, env: withStubs() })).exitCode).toBe(1);
    const spent = readReport(dir).summary.budget!.spent_tokens;
    // Without a raise, it is finished, and says how to go on.
    const same = await termorch(["resume", dir], { socket, env: withStubs() });
    expect(same.exitCode).toBe(2);
    expect(same.stderr).toMatch(/already finished .*; its budget stopped b/);
    expect(same.stderr).toMatch(/--max-cost-usd N \(or --max-tokens N/);
    // A raise that is spent already goes nowhere, and changes nothing.
    const short = await termorch(["resume", dir, "--max-tokens", String(spent)], {
      socket,
      env: withStubs(),
    });
    expect(short.exitCode).toBe(2);
    expect(short.stderr).toMatch(
      /the run's new budget of [\d,]+ tokens is spent: [\d,]+; give it more than that/,
    );
    expect(readReport(dir).tasks[1]!.reason).toBe("budget");
    // Another change to the file than its budget is refused.
    const planned = readFileSync(file, "utf8");
    writeFileSync(file, planned.replace('"id":"c"', '"id":"c","retries":3'));
    const edited = await termorch(["resume", dir], { socket, env: withStubs() });
    expect(edited.exitCode).toBe(2);
    expect(edited.stderr).toMatch(/changed since run .* started; .*only its budget/);
    // The budget raised in the file: b runs, and c after it, with what is left; then b's spend stops c.
    writeFileSync(file, planned.replace('"max_tokens":1', `"max_tokens":${spent + 1}`));
    const once = await termorch(["resume", dir], { socket, env: withStubs() });
    expect(once.exitCode).toBe(1);
    expect(readReport(dir).tasks.map((t) => [t.id, t.status, t.reason])).toEqual([
      ["a", "success", null],
      ["b", "success", null],
      ["c", "failed", "budget"],
    ]);
    // By flag: c runs, the run merges; a and b ran once each.
    const done = await termorch(["resume", dir, "--max-tokens", "1000000"], { socket, env: withStubs() });
    expect(done.exitCode, done.stderr).toBe(0);
    const report = readReport(dir);
    expect(report.tasks.map((t) => [t.id, t.status, t.attempts])).toEqual([
      ["a", "success", 1],
      ["b", "success", 1],
      ["c", "success", 1],
    ]);
    expect(report.summary.budget).toMatchObject({ max_tokens: 1_000_000, exhausted: false });
    expect(report.merge.result).toBe("success");
    expect(argvLog(dir)).toHaveLength(3);
    expect(git(repo, "show", "HEAD:STUB_EDITS.md")).toMatch(/a[\s\S]*b[\s\S]*c/);
    const raised = readFileSync(join(dir, "events.jsonl"), "utf8")
      .split("\n")
      .filter((l) => l.includes('"run.budget_raised"'))
      .map((l) => (JSON.parse(l) as { data: { to: unknown; reopened: string[] } }).data);
    expect(raised).toEqual([
      { from: { max_tokens: 1 }, to: { max_tokens: spent + 1 }, reopened: ["b", "c"] },
      { from: { max_tokens: spent + 1 }, to: { max_tokens: 1_000_000 }, reopened: ["c"] },
    ]);
  });

  it("gives claude's own --max-budget-usd what the budgets leave; a CLI stopped at it fails its task with reason budget", async () => {
    const { dir } = workspace();
    const file = assignments(dir, [
      { id: "rich", agent: "claude", budget: { max_cost_usd: 5 } },
      { id: "poor", agent: "claude", budget: { max_cost_usd: 0.001 }, retries: 2 },
    ]);
    const r = await termorch(["run", file], { socket, env: withStubs() });
    expect(r.exitCode).toBe(1);
    const report = readReport(dir);
    const [rich, poor] = report.tasks;
    expect(rich).toMatchObject({ status: "success" });
    // The stand-in stops as Claude Code 2.1.197 does: its usage zeroed, the tokens in modelUsage.
    expect(poor).toMatchObject({ status: "failed", reason: "budget", attempts: 1 });
    expect(poor!.detail).toMatch(
      /^the task's budget of \$0\.0010 is spent: \$0\.0\d+; its CLI stopped at the budget it was given: Reached maximum budget \(\$0\.001\)$/,
    );
    expect(poor!.usage!.input_tokens).toBeGreaterThan(0);
    const caps = argvLog(dir).map((argv) => argv[argv.indexOf("--max-budget-usd") + 1]);
    expect(caps.sort()).toEqual(["0.001", "5"]);
  });

  it("refuses a preset whose CLI is not on PATH, saying what to install, and starts nothing", async () => {
    const { dir } = workspace();
    const file = assignments(dir, [{ id: "t", agent: "codex" }]);
    const r = await termorch(["validate", file], { socket, env: { PATH: "/usr/bin:/bin" } });
    expect(r.exitCode).toBe(2);
    expect(r.stderr).toMatch(/agent "codex" runs codex, which is not on the agent's PATH/);
    expect(r.stderr).toMatch(/npm install -g @openai\/codex/);
    const run = await termorch(["run", file], {
      socket,
      env: { PATH: `/usr/bin:/bin:${process.execPath.replace(/\/node$/, "")}` },
    });
    expect(run.exitCode).toBe(2);
  });

  it("refuses an empty context file for a preset: it would be the CLI's whole prompt", async () => {
    const { dir, repo } = workspace();
    writeFileSync(join(repo, "ctx", "empty.md"), "");
    const file = assignments(dir, [{ id: "t", agent: "claude", context_path: "ctx/empty.md" }]);
    const r = await termorch(["validate", file], { socket, env: withStubs() });
    expect(r.exitCode).toBe(2);
    expect(r.stderr).toMatch(/tasks\[0\]\.context_path.*is empty: it is the whole prompt of agent "claude"/);
  });

  it("refuses agent settings that cannot work, naming the agent", async () => {
    const { dir } = workspace();
    const config = join(dir, "config.json");
    writeFileSync(
      config,
      JSON.stringify({
        agents: {
          aider: { dangerously_bypass_permissions: true },
          opencode: { tty: true },
          both: { preset: "claude", command: ["bash", "x.sh"] },
          neither: { model: "m" },
        },
      }),
    );
    const file = assignments(dir, [{ id: "t", agent: "claude" }]);
    const r = await termorch(["validate", file, "--config", config], { socket, env: withStubs() });
    expect(r.exitCode).toBe(2);
    expect(r.stderr).toMatch(/agents\.aider: aider has no flag that bypasses its permissions/);
    expect(r.stderr).toMatch(/agents\.opencode: preset opencode runs its CLI's non-interactive mode/);
    expect(r.stderr).toMatch(
      /agents\.both: "command" defines an agent of its own: preset only apply to a preset/,
    );
    expect(r.stderr).toMatch(/agents\.neither: needs a "command", or a "preset"/);
  });

  it("refuses worktree_copy for a workspace that is not a repository: the agent would edit the originals", async () => {
    const { dir, repo } = makeWorkspace({ git: false });
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    writeFileSync(join(repo, ".env"), "A=1\n");
    const file = join(dir, "assignments.json");
    writeFileSync(
      file,
      JSON.stringify({
        run_id: "nogitcopy",
        tasks: [{ id: "t", agent: "claude", context_path: "ctx/task.md" }],
        environment: { workspace_dir: "repo", worktree_copy: [".env"] },
      }),
    );
    for (const command of ["validate", "run"]) {
      const r = await termorch([command, file], { socket, env: withStubs() });
      expect(r.exitCode).toBe(2);
      expect(r.stderr).toMatch(/environment\.worktree_copy: the workspace .* is not a git repository/);
    }
    expect(readFileSync(join(repo, ".env"), "utf8")).toBe("A=1\n");
  });

  it("lists every agent with its resolved argv and where it came from", async () => {
    const { dir } = workspace();
    const config = join(dir, "config.json");
    writeFileSync(
      config,
      JSON.stringify({
        agents: {
          claude: { model: "opus", args: ["--max-turns", "5"] },
          fast: { preset: "codex", dangerously_bypass_permissions: true },
          mine: { command: ["bash", "x.sh", "{context_path}"] },
        },
      }),
    );
    const r = await termorch(["agents", "--json", "--config", config], { socket });
    expect(r.exitCode).toBe(0);
    const rows = JSON.parse(r.stdout) as { name: string; source: string; argv: string[]; prompt: string }[];
    const by = new Map(rows.map((row) => [row.name, row]));
    expect([...by.keys()].sort()).toEqual([
      "aider",
      "claude",
      "cn",
      "codex",
      "copilot",
      "fast",
      "gemini",
      "kilo",
      "mine",
      "opencode",
      "pi",
      "qwen",
    ]);
    expect(by.get("claude")).toMatchObject({ source: "config" });
    expect(by.get("claude")!.argv).toEqual(expect.arrayContaining(["--model", "opus", "--max-turns", "5"]));
    expect(by.get("fast")!.argv).toContain("--dangerously-bypass-approvals-and-sandbox");
    expect(by.get("codex")).toMatchObject({ source: "preset" });
    expect(by.get("codex")!.argv).not.toContain("--dangerously-bypass-approvals-and-sandbox");
    expect(by.get("mine")).toMatchObject({
      source: "config",
      prompt: "none",
      argv: ["bash", "x.sh", "{context_path}"],
    });
  });
});
