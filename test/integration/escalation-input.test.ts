// A task's escalation list (issue 36) through the CLI: `validate` checks every agent of it as it
// checks `agent` (defined, its CLI on PATH) and says where, and a dry run shows each attempt's argv.
import { execFileSync } from "node:child_process";
import { chmodSync, mkdirSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { ValidateOutput } from "../../src/contract/mcp.js";
import { Report } from "../../src/contract/report.js";
import { TOOLS } from "../../src/mcp/tools.js";
import {
  killServer,
  listFiles,
  makeWorkspace,
  STEP,
  termorch,
  tmuxSessions,
  uniqueSocket,
  workspaceSnapshot,
  writeAssignments,
} from "./harness.js";

const socket = uniqueSocket("escalation-input");
const cleanups: Array<() => void> = [];
afterAll(() => {
  killServer(socket);
  for (const c of cleanups) c();
});

/** A workspace with a config of agents of their own command lines (nothing to install). */
function setUp(configAgents: Record<string, unknown> = {}): { dir: string; repo: string; config: string } {
  const ws = makeWorkspace();
  cleanups.push(ws.cleanup);
  const config = join(ws.dir, "config.json");
  writeFileSync(
    config,
    JSON.stringify({
      agents: {
        mid: { command: ["bash", STEP, "{context_path}", "mid", "{task_id}"] },
        top: { command: ["bash", STEP, "{context_path}", "top", "{task_id}"] },
        ...configAgents,
      },
    }),
  );
  return { ...ws, config };
}

/** Nothing but the assignments and config files beside the repository, and the repository untouched. */
function untouched(dir: string): string[] {
  return listFiles(dir).filter((f) => !f.startsWith("repo/") && f !== "repo/");
}

describe("escalation: validate", () => {
  it("refuses an unknown agent, the task's own agent, and a repeated one in a task's list: exit 2, where, nothing written", async () => {
    const { dir, repo, config } = setUp();
    const file = writeAssignments(dir, [
      { id: "A", escalation: ["mid", "ghost"] },
      { id: "B", escalation: ["step"] },
      { id: "C", escalation: ["top", "top"] },
    ]);
    const before = workspaceSnapshot(repo);
    const result = await termorch(["validate", file, "--config", config], { socket });
    expect(result.exitCode).toBe(2);
    expect(result.stderr).toMatch(
      /field tasks\[0\]\.escalation\[1\], task A: unknown agent "ghost" in its escalation \(defined agents: mid, top\)/,
    );
    expect(result.stderr).toMatch(
      /field tasks\[1\]\.escalation\[0\], task B: "step" is the task's own agent/,
    );
    expect(result.stderr).toMatch(/field tasks\[2\]\.escalation, task C: must not name an agent twice/);
    expect(result.stderr).not.toMatch(/\n\s+at /);
    expect(workspaceSnapshot(repo)).toBe(before);
    expect(untouched(dir)).toEqual(["assignments.json", "config.json"]);
  });

  it("refuses an agent entry's list that names an unknown agent or the agent itself", async () => {
    const { dir, config } = setUp({
      base: { command: ["bash", STEP, "{context_path}"], escalation: ["base", "nowhere"] },
    });
    const file = writeAssignments(dir, [{ id: "A" }]);
    const result = await termorch(["validate", file, "--config", config], { socket });
    expect(result.exitCode).toBe(2);
    expect(result.stderr).toMatch(
      /config\.json, field agents\.base\.escalation\[0\]: "base" is this agent itself/,
    );
    expect(result.stderr).toMatch(
      /config\.json, field agents\.base\.escalation\[1\]: unknown agent "nowhere"/,
    );
  });

  it("refuses an escalation agent whose CLI is not on the agent's PATH, naming the field and the agent", async () => {
    const { dir, config } = setUp({
      base: { command: ["bash", STEP, "{context_path}"], escalation: ["codex"] },
    });
    // A PATH with git and a shell, and no codex: where the preset's CLI would be looked for.
    const bin = join(dir, "bin");
    mkdirSync(bin);
    for (const tool of ["git", "sh", "bash"])
      symlinkSync(
        execFileSync("sh", ["-c", `command -v ${tool}`], { encoding: "utf8" }).trim(),
        join(bin, tool),
      );
    const file = writeAssignments(dir, [
      { id: "A", escalation: ["mid", "gemini"] },
      { id: "B", agent: "base", command: undefined },
    ]);
    const env = { PATH: bin };
    const missing = await termorch(["validate", file, "--config", config], { socket, env });
    expect(missing.exitCode).toBe(2);
    expect(missing.stderr).toMatch(
      /field tasks\[0\]\.escalation\[1\], task A: agent "gemini" \(attempt 3, from its escalation\) runs gemini, which is not on the agent's PATH/,
    );
    expect(missing.stderr).toMatch(
      /field tasks\[1\]\.agent, task B: agent "codex" \(attempt 2, from agent "base"'s escalation in the config\) runs codex, which is not on the agent's PATH/,
    );
    expect(tmuxSessions(socket)).toEqual([]);
    // With the CLIs there (never run by validate), the same file is valid.
    for (const cli of ["gemini", "codex"]) {
      writeFileSync(join(bin, cli), "#!/bin/sh\nexit 0\n");
      chmodSync(join(bin, cli), 0o755);
    }
    const found = await termorch(["validate", file, "--config", config], { socket, env });
    expect(found.stderr).toBe("");
    expect(found.exitCode).toBe(0);
  });
});

describe("escalation: dry run", () => {
  it("shows each attempt's argv: the report's escalation and the text", async () => {
    const { dir, repo, config } = setUp({
      base: { command: ["bash", STEP, "{context_path}", "base"], escalation: ["mid", "top"] },
    });
    const file = writeAssignments(dir, [
      { id: "A", agent: "base", command: undefined, retries: 3 },
      { id: "B", escalation: ["top"] },
      { id: "C", agent: "base", command: undefined, escalation: [] },
    ]);
    const context = join(repo, "ctx", "task.md");
    const json = await termorch(["run", file, "--dry-run", "--json", "--config", config], { socket });
    expect(json.exitCode).toBe(0);
    const report = Report.parse(JSON.parse(json.stdout));
    const byId = new Map(report.tasks.map((t) => [t.id, t]));
    expect(byId.get("A")!.argv).toEqual(["bash", STEP, context, "base"]);
    expect(byId.get("A")!.escalation).toEqual([
      { agent: "mid", argv: ["bash", STEP, context, "mid", "A"] },
      { agent: "top", argv: ["bash", STEP, context, "top", "A"] },
    ]);
    expect(byId.get("B")!.escalation).toEqual([{ agent: "top", argv: ["bash", STEP, context, "top", "B"] }]);
    expect(byId.get("C")).not.toHaveProperty("escalation");

    const text = await termorch(["run", file, "--dry-run", "--config", config], { socket });
    expect(text.exitCode).toBe(0);
    // The summary goes to stderr (stdout is for --json).
    const lines = text.stderr.split("\n");
    const at = lines.findIndex((l) => l.startsWith("  A: "));
    expect(lines.slice(at, at + 3)).toEqual([
      `  A: ${JSON.stringify(["bash", STEP, context, "base"])}`,
      `    attempt 2 (mid): ${JSON.stringify(["bash", STEP, context, "mid", "A"])}`,
      `    attempt 3 on (top): ${JSON.stringify(["bash", STEP, context, "top", "A"])}`,
    ]);

    // MCP's validate names them too, placeholders unsubstituted.
    const validate = TOOLS.find((t) => t.name === "validate")!;
    const answer = ValidateOutput.parse(
      await validate.call({ path: file, config } as never, {
        env: process.env,
        cwd: dir,
        home: null,
        signal: new AbortController().signal,
        progress: async () => {},
      }),
    );
    expect(answer.valid).toBe(true);
    const mcpA = answer.tasks.find((t) => t.id === "A")!;
    expect(mcpA.argv).toEqual(["bash", STEP, "{context_path}", "base"]);
    expect(mcpA.escalation).toEqual([
      { agent: "mid", argv: ["bash", STEP, "{context_path}", "mid", "{task_id}"] },
      { agent: "top", argv: ["bash", STEP, "{context_path}", "top", "{task_id}"] },
    ]);
    expect(answer.tasks.find((t) => t.id === "C")!.escalation).toEqual([]);
    expect(tmuxSessions(socket)).toEqual([]);
  });
});
