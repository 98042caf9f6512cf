// The MCP guide's one-line set-up of `termorch mcp` for each of Claude Code, codex, gemini and opencode
// (the lines under "Set-up, one line per CLI", read from docs/guides/mcp.md and run as they are), with
// the CLI pinned in test/agents-real/package.json, `termorch` on PATH as a user has it, in this
// file's own HOME: the CLI writes the entry the guide says where it says, and the CLI's own health
// check starts `termorch mcp` through that entry and reports it connected (codex's, which also
// lists the tools: the app server's mcpServerStatus/list, as its TUI's /mcp asks). The same line with
// a wrong command (`termorch mpc`) is reported failed, so a broken line cannot pass. No model, no
// sign-in and no network: none of these commands needs one.
import { spawn } from "node:child_process";
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { stripVTControlCharacters } from "node:util";
import { execa } from "execa";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { RECIPES } from "./clis.js";
import { CLI_BIN, makeWorld, ROOT } from "./harness.js";

const world = makeWorld("mcpsetup");
/** A folder with nothing in it, where each command runs (no project config of any CLI). */
const project = join(world.tmp, "project");
/**
 * Where the `termorch` on each CLI's PATH is: a shim that notes each start in its log, then runs the
 * built CLI. One per CLI, so that the CLIs' tests can run at once.
 */
const shimBin = (cli: Cli): string => join(world.tmp, `bin-${cli}`);
const started = (cli: Cli): string => join(world.tmp, `termorch-started-${cli}.log`);
/** The tools every client must see (`termorch mcp --help` lists them). */
const TOOLS = [
  "validate",
  "plan",
  "run",
  "status",
  "wait",
  "report",
  "logs",
  "send",
  "finish",
  "approve",
  "reject",
  "stop",
  "cancel",
  "agents",
];
/** A bound on each CLI command: all of them answer in seconds. */
const TIMEOUT = 30_000;

const CLIS = ["claude", "codex", "gemini", "opencode"] as const;
type Cli = (typeof CLIS)[number];

/** The set-up lines of the MCP guide, split into words (none is quoted), by the CLI they start with. */
function readmeSetup(): Record<Cli, string[]> {
  const readme = readFileSync(join(ROOT, "docs", "guides", "mcp.md"), "utf8");
  const from = readme.indexOf("Set-up, one line per CLI");
  expect(from, "the MCP guide's set-up lines").toBeGreaterThan(0);
  const block = /```sh\n([\s\S]*?)```/.exec(readme.slice(from))![1]!;
  const lines = block
    .split("\n")
    .map((l) => l.replace(/#.*/, "").trim().split(/\s+/))
    .filter((w) => w[0] !== "");
  const out = Object.fromEntries(lines.map((w) => [w[0], w])) as Record<Cli, string[]>;
  expect(Object.keys(out).sort()).toEqual(["claude", "codex", "gemini", "opencode"]);
  return out;
}
const SETUP = readmeSetup();

/** The same line for a server `termorch-typo` whose command is wrong: `termorch mpc`, which exits at once. */
function typo(line: string[]): string[] {
  const w = [...line];
  w[w.indexOf("termorch")] = "termorch-typo";
  expect(w.slice(-2)).toEqual(["termorch", "mcp"]);
  w[w.length - 1] = "mpc";
  return w;
}

/**
 * What each CLI needs so that it asks nothing of the network (all but loopback is off limits;
 * checked with strace: no connect() but to 127.0.0.1 and the CLIs' own local sockets).
 */
const QUIET: Record<Cli, Record<string, string>> = {
  claude: {
    // Its start opens a connection to its API ahead of use: here, to a loopback port nothing serves.
    ANTHROPIC_BASE_URL: "http://127.0.0.1:9",
    CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: "1",
    CLAUDE_CODE_DISABLE_OFFICIAL_MARKETPLACE_AUTOINSTALL: "1",
  },
  codex: {},
  gemini: {},
  opencode: {
    OPENCODE_DISABLE_AUTOUPDATE: "1",
    OPENCODE_DISABLE_MODELS_FETCH: "1",
    OPENCODE_DISABLE_LSP_DOWNLOAD: "1",
    // Its background install of the config folder's plugin package fails at once.
    npm_config_offline: "true",
  },
};
const envOf = (cli: Cli, extra: Record<string, string> = {}): Record<string, string> =>
  world.env({ PATH: `${shimBin(cli)}:${world.path}`, ...QUIET[cli], ...extra });

/** A command as the user types it: by name, found on PATH (the pinned CLI), in the empty project. */
async function sh(
  cli: Cli,
  words: string[],
  extra: Record<string, string> = {},
): Promise<{ exitCode: number; out: string; stdout: string; stderr: string }> {
  const r = await execa(words[0]!, words.slice(1), {
    cwd: project,
    env: envOf(cli, extra),
    extendEnv: false,
    reject: false,
    stdin: "ignore",
    all: true,
    timeout: TIMEOUT,
  });
  return {
    exitCode: r.exitCode ?? -1,
    out: stripVTControlCharacters(String(r.all)),
    stdout: stripVTControlCharacters(String(r.stdout)),
    stderr: stripVTControlCharacters(String(r.stderr)),
  };
}

/** Runs the command and answers it, with the arguments of each `termorch` the shim started meanwhile. */
async function starting<T>(cli: Cli, run: () => Promise<T>): Promise<{ result: T; starts: string[] }> {
  const log = started(cli);
  const before = existsSync(log) ? readFileSync(log, "utf8").length : 0;
  const result = await run();
  const starts = (existsSync(log) ? readFileSync(log, "utf8").slice(before) : "")
    .split("\n")
    .filter((l) => l !== "");
  return { result, starts };
}

const readJson = (...path: string[]): Record<string, unknown> =>
  JSON.parse(readFileSync(join(world.home, ...path), "utf8")) as Record<string, unknown>;

interface CodexMcpServer {
  name: string;
  serverInfo: { name: string } | null;
  tools: Record<string, { name: string }>;
  toolsError: string | null;
}

/**
 * codex's own view of its MCP servers: `codex app-server` (JSON-RPC over stdio) asked
 * mcpServerStatus/list, which starts each configured server, initializes it and lists its tools
 * (what its TUI's /mcp shows). `codex mcp list` and `get` only print the config.
 */
async function codexMcpStatus(): Promise<CodexMcpServer[]> {
  const child = spawn(
    join(CLI_BIN, "codex"),
    // Without plugins it looks nothing up on github.com.
    ["app-server", "-c", "analytics.enabled=false", "-c", "features.plugins=false"],
    { cwd: project, env: envOf("codex"), stdio: ["pipe", "pipe", "pipe"] },
  );
  let stderr = "";
  child.stderr.on("data", (d: Buffer) => {
    stderr += d.toString();
  });
  const exited = new Promise<void>((resolve) => child.once("close", () => resolve()));
  const send = (m: object): void => {
    child.stdin.write(`${JSON.stringify(m)}\n`);
  };
  try {
    return await new Promise<CodexMcpServer[]>((resolve, reject) => {
      const fail = (why: string): void => reject(new Error(`codex app-server: ${why}; stderr: ${stderr}`));
      const timer = setTimeout(() => fail(`no answer in ${TIMEOUT} ms`), TIMEOUT);
      child.once("error", (e) => fail(e.message));
      child.once("exit", (code) => fail(`exited (${code}) before answering`));
      let buf = "";
      child.stdout.on("data", (d: Buffer) => {
        buf += d.toString();
        for (let i = buf.indexOf("\n"); i >= 0; i = buf.indexOf("\n")) {
          const m = JSON.parse(buf.slice(0, i)) as { id?: number; error?: unknown; result?: unknown };
          buf = buf.slice(i + 1);
          if (m.error !== undefined) fail(JSON.stringify(m.error));
          else if (m.id === 1) {
            send({ method: "initialized" });
            send({ id: 2, method: "mcpServerStatus/list", params: {} });
          } else if (m.id === 2) {
            clearTimeout(timer);
            resolve((m.result as { data: CodexMcpServer[] }).data);
          }
        }
      });
      send({ id: 1, method: "initialize", params: { clientInfo: { name: "termorch-test", version: "0" } } });
    });
  } finally {
    // Its stdin closed, it exits (its MCP servers with it); a bound in case it does not.
    child.stdin.end();
    const kill = setTimeout(() => child.kill("SIGKILL"), 10_000);
    await exited;
    clearTimeout(kill);
  }
}

beforeAll(() => {
  mkdirSync(project);
  for (const cli of CLIS) {
    mkdirSync(shimBin(cli));
    const shim = join(shimBin(cli), "termorch");
    writeFileSync(
      shim,
      `#!/bin/sh\necho "$*" >> '${started(cli)}'\nexec '${process.execPath}' '${join(ROOT, "bin", "termorch.js")}' "$@"\n`,
    );
    chmodSync(shim, 0o755);
    // What a user of the CLI has in HOME after its first start; the set-up must keep it.
    RECIPES[cli].seedHome?.(world.home, "http://127.0.0.1:9");
  }
});
afterAll(() => world.dispose());

describe.concurrent("the MCP guide's set-up line of termorch mcp, with the pinned CLI", () => {
  it("Claude Code: ~/.claude.json's user-scope mcpServers; `claude mcp list` and `get` connect", async () => {
    const add = await sh("claude", SETUP.claude);
    expect(add.exitCode, add.out).toBe(0);
    const config = readJson(".claude.json") as {
      hasCompletedOnboarding?: boolean;
      mcpServers?: Record<string, unknown>;
      projects?: Record<string, { mcpServers?: Record<string, unknown> }>;
    };
    expect(config.mcpServers?.termorch).toMatchObject({ type: "stdio", command: "termorch", args: ["mcp"] });
    // User scope: not the folder's (local scope, under projects) nor a .mcp.json in it (project scope).
    expect(config.projects?.[project]?.mcpServers?.termorch).toBeUndefined();
    expect(existsSync(join(project, ".mcp.json"))).toBe(false);
    expect(config.hasCompletedOnboarding).toBe(true);

    expect((await sh("claude", typo(SETUP.claude))).exitCode).toBe(0);
    const list = await starting("claude", () => sh("claude", ["claude", "mcp", "list"]));
    expect(list.result.exitCode, list.result.out).toBe(0);
    expect(list.result.out).toMatch(/^termorch: termorch mcp - ✔ Connected$/m);
    expect(list.result.out).toMatch(/^termorch-typo: termorch mpc - ✘ Failed to connect$/m);
    // The health check started the servers through `termorch` on PATH.
    expect(list.starts).toEqual(expect.arrayContaining(["mcp", "mpc"]));

    const get = await starting("claude", () => sh("claude", ["claude", "mcp", "get", "termorch"]));
    expect(get.result.exitCode, get.result.out).toBe(0);
    expect(get.result.out).toMatch(/Scope: User config/);
    expect(get.result.out).toMatch(/Status: ✔ Connected/);
    expect(get.starts).toEqual(["mcp"]);
    const bad = await sh("claude", ["claude", "mcp", "get", "termorch-typo"]);
    expect(bad.out).toMatch(/Status: ✘ Failed to connect/);
  });

  it("codex: [mcp_servers.termorch] in ~/.codex/config.toml; its app server connects and lists the tools", async () => {
    const add = await sh("codex", SETUP.codex);
    expect(add.exitCode, add.out).toBe(0);
    const file = join(world.home, ".codex", "config.toml");
    const toml = readFileSync(file, "utf8");
    expect(toml).toMatch(/^\[mcp_servers\.termorch\]\ncommand = "termorch"\nargs = \["mcp"\]\n/m);
    expect(toml).toContain("[tui]\nscreen_reader_detection_done = true\n");
    const get = await sh("codex", ["codex", "mcp", "get", "termorch", "--json"]);
    expect(get.exitCode, get.out).toBe(0);
    expect(JSON.parse(get.stdout)).toMatchObject({
      enabled: true,
      transport: { type: "stdio", command: "termorch", args: ["mcp"] },
    });

    // The guide's additions, under the set-up lines: codex 0.171 takes both (an unknown approval
    // mode is refused, naming the key, so the key is not just ignored).
    const block = /^\[mcp_servers\.termorch\]\n(?:[^[\n].*\n)*/m;
    const withNotes = (mode: string): string =>
      toml.replace(block, (t) => `${t}default_tools_approval_mode = "${mode}"\ntool_timeout_sec = 120\n`);
    writeFileSync(file, withNotes("bogus"));
    const refused = await sh("codex", ["codex", "mcp", "get", "termorch", "--json"]);
    expect(refused.exitCode).not.toBe(0);
    expect(refused.stderr).toMatch(
      /unknown variant `bogus`[\s\S]*mcp_servers\.termorch\.default_tools_approval_mode/,
    );
    writeFileSync(file, withNotes("approve"));
    const noted = await sh("codex", ["codex", "mcp", "get", "termorch", "--json"]);
    expect(noted.exitCode, noted.out).toBe(0);
    expect(JSON.parse(noted.stdout)).toMatchObject({ tool_timeout_sec: 120 });

    expect((await sh("codex", typo(SETUP.codex))).exitCode).toBe(0);
    // `codex mcp list` prints the config and starts nothing.
    const list = await starting("codex", () => sh("codex", ["codex", "mcp", "list"]));
    expect(list.result.exitCode, list.result.out).toBe(0);
    expect(list.result.out).toMatch(/^termorch\s+termorch\s+mcp\s.*enabled/m);
    expect(list.starts).toEqual([]);

    const status = await starting("codex", codexMcpStatus);
    const byName = new Map(status.result.map((s) => [s.name, s]));
    const termorch = byName.get("termorch");
    expect(termorch?.toolsError ?? null, JSON.stringify(termorch)).toBeNull();
    expect(termorch?.serverInfo?.name).toBe("termorch");
    expect(Object.keys(termorch?.tools ?? {})).toEqual(expect.arrayContaining(TOOLS));
    const wrong = byName.get("termorch-typo");
    expect(wrong?.toolsError).toMatch(/MCP startup failed/);
    expect(wrong?.tools).toEqual({});
    expect(status.starts).toEqual(expect.arrayContaining(["mcp", "mpc"]));
  });

  it("gemini: mcpServers.termorch in ~/.gemini/settings.json, trusted, 600 s; `gemini mcp list` connects", async () => {
    const add = await sh("gemini", SETUP.gemini);
    expect(add.exitCode, add.out).toBe(0);
    const settings = readJson(".gemini", "settings.json") as {
      mcpServers?: Record<string, unknown>;
      security?: { auth?: { selectedType?: string } };
    };
    expect(settings.mcpServers?.termorch).toEqual({
      command: "termorch",
      args: ["mcp"],
      timeout: 600_000,
      trust: true,
    });
    expect(settings.security?.auth?.selectedType).toBe("gemini-api-key");
    expect(existsSync(join(project, ".gemini", "settings.json"))).toBe(false);

    expect((await sh("gemini", typo(SETUP.gemini))).exitCode).toBe(0);
    // In a folder the user has not trusted, gemini leaves every stdio server alone, user-scope
    // ones too (the server's own `trust` is another matter): it reports them disabled.
    const untrusted = await starting("gemini", () => sh("gemini", ["gemini", "mcp", "list"]));
    expect(untrusted.result.out).toMatch(/^○ termorch: termorch mcp \(stdio\) - Disabled$/m);
    expect(untrusted.starts).toEqual([]);

    const list = await starting("gemini", () =>
      sh("gemini", ["gemini", "mcp", "list"], { GEMINI_CLI_TRUST_WORKSPACE: "true" }),
    );
    expect(list.result.exitCode, list.result.out).toBe(0);
    expect(list.result.out).toMatch(/^✓ termorch: termorch mcp \(stdio\) - Connected$/m);
    expect(list.result.out).toMatch(/^✗ termorch-typo: termorch mpc \(stdio\) - Disconnected$/m);
    expect(list.starts).toEqual(expect.arrayContaining(["mcp", "mpc"]));
  });

  it("opencode: mcp.termorch in ~/.config/opencode/opencode.jsonc; `opencode mcp list` connects", async () => {
    const add = await sh("opencode", SETUP.opencode);
    expect(add.exitCode, add.out).toBe(0);
    const dir = join(world.home, ".config", "opencode");
    expect(add.out).toContain(`added to ${join(dir, "opencode.jsonc")}`);
    const config = readJson(".config", "opencode", "opencode.jsonc") as {
      mcp?: Record<string, Record<string, unknown>>;
    };
    expect(config.mcp?.termorch).toEqual({ type: "local", command: ["termorch", "mcp"] });
    expect(existsSync(join(project, "opencode.json"))).toBe(false);
    expect(existsSync(join(project, "opencode.jsonc"))).toBe(false);

    // The guide's addition: a call's timeout (a number, which opencode 1.18 checks).
    config.mcp!.termorch!.timeout = 60_000;
    writeFileSync(join(dir, "opencode.jsonc"), JSON.stringify(config, null, 2));
    expect((await sh("opencode", typo(SETUP.opencode))).exitCode).toBe(0);
    expect(readJson(".config", "opencode", "opencode.jsonc").mcp).toMatchObject({
      termorch: { type: "local", command: ["termorch", "mcp"], timeout: 60_000 },
      "termorch-typo": { type: "local", command: ["termorch", "mpc"] },
    });

    const list = await starting("opencode", () => sh("opencode", ["opencode", "mcp", "list"]));
    expect(list.result.exitCode, list.result.out).toBe(0);
    expect(list.result.out).toMatch(/✓ termorch connected\n.*termorch mcp\n/);
    expect(list.result.out).toMatch(/✗ termorch-typo failed\n/);
    expect(list.starts).toEqual(expect.arrayContaining(["mcp", "mpc"]));
  });
});
