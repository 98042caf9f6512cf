import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { execa } from "execa";
import { afterAll, beforeAll } from "vitest";
import type { Report } from "../../src/contract/report.js";
import { RECIPES } from "./clis.js";
import { type ModelServer, type Step, startModelServer } from "./model-server.js";

/**
 * One test file's world for the real agent CLIs: its own HOME (the CLIs' files live there, so
 * the user's are never read or written), its own tmux socket and temp folder, and the built
 * termorch CLI run the way a user runs it.
 */

export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..", "..");
const BIN = join(ROOT, "bin", "termorch.js");
export const CLI_BIN = join(ROOT, "test", "agents-real", "node_modules", ".bin");

/**
 * The user's own configuration of the pinned CLIs in HOME: their settings, logins, and the
 * answers to their questions (trust, notices, model offers, API keys). termorch must never change
 * them. Each CLI also keeps its sessions, logs, caches and bundled skills there, which any start
 * of it writes, by hand or through termorch: those are not the user's configuration.
 */
export const CLI_FILES = [
  ".claude.json",
  ".claude/settings.json",
  ".claude/settings.local.json",
  ".codex/config.toml",
  ".codex/auth.json",
  ".gemini/settings.json",
  ".gemini/trustedFolders.json",
  ".config/opencode/opencode.json",
  ".config/opencode/opencode.jsonc",
  ".config/opencode/config.json",
  ".config/opencode/.gitignore",
  ".qwen/settings.json",
  ".config/kilo/kilo.json",
  ".config/kilo/opencode.json",
  ".pi/agent/models.json",
  ".pi/agent/settings.json",
  ".pi/agent/auth.json",
  ".copilot/config.json",
  ".copilot/settings.json",
  ".copilot/mcp-config.json",
  ".continue/config.yaml",
  ".continue/permissions.yaml",
  ".continue/globalContext.json",
];

export interface World {
  home: string;
  tmp: string;
  socket: string;
  /** PATH for termorch and its agents: the pinned CLIs first. */
  path: string;
  /** The environment termorch runs with (and its agents start from). */
  env(extra?: Record<string, string>): Record<string, string>;
  /** A temp folder holding a git repository `repo/` with one commit and a context file. */
  workspace(context?: string): { dir: string; repo: string };
  termorch(
    args: string[],
    opts?: { env?: Record<string, string>; cwd?: string; timeoutMs?: number },
  ): Promise<{
    exitCode: number;
    stdout: string;
    stderr: string;
  }>;
  /** Content hash of each of the CLIs' configuration files in HOME (CLI_FILES) that exists. */
  cliFiles(): Map<string, string>;
  dispose(): void;
}

export function makeWorld(tag: string): World {
  const tmp = mkdtempSync(join(tmpdir(), `termorch-real-${tag}-`));
  const home = join(tmp, "home");
  mkdirSync(home);
  const socket = `termorch-real-${tag}-${process.pid}`;
  const path = [CLI_BIN, dirname(process.execPath), "/usr/local/bin", "/usr/bin", "/bin"].join(":");
  const env = (extra: Record<string, string> = {}): Record<string, string> => ({
    PATH: path,
    HOME: home,
    LANG: "C.UTF-8",
    TERM: "xterm-256color",
    USER: process.env.USER ?? "root",
    SHELL: "/bin/bash",
    TMPDIR: tmp,
    TERMORCH_TMUX_SOCKET: socket,
    TERMORCH_REGISTRY: join(tmp, "registry"),
    TERMORCH_CONFIG: "",
    ...extra,
  });
  return {
    home,
    tmp,
    socket,
    path,
    env,
    workspace(context = "# task\n") {
      const dir = mkdtempSync(join(tmp, "ws-"));
      const repo = join(dir, "repo");
      mkdirSync(join(repo, "ctx"), { recursive: true });
      writeFileSync(join(repo, "README.md"), "hello\n");
      writeFileSync(join(repo, "ctx", "task.md"), context);
      const git = (...args: string[]): string =>
        execFileSync("git", ["-C", repo, ...args], { encoding: "utf8" });
      git("init", "-q", "-b", "main");
      git("add", "-A");
      git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "init");
      return { dir, repo };
    },
    async termorch(args, opts = {}) {
      const r = await execa(process.execPath, [BIN, ...args], {
        reject: false,
        cwd: opts.cwd ?? tmp,
        env: env(opts.env),
        extendEnv: false,
        timeout: opts.timeoutMs ?? 170_000,
      });
      return { exitCode: r.exitCode ?? -1, stdout: String(r.stdout), stderr: String(r.stderr) };
    },
    cliFiles() {
      const out = new Map<string, string>();
      const walk = (p: string): void => {
        const st = statSync(p, { throwIfNoEntry: false });
        if (!st) return;
        if (st.isDirectory()) for (const e of readdirSync(p)) walk(join(p, e));
        else out.set(relative(home, p), createHash("sha256").update(decisionsOf(home, p)).digest("hex"));
      };
      for (const f of CLI_FILES) walk(join(home, f));
      return out;
    },
    dispose() {
      try {
        execFileSync("tmux", ["-L", socket, "kill-server"], {
          stdio: "ignore",
          env: { ...process.env, TMUX: "" },
        });
      } catch {}
      // TERMORCH_REAL_KEEP=1 keeps the world (HOME, runs, repositories) to look at after a failure.
      if (process.env.TERMORCH_REAL_KEEP === "1") console.log(`kept ${tmp}`);
      else rmSync(tmp, { recursive: true, force: true });
    },
  };
}

/**
 * A file's bytes, but for ~/.claude.json, which Claude Code rewrites on every start (start counts,
 * ids, per-project session data): there, what the user decided (set-up done, API keys approved or
 * rejected, folders trusted).
 */
function decisionsOf(home: string, path: string): Buffer | string {
  const bytes = readFileSync(path);
  if (relative(home, path) !== ".claude.json") return bytes;
  const c = JSON.parse(bytes.toString("utf8")) as {
    hasCompletedOnboarding?: boolean;
    customApiKeyResponses?: unknown;
    projects?: Record<string, { hasTrustDialogAccepted?: boolean }>;
  };
  const trusted = Object.entries(c.projects ?? {})
    .filter(([, p]) => p.hasTrustDialogAccepted)
    .map(([dir]) => dir)
    .sort();
  return JSON.stringify([c.hasCompletedOnboarding ?? null, c.customApiKeyResponses ?? null, trusted]);
}

/** Every file termorch wrote for the run (the run folder but the repository), as text. */
export function allText(dir: string): string {
  let out = "";
  for (const e of readdirSync(dir, { recursive: true, encoding: "utf8" })) {
    if (e === "repo" || e.startsWith("repo/")) continue;
    const p = join(dir, e);
    if (statSync(p).isFile()) out += readFileSync(p, "latin1");
  }
  return out;
}

export function readReport(dir: string): Report {
  return JSON.parse(readFileSync(join(dir, "execution_report.json"), "utf8")) as Report;
}

/** Whether `npm run test:agents` installed the CLIs (it does before running this suite). */
export const CLIS_INSTALLED = existsSync(join(CLI_BIN, "claude"));

/**
 * A test file's world and model server, started before its tests and stopped after them; its
 * HOME holds what a user of each CLI has there after its first start (each recipe's seedHome).
 */
export function realAgentsSuite(tag: string): { world: World; server: () => ModelServer } {
  const world = makeWorld(tag);
  let server: ModelServer | null = null;
  beforeAll(async () => {
    server = await startModelServer([{ reply: "nothing scripted" }]);
    for (const r of Object.values(RECIPES)) r.seedHome?.(world.home, server.url);
  });
  afterAll(async () => {
    await server?.close();
    world.dispose();
  });
  return { world, server: () => server! };
}

/** The usual script: each task writes the file its prompt names (WRITE-FILE X), then answers with usage. */
export const perTask = (text: string): Step[] => {
  const task = /WRITE-FILE (\w+)/.exec(text)?.[1] ?? "unknown";
  return [
    { write: `${task}.txt`, content: `written for ${task}\n` },
    { reply: `Done: wrote ${task}.txt`, usage: { input: 1200, output: 80, cacheRead: 400, cacheWrite: 100 } },
  ];
};

/**
 * Every string of a request's JSON body (the system prompt, the user's message, tool results), as
 * the CLI sent them: what termorch wrote reads as it wrote it. Not JSON: the text itself.
 */
export function stringsIn(text: string): string[] {
  const out: string[] = [];
  const walk = (v: unknown): void => {
    if (typeof v === "string") out.push(v);
    else if (Array.isArray(v)) v.forEach(walk);
    else if (typeof v === "object" && v !== null) Object.values(v).forEach(walk);
  };
  try {
    walk(JSON.parse(text));
  } catch {
    return [text];
  }
  return out;
}

/** The same, one string per line. */
export const stringsOf = (text: string): string => stringsIn(text).join("\n");
