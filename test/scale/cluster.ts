import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe } from "vitest";
import { BIN, cliEnv, killServer, makeWorkspace, TEST_TMP, uniqueSocket } from "../integration/harness.js";
import { has } from "../needs.js";

/**
 * Real parts for the scale-out tests: a private redis-server on a loopback port with its own
 * data folder, and `termorch worker` processes, each with its own tmux socket, workdir and
 * TMPDIR (so, as on separate hosts, they share nothing but Redis and the git remote).
 */

/** A free loopback port (the kernel's pick, released for the server to take). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once("error", reject);
    s.listen(0, "127.0.0.1", () => {
      const address = s.address();
      s.close(() =>
        typeof address === "object" && address ? resolve(address.port) : reject(new Error("no port")),
      );
    });
  });
}

/** Resolves once `proc` printed `text` on stdout or stderr; rejects when it exits first or after `timeoutMs`. */
export function outputOf(proc: ChildProcess, text: string | RegExp, timeoutMs = 20_000): Promise<string> {
  return new Promise((resolve, reject) => {
    let seen = "";
    const timer = setTimeout(
      () => done(new Error(`timed out after ${timeoutMs} ms waiting for ${text}; saw:\n${seen}`)),
      timeoutMs,
    );
    const onData = (chunk: Buffer): void => {
      seen += chunk.toString();
      if (typeof text === "string" ? seen.includes(text) : text.test(seen)) done(null);
    };
    const onExit = (code: number | null): void =>
      done(new Error(`exited (${code}) before printing ${text}:\n${seen}`));
    const done = (error: Error | null): void => {
      clearTimeout(timer);
      proc.stdout?.off("data", onData);
      proc.stderr?.off("data", onData);
      proc.off("exit", onExit);
      if (error) reject(error);
      else resolve(seen);
    };
    proc.stdout?.on("data", onData);
    proc.stderr?.on("data", onData);
    proc.once("exit", onExit);
  });
}

function exited(proc: ChildProcess): Promise<number | null> {
  if (proc.exitCode !== null || proc.signalCode !== null) return Promise.resolve(proc.exitCode);
  return new Promise((resolve) => proc.once("exit", (code) => resolve(code)));
}

/** redis-server with its append-only file on (fsync always), as docs/SCALING.md recommends. */
export class RedisServer {
  private proc: ChildProcess | null = null;
  readonly dir = mkdtempSync(join(tmpdir(), "termorch-redis-"));

  private constructor(readonly port: number) {}

  static async start(): Promise<RedisServer> {
    const server = new RedisServer(await freePort());
    await server.start();
    return server;
  }

  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  async start(): Promise<void> {
    const proc = spawn(
      "redis-server",
      [
        "--port",
        String(this.port),
        "--bind",
        "127.0.0.1",
        "--dir",
        this.dir,
        "--appendonly",
        "yes",
        "--appendfsync",
        "always",
        "--save",
        "",
      ],
      { stdio: ["ignore", "pipe", "pipe"] },
    );
    this.proc = proc;
    await outputOf(proc, "Ready to accept connections");
  }

  /** SIGTERM: redis-server flushes its append-only file and exits. */
  async stop(): Promise<void> {
    const proc = this.proc;
    this.proc = null;
    if (!proc) return;
    proc.kill("SIGTERM");
    await exited(proc);
  }

  async dispose(): Promise<void> {
    await this.stop();
    rmSync(this.dir, { recursive: true, force: true });
  }
}

/** One `termorch worker` process: its name, folder and tmux socket are its own. */
export class WorkerProcess {
  proc: ChildProcess | null = null;
  readonly tmp: string;
  readonly workdir: string;
  output = "";

  constructor(
    readonly name: string,
    private readonly redisUrl: string,
    private readonly extra: string[] = [],
    /** Set over the test's environment (e.g. TERMORCH_TMUX_SOCKET: "" to let a --config name the socket). */
    private readonly env: Record<string, string> = {},
  ) {
    this.tmp = mkdtempSync(join(TEST_TMP, `${name}-tmp-`));
    this.workdir = join(TEST_TMP, `${name}-work`);
    mkdirSync(this.workdir, { recursive: true });
  }

  /** The worker's tmux socket name (termorch-worker-<name>): killed by dispose(). */
  get socket(): string {
    return `termorch-worker-${this.name}`;
  }

  async start(): Promise<string> {
    const proc = spawn(
      process.execPath,
      [
        BIN,
        "worker",
        "--redis",
        this.redisUrl,
        "--workdir",
        this.workdir,
        "--name",
        this.name,
        "--max-parallel",
        "2",
        ...this.extra,
      ],
      {
        env: { ...process.env, ...cliEnv(this.socket), TMPDIR: this.tmp, ...this.env },
        stdio: ["ignore", "pipe", "pipe"],
      },
    );
    this.proc = proc;
    proc.stdout?.on("data", (c: Buffer) => (this.output += c.toString()));
    proc.stderr?.on("data", (c: Buffer) => (this.output += c.toString()));
    return outputOf(proc, "taking tasks from");
  }

  /** Kills the worker process alone (its tmux server and agents go on, as after a crash). */
  async kill(): Promise<void> {
    const proc = this.proc;
    this.proc = null;
    if (!proc) return;
    proc.kill("SIGKILL");
    await exited(proc);
  }

  /** A graceful stop (SIGTERM): answers its exit code. */
  async stop(): Promise<number | null> {
    const proc = this.proc;
    if (!proc) return null;
    proc.kill("SIGTERM");
    // Still this.proc until it has gone: dispose() kills one that does not stop.
    const code = await exited(proc);
    this.proc = null;
    return code;
  }

  async dispose(): Promise<void> {
    await this.kill();
    killServer(this.socket);
  }
}

/**
 * What a scale-out test file sets up: its own Redis (started before its tests), tmux socket for
 * the coordinator, workers and workspaces; all stopped and removed after the file.
 */
export function scaleTestFile(tag: string) {
  const socket = uniqueSocket(tag);
  const unique = `${process.pid}-${Math.random().toString(36).slice(2, 6)}`;
  let redis: RedisServer | null = null;
  const workers: WorkerProcess[] = [];
  const cleanups: (() => void)[] = [];
  // A machine without redis-server skips the file's suites (test/needs.ts).
  const withRedis = has("redis-server", `test/scale/ (${tag})`);
  beforeAll(async () => {
    if (withRedis) redis = await RedisServer.start();
  });
  afterAll(async () => {
    for (const w of workers) await w.dispose();
    await redis?.dispose();
    killServer(socket);
    for (const c of cleanups) c();
  });
  const server = (): RedisServer => {
    if (!redis) throw new Error("Redis is not started yet");
    return redis;
  };
  return {
    socket,
    redis: server,
    /** The file's `describe`: skipped on a machine without redis-server. */
    suite: withRedis ? describe : describe.skip,
    /** A started worker; `name` gets this file's unique suffix. The same name and folder again: `again(w)`. */
    async worker(name: string, extra: string[] = []): Promise<WorkerProcess> {
      const w = new WorkerProcess(`${name}-${unique}`, server().url, extra);
      workers.push(w);
      await w.start();
      return w;
    },
    /** A workspace repository, a bare remote and a config naming both and this file's Redis. */
    cluster(): { dir: string; repo: string; remote: string; config: string; marks: string } {
      const ws = makeWorkspace();
      cleanups.push(ws.cleanup);
      const remote = join(ws.dir, "remote.git");
      execFileSync("git", ["init", "-q", "--bare", remote]);
      const config = join(ws.dir, "config.json");
      writeFileSync(config, JSON.stringify({ backend: "bullmq", redis: server().url, git: { remote } }));
      const marks = join(ws.dir, "marks");
      mkdirSync(marks);
      return { ...ws, remote, config, marks };
    },
    track(w: WorkerProcess): WorkerProcess {
      workers.push(w);
      return w;
    },
  };
}

/** A task whose agent is a bash script; MARKS in its env is a folder outside the repository for its traces. */
export function bashTask(
  id: string,
  script: string,
  dependencies: string[] = [],
  marks = "",
): Record<string, unknown> {
  return { id, dependencies, command: ["bash", "-c", script], env: { MARKS: marks } };
}

/** A file's non-empty lines (none when it does not exist yet). */
export function lines(file: string): string[] {
  return existsSync(file) ? readFileSync(file, "utf8").split("\n").filter(Boolean) : [];
}

/** Polls an asynchronous check (another process's output) with a bounded timeout. */
export async function until<T>(check: () => Promise<T | null>, timeoutMs: number, what: string): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== null) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}
