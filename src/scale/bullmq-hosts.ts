import type { Job, Queue, QueueEvents } from "bullmq";
import type { Redis } from "ioredis";
import type { Logger } from "pino";
import { z } from "zod";
import { boundedWait } from "../concurrency/bounded-wait.js";
import {
  emptyResult,
  LogChunk,
  ResultFile,
  type TaskJob,
  TaskJobProgress,
  TaskJobResult,
} from "../contract/task-job.js";
import type { TaskHosts } from "../runner/task-hosts.js";
import {
  announcedWorkers,
  cancelKey,
  filesKey,
  jsonOrNull,
  QUEUE,
  redisConnection,
  requireRedis,
  shownRedis,
} from "./redis.js";

/**
 * How long a finished job stays in Redis when its coordinator never came to forget it (it died,
 * and was not resumed within this): a resumed coordinator finds its tasks' results until then.
 */
const KEEP_FINISHED_S = 24 * 3600;
/** How often a waiting coordinator asks Redis for its jobs, besides listening to events (which a reconnect can miss). */
const RECONCILE_MS = 2000;
/**
 * How long a job may wait with no worker announced before the coordinator says so: long enough
 * for workers started with the run to announce themselves, short enough that a user who started
 * none learns it before wondering (it said nothing for the first 20 s).
 */
const IDLE_WARNING_MS = 3000;

interface Waiter {
  job: TaskJob;
  /** When it was queued: a job no worker took for long is said once. */
  since: number;
  onProgress: (p: TaskJobProgress) => void;
  onLog: (chunk: LogChunk) => void;
  /** Job log rows (streamed log pieces) already handed on, and whether a look at them is under way. */
  logRows: number;
  pulling: boolean;
  /** Looks at the job so far (the whole job is read every tenth). */
  looks: number;
  settle: (r: TaskJobResult) => void;
  lastProgress: string;
}

/**
 * The coordinator's side of the bullmq backend: each task is one BullMQ job, keyed by its id
 * (`<run>.<start>.<task>`), so adding it again (a resumed run, a Redis that lost it) never makes
 * a second job while the first exists. Results come from the queue's events, and from a
 * reconcile pass every two seconds for what a reconnect missed.
 */
export class BullmqHosts implements TaskHosts {
  readonly name: string;
  private readonly waiters = new Map<string, Waiter>();
  private timer: NodeJS.Timeout | null = null;
  private reconciling = false;
  private saidIdle = false;
  private notice: (notice: string | null) => void = () => {};
  /** When workers' announcements were last looked at for that (at most once a reconcile pass). */
  private idleLookedAt = 0;

  private constructor(
    private readonly queue: Queue,
    private readonly events: QueueEvents,
    private readonly redis: Redis,
    /** The connections given to BullMQ: it does not close a connection it was handed. */
    private readonly connections: readonly Redis[],
    private readonly log: Logger,
    url: string,
  ) {
    this.name = `bullmq ${shownRedis(url)}`;
    events.on("progress", ({ jobId, data }) => this.progress(jobId, data));
    // A look that fails (Redis away for a moment) is taken again by the reconcile pass.
    events.on("completed", ({ jobId }) => void this.check(jobId).catch(() => {}));
    events.on("failed", ({ jobId }) => void this.check(jobId).catch(() => {}));
  }

  /** Connects to the queue on `url`; an unreachable Redis is an environment error (exit 2). */
  static async connect(url: string, log: Logger): Promise<BullmqHosts> {
    await requireRedis(url, "--redis");
    const { Queue, QueueEvents } = await import("bullmq");
    const connections = [await redisConnection(url), await redisConnection(url)];
    const queue = new Queue(QUEUE, { connection: connections[0]! });
    const events = new QueueEvents(QUEUE, { connection: connections[1]! });
    const warn = (error: Error): void => log.warn({ err: error.message }, "Redis connection error; retrying");
    queue.on("error", warn);
    events.on("error", warn);
    await events.waitUntilReady();
    return new BullmqHosts(queue, events, await redisConnection(url), connections, log, url);
  }

  run(
    jobId: string,
    job: TaskJob,
    o: {
      onProgress: (p: TaskJobProgress) => void;
      onLog: (chunk: LogChunk) => void;
      detach: AbortSignal;
    },
  ): Promise<TaskJobResult | "detached"> {
    return new Promise((resolve, reject) => {
      if (o.detach.aborted) return resolve("detached");
      const done = (r: TaskJobResult | "detached"): void => {
        this.waiters.delete(jobId);
        o.detach.removeEventListener("abort", onDetach);
        if (this.waiters.size === 0) this.stopReconciling();
        resolve(r);
      };
      const onDetach = (): void => done("detached");
      o.detach.addEventListener("abort", onDetach, { once: true });
      this.waiters.set(jobId, {
        job,
        since: Date.now(),
        onProgress: o.onProgress,
        onLog: o.onLog,
        logRows: 0,
        pulling: false,
        looks: 0,
        settle: done,
        lastProgress: "",
      });
      this.startReconciling();
      this.ensure(jobId, job).then(
        // A failed look is looked at again by the reconcile pass.
        () => this.check(jobId).catch(() => {}),
        (error: unknown) => {
          this.waiters.delete(jobId);
          reject(error);
        },
      );
    });
  }

  async forget(jobId: string): Promise<void> {
    await this.queue.remove(jobId);
    await this.redis.del(filesKey(jobId));
  }

  onNotice(listener: (notice: string | null) => void): void {
    this.notice = listener;
  }

  async forgetRun(runId: string): Promise<void> {
    await this.redis.del(cancelKey(runId));
  }

  async cancel(runId: string): Promise<void> {
    await this.redis.set(cancelKey(runId), "1", "EX", KEEP_FINISHED_S);
    // Jobs no worker took yet are withdrawn: their tasks never start. One a worker takes meanwhile
    // is locked, so removing it fails; that worker sees the cancel and ends the task.
    for (const [jobId, w] of this.waiters) {
      if (w.job.run_id !== runId) continue;
      // Only a job still waiting: a finished one holds a result to apply, not to drop.
      const state = await this.queue.getJobState(jobId).catch(() => "unknown");
      if (state !== "waiting" && state !== "prioritized" && state !== "delayed") continue;
      const removed = await this.queue
        .remove(jobId)
        .then((n) => n > 0)
        .catch(() => false);
      if (removed) w.settle(notStarted(w.job));
    }
  }

  async close(): Promise<void> {
    this.stopReconciling();
    // Bounded: a Redis that is gone must not keep the command from ending.
    await boundedWait(Promise.allSettled([this.events.close(), this.queue.close()]), 2000);
    for (const c of [this.redis, ...this.connections]) c.disconnect();
    // BullMQ's own duplicates of those connections go too (waiting for an end that may not come).
    await boundedWait(Promise.allSettled([this.events.disconnect(), this.queue.disconnect()]), 2000);
  }

  /** The job of that id exists: added now, or found (a resumed run; a Redis that lost it gets it again). */
  private async ensure(jobId: string, job: TaskJob): Promise<void> {
    const { Job } = await import("bullmq");
    if (await Job.fromId(this.queue, jobId)) return;
    await this.queue.add("task", job, {
      jobId,
      attempts: 1,
      removeOnComplete: { age: KEEP_FINISHED_S },
      // Streamed log pieces the coordinator has not read yet, at most (about 16 MiB): older ones go.
      keepLogs: 256,
      removeOnFail: { age: KEEP_FINISHED_S },
    });
  }

  private progress(jobId: string, data: unknown): void {
    const w = this.waiters.get(jobId);
    if (!w) return;
    const key = JSON.stringify(data);
    if (key === w.lastProgress) return;
    const parsed = TaskJobProgress.safeParse(data);
    if (!parsed.success) return;
    // A worker took a job: the warning that none is there no longer holds (it is said again if so).
    if (this.saidIdle) {
      this.saidIdle = false;
      this.notice(null);
    }
    w.lastProgress = key;
    w.onProgress(parsed.data);
  }

  /** Looks at one job in Redis: its last progress, and its end when it ended. */
  private async check(jobId: string): Promise<void> {
    const w = this.waiters.get(jobId);
    if (!w) return;
    // The state first: a job that completes between the two reads is then seen as still running
    // (its completion and its return value are written together, by one script). A job read
    // before its state came back completed with no return value, and lost tasks that had succeeded.
    const state = await this.queue.getJobState(jobId);
    // At the first look the log pieces come after the progress, which says where a resumed
    // coordinator copies the running attempt's logs.
    const first = w.looks === 0;
    if (!first) await this.pullLogs(jobId, w);
    if (state === "waiting" && !this.saidIdle && Date.now() - w.since > IDLE_WARNING_MS)
      await this.sayIfNoWorker();
    // The whole job (its data holds the prompt) is read only when it ended or is gone, at the first
    // look (a resumed coordinator learns at once where its task runs), and every tenth look for the
    // progress the queue's events may have missed during a reconnect.
    const ended = state === "completed" || state === "failed" || state === "unknown";
    if (!ended && w.looks++ % 10 !== 0) return;
    const { Job } = await import("bullmq");
    const job: Job | undefined = await Job.fromId(this.queue, jobId);
    if (!job) {
      // Redis lost it (restarted without its append-only file): the task runs again from its base.
      this.log.warn({ job: jobId }, "the task's job is gone from Redis; adding it again");
      await this.ensure(jobId, w.job);
      return;
    }
    if (job.progress && typeof job.progress === "object") this.progress(jobId, job.progress);
    if (first) await this.pullLogs(jobId, w);
    if (state === "completed") {
      const parsed = TaskJobResult.safeParse(job.returnvalue);
      w.settle(
        parsed.success
          ? await this.withFiles(parsed.data)
          : lostResult(job, "its worker's result does not parse"),
      );
    } else if (state === "failed") {
      w.settle(lostResult(job, job.failedReason || "its job failed"));
    }
  }

  /**
   * The result with its files, which its worker left under their own key: a job's return value is
   * also copied into BullMQ's events stream, which keeps thousands of them, and the files (logs
   * up to the cap) would stay there long after the job is gone.
   */
  private async withFiles(result: TaskJobResult): Promise<TaskJobResult> {
    if (result.files_key === null) return result;
    const raw = await this.redis.get(result.files_key);
    const files = z.array(ResultFile).safeParse(raw === null ? null : jsonOrNull(raw));
    if (files.success) return { ...result, files: files.data };
    return { ...result, detail: `${result.detail ?? ""} (its logs and artifacts were lost in Redis)`.trim() };
  }

  /** Hands on the log pieces its worker streamed since the last look (BullMQ keeps them as job log rows). */
  private async pullLogs(jobId: string, w: Waiter): Promise<void> {
    if (w.pulling) return;
    w.pulling = true;
    try {
      for (;;) {
        const { logs } = await this.queue.getJobLogs(jobId, w.logRows, w.logRows + 99);
        if (logs.length === 0) return;
        w.logRows += logs.length;
        for (const row of logs) {
          const chunk = LogChunk.safeParse(jsonOrNull(row));
          if (chunk.success) w.onLog(chunk.data);
        }
      }
    } finally {
      w.pulling = false;
    }
  }

  /**
   * Said once: with no worker announced, the run's jobs only wait. Looked at again while they
   * wait, since an announcement outlives a killed worker by its lifetime.
   */
  private async sayIfNoWorker(): Promise<void> {
    if (Date.now() - this.idleLookedAt < RECONCILE_MS) return;
    this.idleLookedAt = Date.now();
    if ((await announcedWorkers(this.redis)).length > 0) return;
    this.saidIdle = true;
    const said = `no termorch worker is announced on ${this.name.replace(/^bullmq /, "")}: the run's tasks wait in its queue; start one with: termorch worker --redis URL`;
    this.log.error(said);
    this.notice(said);
  }

  private startReconciling(): void {
    this.timer ??= setInterval(() => void this.reconcile(), RECONCILE_MS);
  }

  private stopReconciling(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }

  private async reconcile(): Promise<void> {
    if (this.reconciling) return;
    this.reconciling = true;
    try {
      for (const id of [...this.waiters.keys()]) await this.check(id);
    } catch (error) {
      this.log.warn(
        { err: error instanceof Error ? error.message : String(error) },
        "could not look at the task jobs; retrying",
      );
    } finally {
      this.reconciling = false;
    }
  }
}

/** A job withdrawn before any worker took it. */
function notStarted(job: TaskJob): TaskJobResult {
  return emptyResult({
    worker: "",
    host: "",
    state: "skipped",
    reason: "cancelled",
    detail: `the run stopped before task ${job.task_id} started`,
  });
}

/** A job that ended without a worker's result (its workers died more often than BullMQ allows, or a worker's bug). */
function lostResult(job: Job, why: string): TaskJobResult {
  const progress = TaskJobProgress.safeParse(job.progress);
  return emptyResult({
    worker: progress.success ? progress.data.worker : "",
    host: progress.success ? progress.data.host : "",
    state: "failed",
    reason: "lost",
    detail: `its job ended without a result: ${why}`,
    attempts: progress.success ? progress.data.attempt : 0,
  });
}
