import { execFileSync } from "node:child_process";
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { execa } from "execa";
import { afterAll } from "vitest";
import type { Report } from "../../src/contract/report.js";

export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..", "..");
export const BIN = join(ROOT, "bin", "termorch.js");
export const STEP = join(ROOT, "test", "fixtures", "agents", "step.sh");
/** The CLI with the crash-test fault of `$TERMORCH_FAULT` injected (the real one ignores it). */
export const FAULTY_BIN = join(ROOT, "test", "fixtures", "cli-with-fault.mjs");

/**
 * This test file's own temp folder: the CLIs it starts use it as TMPDIR (worktrees, locks, tmux
 * config) and as their run registry, so test files never see or collide with each other's runs,
 * nor with what an earlier run of the suite left behind.
 */
export const TEST_TMP = mkdtempSync(join(tmpdir(), "termorch-tmp-"));
export const REGISTRY = join(TEST_TMP, "registry");
// Once the file's tests are done (its own afterAll hooks, registered later, run before this one).
// Not on process exit: vitest ends its workers with a signal, which left every file's folder.
afterAll(() => rmSync(TEST_TMP, { recursive: true, force: true }));

/** termorch's warm worktree pool of this test file (its per-user folder is inside TEST_TMP). */
export const POOL_DIR = join(TEST_TMP, `termorch-${process.getuid?.() ?? "user"}`, "pool");

/** The repository's linked worktrees outside termorch's pool: what runs left in use. */
export function worktreesInUse(repo: string): string[] {
  return git(repo, "worktree", "list", "--porcelain")
    .split("\n")
    .filter((l) => l.startsWith("worktree "))
    .map((l) => l.slice("worktree ".length))
    .slice(1)
    .filter((p) => !p.startsWith(`${POOL_DIR}/`));
}

/** The environment of a termorch process a test starts. */
export function cliEnv(socket: string, extra: Record<string, string> = {}): Record<string, string> {
  return {
    TERMORCH_TMUX_SOCKET: socket,
    TMUX: "",
    TERMORCH_CONFIG: "",
    TERMORCH_REGISTRY: REGISTRY,
    TMPDIR: TEST_TMP,
    ...extra,
  };
}

/** A unique tmux socket for one test file; `killServer` kills only this one. */
export function uniqueSocket(tag: string): string {
  return `termorch-test-${tag}-${process.pid}-${Math.random().toString(36).slice(2, 8)}`;
}

export function killServer(socket: string): void {
  try {
    execFileSync("tmux", ["-L", socket, "kill-server"], {
      stdio: "ignore",
      env: { ...process.env, TMUX: "" },
    });
  } catch {}
  // tmux 3.3 leaves the socket file of a server that exited; it is this test file's own.
  rmSync(join(process.env.TMUX_TMPDIR ?? "/tmp", `tmux-${process.getuid?.() ?? 0}`, socket), { force: true });
}

export function tmuxSessions(socket: string): string[] {
  try {
    return execFileSync("tmux", ["-L", socket, "list-sessions", "-F", "#{session_name}"], {
      encoding: "utf8",
      stdio: ["ignore", "pipe", "ignore"],
      env: { ...process.env, TMUX: "" },
    })
      .split("\n")
      .filter(Boolean);
  } catch {
    return [];
  }
}

/** A temp folder holding a git repository `repo/` with one commit, and room for run files. */
export function makeWorkspace(opts: { git?: boolean } = {}): {
  dir: string;
  repo: string;
  cleanup: () => void;
} {
  const dir = mkdtempSync(join(tmpdir(), "termorch-it-"));
  const repo = join(dir, "repo");
  mkdirSync(join(repo, "ctx"), { recursive: true });
  writeFileSync(join(repo, "README.md"), "hello\n");
  writeFileSync(join(repo, "ctx", "task.md"), "# do the thing\n");
  if (opts.git !== false) {
    git(repo, "init", "-q", "-b", "main");
    git(repo, "add", "-A");
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "init");
  }
  const cleanup = (): void => {
    // Worktrees of kept (failed) tasks live outside the temp folder: remove them too.
    if (opts.git !== false && existsSync(repo)) {
      for (const line of git(repo, "worktree", "list", "--porcelain").split("\n")) {
        const path = line.startsWith("worktree ") ? line.slice(9) : null;
        if (path && path !== repo) rmSync(path, { recursive: true, force: true });
      }
    }
    rmSync(dir, { recursive: true, force: true });
  };
  return { dir, repo, cleanup };
}

export function git(repo: string, ...args: string[]): string {
  return execFileSync("git", ["-C", repo, ...args], { encoding: "utf8" });
}

/** Everything a test can compare to prove the workspace was not touched. */
export function workspaceSnapshot(repo: string): string {
  const isGit = existsSync(join(repo, ".git"));
  const files = listFiles(repo)
    .filter((f) => !f.startsWith(".git/"))
    .join("\n");
  if (!isGit) return files;
  return [
    files,
    git(repo, "status", "--porcelain", "--ignored"),
    git(repo, "for-each-ref"),
    git(repo, "worktree", "list", "--porcelain"),
    git(repo, "rev-parse", "HEAD"),
  ].join("\n---\n");
}

export function listFiles(dir: string, prefix = ""): string[] {
  const out: string[] = [];
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const rel = prefix ? `${prefix}/${entry.name}` : entry.name;
    if (entry.isDirectory()) out.push(`${rel}/`, ...listFiles(join(dir, entry.name), rel));
    else out.push(rel);
  }
  return out.sort();
}

export interface TaskSpec {
  id: string;
  dependencies?: string[];
  env?: Record<string, string>;
  [key: string]: unknown;
}

/** Writes an assignments file whose tasks run the step.sh fixture with the given env. */
export function writeAssignments(
  dir: string,
  tasks: TaskSpec[],
  extra: Record<string, unknown> = {},
  name = "assignments.json",
): string {
  const { environment, ...rest } = extra as { environment?: Record<string, unknown> };
  const body = {
    run_id: `t${Math.random().toString(36).slice(2, 8)}`,
    tasks: tasks.map((t) => ({
      agent: "step",
      context_path: "ctx/task.md",
      command: ["bash", STEP, "{context_path}"],
      dependencies: [],
      // The step agent changes nothing unless told to WRITE: only then is a change its work.
      ...(t.env?.WRITE === undefined ? { expect_changes: false } : {}),
      ...t,
    })),
    environment: { workspace_dir: "repo", ...environment },
    ...rest,
  };
  const file = join(dir, name);
  writeFileSync(file, JSON.stringify(body, null, 2));
  return file;
}

export interface CliResult {
  exitCode: number;
  stdout: string;
  stderr: string;
}

export async function termorch(
  args: string[],
  opts: { socket: string; env?: Record<string, string>; cwd?: string; timeoutMs?: number },
): Promise<CliResult> {
  const entry = opts.env?.TERMORCH_FAULT ? FAULTY_BIN : BIN;
  const result = await execa(process.execPath, [entry, ...args], {
    reject: false,
    cwd: opts.cwd ?? ROOT,
    env: cliEnv(opts.socket, opts.env),
    timeout: opts.timeoutMs ?? 120_000,
  });
  return { exitCode: result.exitCode ?? -1, stdout: String(result.stdout), stderr: String(result.stderr) };
}

export function readReport(dir: string): Report {
  return JSON.parse(readFileSync(join(dir, "execution_report.json"), "utf8")) as Report;
}

type Checked<T> = T | undefined | false | null;

/**
 * Polls a condition with a bounded timeout (for files and states produced by other processes).
 * An asynchronous check is awaited: its promise is not the answer. One that starts a process
 * (a `termorch status`) is given an interval to match, so that the wait does not keep a core busy.
 */
export async function waitFor<T>(
  check: () => Checked<T> | Promise<Checked<T>>,
  timeoutMs = 20_000,
  what = "condition",
  intervalMs = 25,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}

/**
 * Asks another process (a `termorch status`) until `done` holds or `timeoutMs` passes, with a
 * pause between asks; returns the last answer either way, for the caller's expect to show.
 */
export async function lastAnswer<T>(
  ask: () => Promise<T>,
  done: (answer: T) => boolean,
  timeoutMs: number,
  intervalMs = 200,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let answer = await ask();
  while (!done(answer) && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, intervalMs));
    answer = await ask();
  }
  return answer;
}

export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** Whether a process still runs (a zombie does not: it only waits to be reaped). */
export function running(pid: number): boolean {
  try {
    return !/^\S+ \(.*\) [ZX] /s.test(readFileSync(`/proc/${pid}/stat`, "utf8"));
  } catch {
    return false;
  }
}

/** When a process started (clock ticks since boot), or null when it is gone: a pid alone can be reused. */
function startOf(pid: number): string | null {
  try {
    return (
      readFileSync(`/proc/${pid}/stat`, "utf8")
        .replace(/^.*\) /s, "")
        .split(" ")[19] ?? null
    );
  } catch {
    return null;
  }
}

/**
 * A list of pids that are SIGKILLed after the test file, whatever happened to its tests: each only
 * if it is still the process that was added (pids wrap at 32768 on many machines, and a process that
 * ended may have handed its number to anything, the test runner included).
 */
export function killedAfterFile(): number[] {
  const pids: number[] = [];
  const starts = new Map<number, string | null>();
  const push = pids.push.bind(pids);
  pids.push = (...added: number[]): number => {
    for (const pid of added) starts.set(pid, startOf(pid));
    return push(...added);
  };
  afterAll(() => {
    for (const pid of pids) {
      const start = starts.get(pid);
      if (start == null || startOf(pid) !== start) continue;
      try {
        process.kill(pid, "SIGKILL");
      } catch {}
    }
  });
  return pids;
}

/** Every file under `dir` whose content contains `needle`. */
export function filesContaining(dir: string, needle: string): string[] {
  return listFiles(dir)
    .filter((f) => !f.endsWith("/"))
    .filter((f) => {
      try {
        return readFileSync(join(dir, f)).includes(needle);
      } catch {
        return false;
      }
    });
}

/**
 * What every CLI test file sets up: its own tmux socket (killed after the file, and only that
 * one) and temp workspaces (removed after), each with a `stamps/` folder for agents' clocks.
 */
export function testFile(tag: string) {
  const socket = uniqueSocket(tag);
  const cleanups: Array<() => void> = [];
  afterAll(() => {
    killServer(socket);
    for (const c of cleanups) c();
  });
  const workspace = (opts: { git?: boolean } = {}) => {
    const ws = makeWorkspace(opts);
    cleanups.push(ws.cleanup);
    const stamps = join(ws.dir, "stamps");
    mkdirSync(stamps);
    return { ...ws, stamps };
  };
  return { socket, workspace };
}

/** An agent's own nanosecond clock at its start or end (step.sh STAMPS). */
export const stamp = (stamps: string, id: string, edge: "start" | "end"): bigint =>
  BigInt(readFileSync(join(stamps, `${id}.${edge}`), "utf8").trim());

/** The non-empty lines of a file, or none when it does not exist (agents' COUNTER files). */
export const lines = (file: string): string[] =>
  existsSync(file) ? readFileSync(file, "utf8").trim().split("\n").filter(Boolean) : [];
