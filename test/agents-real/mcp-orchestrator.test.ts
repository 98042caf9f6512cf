// A real agent CLI as the main orchestrator: Claude Code, codex and gemini, each given `termorch mcp`
// as an MCP server the way a user configures it, their model scripted (model-server.ts) as an
// orchestrator that acts on what the tools answer: validate a three-task document, run it, follow
// it with wait (each call passing the previous answer's cursor) until it is finished, read the
// report and quote its outcome. The sub-agents are stand-ins (step.sh), so what is under test is
// the CLI ↔ termorch mcp path: its naming of the tools, its approval of them, the environment it
// gives the server, and the answers reaching the model intact.
import { execFileSync } from "node:child_process";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { execa } from "execa";
import { describe, expect, it } from "vitest";
import type { Report } from "../../src/contract/report.js";
import { RECIPES, SECRET } from "./clis.js";
import { CLI_BIN, ROOT, readReport, realAgentsSuite } from "./harness.js";
import {
  conversationOf,
  mcpToolOf,
  type Protocol,
  type Script,
  type Step,
  type ToolExchange,
} from "./model-server.js";

const { world, server: modelServer } = realAgentsSuite("mcp");
const BIN = join(ROOT, "bin", "termorch.js");
const STEP = join(ROOT, "test", "fixtures", "agents", "step.sh");
/** The orchestrator gives up on a run that is not finished after this many waits. */
const MAX_WAITS = 30;
const PROMPT =
  "Use termorch's MCP tools: validate the assignments, run them, follow the run with wait until it is finished, then read its report and tell me its outcome.\n";

/** A fresh repository and, beside it, a document of three stand-in tasks: a and b, then c after both. */
function prepare(): { dir: string; repo: string; file: string } {
  const { dir, repo } = world.workspace();
  const file = join(dir, "assignments.json");
  writeFileSync(
    file,
    JSON.stringify({
      environment: { workspace_dir: "repo" },
      tasks: ["a", "b", "c"].map((id) => ({
        id,
        agent: "step",
        context_path: "ctx/task.md",
        command: ["bash", STEP, "{context_path}"],
        dependencies: id === "c" ? ["a", "b"] : [],
        env: { WRITE: `${id}.txt=${id} was here` },
      })),
    }),
  );
  return { dir, repo, file };
}

/**
 * How termorch mcp is started, its environment given in full: codex gives an MCP server only HOME,
 * PATH and the entry's own env, and the run must land on this world's tmux socket and registry.
 */
function termorchServer(): { command: string; args: string[]; env: Record<string, string> } {
  return { command: process.execPath, args: [BIN, "mcp"], env: world.env() };
}

/**
 * A run's driver is detached: a CLI that ended before its run did (a failing test) would leave it
 * starting tasks on the world's tmux socket after the world is gone. This ends it (a no-op for a
 * run that reported, or that never started).
 */
async function endRun(dir: string): Promise<void> {
  if (!existsSync(join(dir, "execution_report.json"))) await world.termorch(["cancel", dir]);
}

/** One line a human reads: what the report says of the merge, the exit code and the tasks. */
function outcomeOf(report: Pick<Report, "merge" | "exit_code" | "tasks">): string {
  const ok = report.tasks.filter((t) => t.status === "success").length;
  return `Outcome: merge ${report.merge.result}, exit code ${report.exit_code}, ${ok}/${report.tasks.length} tasks succeeded`;
}

/** The JSON a tool answered, out of the CLI's wrapping (codex's "Output:", gemini's <untrusted_context>). */
function answerOf(result: string | null): Record<string, unknown> | null {
  if (result === null) return null;
  try {
    const value: unknown = JSON.parse(result.slice(result.indexOf("{"), result.lastIndexOf("}") + 1));
    return typeof value === "object" && value !== null ? (value as Record<string, unknown>) : null;
  } catch {
    return null;
  }
}

const argsOf = (e: ToolExchange): Record<string, unknown> =>
  (typeof e.args === "string" ? JSON.parse(e.args) : e.args) as Record<string, unknown>;

/**
 * The orchestrating model: each step follows from the tools' answers so far. Anything it does not
 * expect (a refused call, an error, a tool of another server) ends the turn with STOPPED, so a
 * broken path fails the test at once rather than looping.
 */
function orchestrator(file: string): Script {
  const call = (tool: string, args: Record<string, unknown>): Step => ({ mcp: "termorch", tool, args });
  const stop = (why: string): Step => ({ reply: `STOPPED: ${why}` });
  return {
    next(conversation) {
      const last = conversation.at(-1);
      if (!last) return call("validate", { path: file });
      const tool = mcpToolOf(last, "termorch");
      const answer = answerOf(last.result);
      if (tool === null) return stop(`unexpected tool ${last.name}`);
      // A termorch tool error is text ("termorch: invalid input: …"), not an answer; a report's `error` is null.
      if (answer === null || answer.error != null || /haven't granted/.test(last.result ?? ""))
        return stop(`${tool} answered ${String(last.result).slice(0, 400)}`);
      const started = conversation.find((e) => mcpToolOf(e, "termorch") === "run");
      const run = answerOf(started?.result ?? null)?.run_id;
      switch (tool) {
        case "validate":
          return answer.valid === true ? call("run", { path: file }) : stop("the document is not valid");
        case "run":
          return typeof run === "string" ? call("wait", { run, timeout_s: 20 }) : stop("run gave no run_id");
        case "wait": {
          if (answer.finished === true) return call("report", { run });
          const waits = conversation.filter((e) => mcpToolOf(e, "termorch") === "wait").length;
          if (waits >= MAX_WAITS) return stop(`not finished after ${waits} waits`);
          return call("wait", { run, cursor: answer.cursor, timeout_s: 20 });
        }
        case "report":
          if (typeof answer.merge !== "object" || !Array.isArray(answer.tasks))
            return stop("the report has no merge or tasks");
          return { reply: `The run is finished. ${outcomeOf(answer as unknown as Report)}.` };
        default:
          return stop(`unexpected tool ${tool}`);
      }
    },
  };
}

/** The tool calls of the CLI's last request to the model: the whole conversation it ended with. */
function transcript(since: number, protocol: Protocol): ToolExchange[] {
  const main = modelServer()
    .mainRequests()
    .filter((r) => modelServer().requests.indexOf(r) >= since);
  const last = main.at(-1);
  expect(last, "the CLI asked the model nothing").toBeDefined();
  return conversationOf(protocol, last!.body);
}

/**
 * What every CLI must have done: validate, run, wait (each with the cursor of the answer before)
 * until finished, report, in that order and nothing else; the three tasks' work merged into the
 * repository; and the final answer quoting the outcome of the report on disk, which the report
 * tool answered.
 */
function expectOrchestrated(
  calls: ToolExchange[],
  answer: string,
  { dir, repo, file }: ReturnType<typeof prepare>,
): void {
  const tools = calls.map((e) => mcpToolOf(e, "termorch"));
  // A scripted model that met something it did not expect says so in its answer (STOPPED: …).
  const seen = `calls: ${tools.join(" → ")}; answer: ${answer.slice(0, 600)}`;
  const waits = tools.length - 3;
  expect(tools, seen).toEqual([
    "validate",
    "run",
    ...Array<string>(Math.max(waits, 0)).fill("wait"),
    "report",
  ]);
  expect(waits, seen).toBeGreaterThanOrEqual(1);
  expect(waits, seen).toBeLessThanOrEqual(MAX_WAITS);
  expect(argsOf(calls[0]!)).toEqual({ path: file });
  const started = answerOf(calls[1]!.result);
  expect(started).toMatchObject({ owner: "driver", tasks: 3, run_dir: dir });
  const runId = started!.run_id as string;
  for (let i = 2; i < calls.length - 1; i++) {
    const args = argsOf(calls[i]!);
    expect(args.run).toBe(runId);
    // The first wait hears the run from its start; each later one from where the last left off.
    expect(args.cursor).toBe(i === 2 ? undefined : answerOf(calls[i - 1]!.result)?.cursor);
  }
  expect(answerOf(calls.at(-2)!.result)).toMatchObject({
    finished: true,
    phase: "reported",
    exit_code: 0,
    tasks: { success: 3 },
  });
  expect(argsOf(calls.at(-1)!)).toEqual({ run: runId });

  const onDisk = readReport(dir);
  expect(onDisk.run_id).toBe(runId);
  expect(onDisk.merge.result).toBe("success");
  expect(onDisk.exit_code).toBe(0);
  expect(onDisk.tasks.map((t) => t.status)).toEqual(["success", "success", "success"]);
  // What the report tool answered is the report on disk.
  expect(answerOf(calls.at(-1)!.result)).toEqual(onDisk);
  expect(answer).toContain(outcomeOf(onDisk));
  expect(answer).toContain("Outcome: merge success, exit code 0, 3/3 tasks succeeded");

  for (const id of ["a", "b", "c"])
    expect(readFileSync(join(repo, `${id}.txt`), "utf8")).toBe(`${id} was here\n`);
  const head = execFileSync("git", ["-C", repo, "rev-parse", "HEAD"], { encoding: "utf8" }).trim();
  expect(head).toBe(onDisk.merge.result_commit);
  const tracked = execFileSync("git", ["-C", repo, "ls-files"], { encoding: "utf8" }).split("\n");
  expect(tracked).toEqual(expect.arrayContaining(["a.txt", "b.txt", "c.txt"]));
}

describe("a real agent CLI orchestrates a run through termorch mcp", () => {
  it("Claude Code: validate, run, wait until finished, report, and an answer quoting the outcome", async () => {
    const ws = prepare();
    const url = modelServer().url;
    modelServer().setScript(orchestrator(ws.file));
    const mcpConfig = join(ws.dir, "mcp.json");
    writeFileSync(mcpConfig, JSON.stringify({ mcpServers: { termorch: termorchServer() } }));
    const since = modelServer().requests.length;
    const r = await execa(
      join(CLI_BIN, "claude"),
      [
        // Variadic: it would take the flags after it as more configs.
        `--mcp-config=${mcpConfig}`,
        "--strict-mcp-config",
        "-p",
        "--output-format",
        "json",
        // MCP tools ask for permission otherwise, which -p refuses.
        "--allowedTools",
        "mcp__termorch",
      ],
      {
        input: PROMPT,
        cwd: ws.repo,
        extendEnv: false,
        reject: false,
        timeout: 200_000,
        env: world.env({
          ...RECIPES.claude.agent(url).env,
          ANTHROPIC_API_KEY: SECRET,
          // claude connects --mcp-config servers in the background and asks the model without
          // their tools if they are not up yet; this waits for them (termorch mcp starts in ~1 s).
          MCP_CONNECTION_NONBLOCKING: "false",
          MCP_CONNECT_TIMEOUT_MS: "30000",
        }),
      },
    );
    await endRun(ws.dir);
    expect(r.exitCode, `${r.stderr}\n${r.stdout}`).toBe(0);
    const out = JSON.parse(String(r.stdout)) as {
      result: string;
      is_error: boolean;
      permission_denials: unknown[];
    };
    expect(out).toMatchObject({ is_error: false, permission_denials: [] });
    expectOrchestrated(transcript(since, "anthropic"), out.result, ws);
  }, 240_000);

  it("codex: the same, through the tool search that defers gpt-5.5's MCP tools", async () => {
    const ws = prepare();
    const url = modelServer().url;
    modelServer().setScript(orchestrator(ws.file));
    // As a user adds it to ~/.codex/config.toml. codex exec's approval policy is "never", which
    // fails every MCP call that is not approved in advance.
    const server = termorchServer();
    const toml = (v: unknown): string =>
      Array.isArray(v)
        ? `[${v.map(toml).join(", ")}]`
        : typeof v === "object" && v !== null
          ? `{ ${Object.entries(v)
              .map(([k, x]) => `${JSON.stringify(k)} = ${toml(x)}`)
              .join(", ")} }`
          : JSON.stringify(v);
    const config = join(world.home, ".codex", "config.toml");
    const seeded = readFileSync(config, "utf8").split("\n[mcp_servers.termorch]")[0];
    writeFileSync(
      config,
      `${seeded}
[mcp_servers.termorch]
command = ${toml(server.command)}
args = ${toml(server.args)}
env = ${toml(server.env)}
default_tools_approval_mode = "approve"
startup_timeout_sec = 30
tool_timeout_sec = 120
`,
    );
    const since = modelServer().requests.length;
    const agent = RECIPES.codex.agent(url);
    const r = await execa(
      join(CLI_BIN, "codex"),
      ["exec", "--json", "--sandbox", "workspace-write", ...(agent.args ?? []), "-"],
      {
        input: PROMPT,
        cwd: ws.repo,
        extendEnv: false,
        reject: false,
        timeout: 200_000,
        env: world.env({ ...agent.env, TERMORCH_TEST_KEY: SECRET }),
      },
    );
    await endRun(ws.dir);
    expect(r.exitCode, `${r.stderr}\n${r.stdout}`).toBe(0);
    const events = String(r.stdout)
      .split("\n")
      .filter((l) => l.startsWith("{"))
      .map((l) => JSON.parse(l) as { type: string; item?: Record<string, unknown> });
    const items = events.flatMap((e) => (e.type === "item.completed" && e.item ? [e.item] : []));
    // codex's own record of the calls agrees with what the model saw.
    const mcpCalls = items.filter((i) => i.type === "mcp_tool_call");
    const notDone = mcpCalls.filter((i) => i.server !== "termorch" || i.status !== "completed");
    expect(notDone, JSON.stringify(notDone).slice(0, 1000)).toEqual([]);
    const answer = items.filter((i) => i.type === "agent_message").at(-1)?.text;
    expect(typeof answer).toBe("string");
    const calls = transcript(since, "responses");
    expect(mcpCalls.map((i) => i.tool)).toEqual(calls.map((e) => mcpToolOf(e, "termorch")));
    expectOrchestrated(calls, answer as string, ws);
    // gpt-5.5 is in codex's catalog with a tool search: its MCP tools were not declared until searched.
    const first = modelServer()
      .mainRequests()
      .find((q) => modelServer().requests.indexOf(q) >= since);
    expect(JSON.stringify((first?.body as { tools?: unknown })?.tools)).not.toContain("mcp__termorch");
  }, 240_000);

  it("gemini: the same, the server trusted in its settings", async () => {
    const ws = prepare();
    const url = modelServer().url;
    modelServer().setScript(orchestrator(ws.file));
    // gemini leaves an untrusted server's tools out of a headless run's request altogether.
    const settings = join(world.home, ".gemini", "settings.json");
    writeFileSync(
      settings,
      JSON.stringify({
        ...JSON.parse(readFileSync(settings, "utf8")),
        mcpServers: { termorch: { ...termorchServer(), trust: true, timeout: 120_000 } },
      }),
    );
    const since = modelServer().requests.length;
    const r = await execa(
      join(CLI_BIN, "gemini"),
      [
        "-p",
        "",
        "--output-format",
        "json",
        "--skip-trust",
        // As termorch's preset runs it: in its default mode headless gemini declares no tool that
        // edits or runs anything, and the model server takes such a request for a side one.
        "--approval-mode",
        "auto_edit",
        "--allowed-mcp-server-names",
        "termorch",
      ],
      {
        input: PROMPT,
        cwd: ws.repo,
        extendEnv: false,
        reject: false,
        timeout: 200_000,
        env: world.env({ ...RECIPES.gemini.agent(url).env, GEMINI_API_KEY: SECRET }),
      },
    );
    await endRun(ws.dir);
    expect(r.exitCode, `${r.stderr}\n${r.stdout}`).toBe(0);
    const out = JSON.parse(String(r.stdout)) as { response: string };
    expectOrchestrated(transcript(since, "gemini"), out.response, ws);
  }, 240_000);
});
