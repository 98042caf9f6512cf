import type { Redis } from "ioredis";
import { WorkerInfo } from "../contract/task-job.js";
import { EnvironmentError } from "../errors.js";

// ioredis and bullmq are imported when a command needs them (`await import`): the CLI's bundle
// keeps them outside (scripts/bundle.js), so that a local run never pays for loading them.

/**
 * Redis as the scale-out backend uses it: BullMQ's queue of task jobs, plus two kinds of keys
 * of termorch's own (workers' announcements, cancelled runs). docs/SCALING.md.
 */

/** The one queue of task jobs every coordinator and worker on a Redis shares. */
export const QUEUE = "termorch-tasks";

/** `termorch:worker:<name>`: a worker's announcement (WorkerInfo JSON), expiring unless renewed. */
export const workerKey = (name: string): string => `termorch:worker:${name}`;
const WORKER_KEYS = "termorch:worker:*";

/** `termorch:files:<job>`: a finished job's logs and artifacts (ResultFile[] JSON), until its coordinator took them. */
export const filesKey = (jobId: string): string => `termorch:files:${jobId}`;

/** `termorch:cancel:<run>`: the run was cancelled; its workers end its tasks. */
export const cancelKey = (runId: string): string => `termorch:cancel:${runId}`;

/** A Redis URL as it may be shown and logged: its password dropped. */
export function shownRedis(url: string): string {
  try {
    const u = new URL(url);
    if (u.password) u.password = "***";
    return u.toString().replace(/\/$/, "");
  } catch {
    return "(an invalid Redis URL)";
  }
}

/**
 * A connection BullMQ can use (it needs `maxRetriesPerRequest: null`): it reconnects for ever,
 * so a Redis restarted mid-run is waited for rather than failing the run.
 */
export async function redisConnection(url: string): Promise<Redis> {
  const { Redis } = await import("ioredis");
  const client = new Redis(url, {
    maxRetriesPerRequest: null,
    enableReadyCheck: true,
    retryStrategy: (times) => Math.min(times * 200, 2000),
  });
  // Its errors are retried; the BullMQ object it serves reports them (without a listener,
  // ioredis prints each one to stderr).
  client.on("error", () => {});
  return client;
}

/**
 * Checks that Redis answers at `url`, within `timeoutMs`: an unreachable one is an error of the
 * environment (exit 2) that says where and what to do, before anything starts.
 */
export async function requireRedis(url: string, what: string, timeoutMs = 5000): Promise<void> {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new EnvironmentError(
      `${what} "${shownRedis(url)}" is not a URL; give one like redis://127.0.0.1:6379`,
    );
  }
  if (parsed.protocol !== "redis:" && parsed.protocol !== "rediss:")
    throw new EnvironmentError(`${what} ${shownRedis(url)} is not a redis:// or rediss:// URL`);
  const { Redis } = await import("ioredis");
  const probe = new Redis(url, {
    lazyConnect: true,
    connectTimeout: timeoutMs,
    maxRetriesPerRequest: 0,
    enableOfflineQueue: false,
    retryStrategy: () => null,
  });
  // ioredis also emits what it tells the caller; without a listener Node would print it.
  probe.on("error", () => {});
  try {
    await probe.connect();
    await probe.ping();
  } catch (error) {
    throw new EnvironmentError(
      `cannot reach Redis at ${shownRedis(url)} (${what}): ${sentence(error instanceof Error ? error.message : String(error))} Start redis-server there, or give the right URL; nothing was started.`,
    );
  } finally {
    probe.disconnect();
  }
}

/**
 * Drops what a run left in Redis: its cancel mark, its results' files and its jobs (a job a worker
 * still holds is locked, and stays). Answers how many keys and jobs went.
 */
export async function forgetRunInRedis(url: string, runId: string): Promise<number> {
  await requireRedis(url, "the run's Redis");
  const redis = await redisConnection(url);
  const { Queue } = await import("bullmq");
  const queue = new Queue(QUEUE, { connection: redis });
  try {
    let gone = await redis.del(cancelKey(runId));
    for (const key of await scanKeys(redis, `${filesKey(`${runId}.`)}*`)) gone += await redis.del(key);
    // A job's keys are `bull:<queue>:<job id>` and more under it; a run's job ids start with `<run>.`.
    const prefix = queue.toKey(`${runId}.`);
    const jobIds = new Set(
      (await scanKeys(redis, `${prefix}*`)).map((k) => k.slice(queue.toKey("").length).split(":")[0]!),
    );
    for (const id of jobIds) gone += await queue.remove(id).catch(() => 0);
    return gone;
  } finally {
    await queue.close().catch(() => {});
    redis.disconnect();
  }
}

async function scanKeys(redis: Redis, pattern: string): Promise<string[]> {
  const keys: string[] = [];
  let cursor = "0";
  do {
    const [next, batch] = await redis.scan(cursor, "MATCH", pattern, "COUNT", 1000);
    cursor = next;
    keys.push(...batch);
  } while (cursor !== "0");
  return keys;
}

/** The workers announced on a Redis (an announcement expires ~15 s after its worker is gone), by name. */
export async function announcedWorkers(redis: Redis): Promise<WorkerInfo[]> {
  const keys = await scanKeys(redis, WORKER_KEYS);
  const values = keys.length > 0 ? await redis.mget(...keys) : [];
  return values
    .flatMap((v) => {
      const parsed = v === null ? null : WorkerInfo.safeParse(jsonOrNull(v));
      return parsed?.success ? [parsed.data] : [];
    })
    .sort((a, b) => a.name.localeCompare(b.name));
}

/** Parsed JSON, or null for text that is not JSON (a key someone else wrote). */
export function jsonOrNull(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return null;
  }
}

/** A message as a sentence: one full stop at its end (ioredis ends some of its own with one). */
function sentence(text: string): string {
  return `${text.replace(/[.\s]+$/, "")}.`;
}
