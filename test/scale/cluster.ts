import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { BIN, cliEnv, TEST_TMP } from "../integration/harness.js";

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
        env: { ...process.env, ...cliEnv(this.socket), TMPDIR: this.tmp },
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
    this.proc = null;
    if (!proc) return null;
    proc.kill("SIGTERM");
    return exited(proc);
  }

  async dispose(): Promise<void> {
    await this.kill();
    try {
      execFileSync("tmux", ["-L", this.socket, "kill-server"], { stdio: "ignore" });
    } catch {}
  }
}
