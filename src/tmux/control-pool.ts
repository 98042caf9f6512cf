import { mkdir, rm, rmdir, stat } from "node:fs/promises";
import { dirname } from "node:path";
import { KeyedQueue } from "../concurrency/keyed-queue.js";
import { ControlClient } from "./control.js";

/**
 * tmux 3.3a's server crashes (SIGSEGV, every session lost) when control-mode clients start or
 * end at the same moment: measured here, two clients started together killed the server 10
 * times in 10, and so did four ending together, while the same clients started and ended one
 * after the other never did (it also crashed collecting a placeholder through
 * destroy-unattached, which control.ts therefore no longer uses). So a process keeps ONE control
 * client per server, shared by all its runs (the daemon drives several at once), and starts and
 * ends it while holding a lock that every termorch process using that socket takes (two cron
 * runs may start together). What this cannot prevent — another process creating or killing a
 * session while our client is still identifying (tmux PR #4980) — is why control mode is opt-in.
 */

/** What identifies a shareable client: the same server, reached the same way. */
export interface ControlSpec {
  bin: string;
  socket: string;
  /** Absolute path of the socket: the lock lives beside it, so every process finds the same one. */
  socketPath: string;
  baseArgs: readonly string[];
  env: Record<string, string>;
  size: { width: number; height: number };
  timeoutMs: number;
}

interface Entry {
  client: ControlClient | null;
  starting: Promise<ControlClient | null> | null;
  users: number;
}

const entries = new Map<string, Entry>();

function keyOf(spec: ControlSpec): string {
  return [spec.bin, spec.socketPath, ...spec.baseArgs, `${spec.size.width}x${spec.size.height}`].join("\0");
}

/** A lease on the process's shared control client of one server; release it when done. */
export class ControlLease {
  private released = false;

  private constructor(
    private readonly key: string,
    private readonly spec: ControlSpec,
  ) {}

  static take(spec: ControlSpec): ControlLease {
    const key = keyOf(spec);
    let entry = entries.get(key);
    if (!entry) {
      entry = { client: null, starting: null, users: 0 };
      entries.set(key, entry);
    }
    entry.users += 1;
    return new ControlLease(key, spec);
  }

  /** The live client, started (once, under the lock) when there is none; null if it cannot start. */
  async client(): Promise<ControlClient | null> {
    const entry = entries.get(this.key);
    if (this.released || !entry) return null;
    if (entry.client?.alive) return entry.client;
    entry.starting ??= withControlLock(this.spec.socketPath, async () => {
      const s = this.spec;
      const client = new ControlClient(s.bin, s.baseArgs, s.env, s.size, s.timeoutMs);
      if (await client.ready) return client;
      await client.close();
      return null;
    }).finally(() => {
      entry.starting = null;
    });
    entry.client = await entry.starting;
    return entry.client;
  }

  /** Gives the lease back; the last one ends the client (under the lock). */
  async release(): Promise<void> {
    if (this.released) return;
    this.released = true;
    const entry = entries.get(this.key);
    if (!entry) return;
    entry.users -= 1;
    if (entry.users > 0) return;
    entries.delete(this.key);
    const client = (await entry.starting?.catch(() => null)) ?? entry.client;
    entry.client = null;
    if (client?.alive) await withControlLock(this.spec.socketPath, () => client.close());
  }
}

/** Held only while a client starts or ends: milliseconds. Older means its holder died. */
const STALE_MS = 5_000;
/** Waiting longer than this for a lock means something is wrong; go on without it. */
const WAIT_MS = 15_000;
const POLL_MS = 5;

/** In-process queue per lock, so this process's own callers wait without polling. */
const queue = new KeyedQueue();

/**
 * Runs `fn` holding `<socket path>.termorch-control.lock` (a directory: mkdir is atomic
 * everywhere). The socket's folder is tmux's own per-user folder, created 0700 if missing, as
 * tmux itself would.
 */
export function withControlLock<T>(socketPath: string, fn: () => Promise<T>): Promise<T> {
  const lock = `${socketPath}.termorch-control.lock`;
  return queue.run(lock, async () => {
    const held = await acquire(lock);
    try {
      return await fn();
    } finally {
      if (held) await rmdir(lock).catch(() => {});
    }
  });
}

async function acquire(lock: string): Promise<boolean> {
  await mkdir(dirname(lock), { recursive: true, mode: 0o700 });
  const deadline = Date.now() + WAIT_MS;
  for (;;) {
    try {
      await mkdir(lock);
      return true;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "EEXIST") return false;
    }
    const since = (await stat(lock).catch(() => null))?.mtimeMs;
    if (since !== undefined && Date.now() - since > STALE_MS) {
      await rm(lock, { recursive: true, force: true });
      continue;
    }
    if (Date.now() > deadline) return false;
    await new Promise((r) => setTimeout(r, POLL_MS));
  }
}
