import { mkdirSync, rmSync } from "node:fs";
import { readdir } from "node:fs/promises";
import { hostname } from "node:os";
import { join, resolve } from "node:path";
import type { Job, Worker } from "bullmq";
import type { Redis } from "ioredis";
import type { Logger } from "pino";
import { boundedWait } from "../concurrency/bounded-wait.js";
import { TaskJob, type TaskJobResult, WorkerInfo } from "../contract/task-job.js";
import { InputError, LockedError } from "../errors.js";
import { writeJsonAtomic } from "../fs/atomic.js";
import { acquireLockFile, type WorkspaceLock } from "../fs/lock.js";
import { locksDir, sessionName } from "../fs/names.js";
import { pidAlive } from "../fs/proc.js";
import { pruneWorktrees } from "../git/remote.js";
import { TmuxRunner } from "../tmux/runner.js";
import { TmuxServer } from "../tmux/server.js";
import { cancelKey, filesKey, jsonOrNull, QUEUE, redisConnection, requireRedis, workerKey } from "./redis.js";
import { LOST_JOB, runTaskJob, type WorkerPlace } from "./task-job.js";

/** A worker's name: it names its tmux socket, its Redis key and its lock. */
export const WORKER_NAME = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,47}$/;

export interface WorkerOptions {
  redis: string;
  /** Tasks run at once on this host. */
  maxParallel: number;
  /** The worker's own folder (repositories, task folders, worktrees, worker.json). */
  workdir: string;
  /** Default: the host name. */
  name?: string;
  /** The git remote as this host reaches it, instead of the coordinator's. */
  remote?: string;
  /**
   * Seconds a job's lock lasts without the worker renewing it: a worker killed mid-task has its
   * task taken over by another after about this long (BullMQ's stalled-job check runs twice as often).
   */
  takeoverS: number;
  /** The tmux socket name of this worker's server (the config's tmux.socket); default `termorch-worker-<name>`. */
  socket?: string;
  /** What the report and status call this host (`--host-label`); default its host name. */
  hostLabel?: string;
  env: Readonly<Record<string, string | undefined>>;
  log: Logger;
}

/** A host label: a host name's characters, as an `ssh` line shows it. */
export const HOST_LABEL = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,252}$/;

const HEARTBEAT_MS = 5000;
/** Sets KEYS[2] to ARGV[2] (expiring in ARGV[3] s) only while KEYS[1], a job's lock, holds ARGV[1]. */
const SET_IF_LOCKED = `if redis.call("GET", KEYS[1]) == ARGV[1] then
  redis.call("SET", KEYS[2], ARGV[2], "EX", ARGV[3])
  return 1
end
return 0`;
/** How long a forced stop waits for the running tasks to end and go back to the queue. */
const FORCED_STOP_MS = 15_000;
const CANCEL_POLL_MS = 1000;

interface Active {
  job: Job;
  runId: string;
  taskId: string;
  cancel: AbortController;
  /** The worker is made to stop now: the task's end goes back to the queue, not to its coordinator. */
  leaving: boolean;
  /** The job's lock was lost to another worker: nothing of this attempt is published. */
  lost: boolean;
  attempt: number;
}

/**
 * `termorch worker`: takes task jobs from Redis and runs each with the local pipeline in this
 * host's own tmux server (runTaskJob). It announces itself in Redis and in `<workdir>/worker.json`
 * every few seconds; at start it ends what an earlier life of it left (sessions, task folders),
 * since a job it held was taken over by another worker meanwhile.
 */
export class TaskWorker {
  private readonly active = new Map<string, Active>();
  private timers: NodeJS.Timeout[] = [];
  private worker: Worker | null = null;
  private closing: Promise<void> | null = null;
  private readonly idleWaiters: (() => void)[] = [];
  private redis: Redis | null = null;
  /** Puts a job back in the queue (BullMQ's way: move it, then throw its WaitingError). */
  private requeue: (job: Job, token: string | undefined) => Promise<never> = async () => {
    throw new Error("the worker is not started");
  };
  /** BullMQ does not close a connection it was handed. */
  private workerConnection: Redis | null = null;
  private lock: WorkspaceLock | null = null;
  private readonly startedAt = Date.now();
  readonly name: string;
  readonly workdir: string;
  /** This host as the report names it (`--host-label`, else its host name). */
  readonly host: string;
  private readonly runner: TmuxRunner;
  /** The git remotes its jobs could not be fetched from (said once each). */
  private readonly unreachable = new Set<string>();
  /** Its tmux server is one the config named, which others may use too. */
  private readonly sharedSocket: boolean;
  private socketPath = "";

  constructor(private readonly o: WorkerOptions) {
    this.name =
      o.name ??
      hostname()
        .split(".")[0]!
        .replace(/[^A-Za-z0-9_.-]/g, "-");
    if (!WORKER_NAME.test(this.name))
      throw new InputError([
        { message: `worker name "${this.name}" must be 1-48 letters, digits, _ . - (give one with --name)` },
      ]);
    this.host = o.hostLabel ?? hostname();
    if (!HOST_LABEL.test(this.host))
      throw new InputError([
        {
          message: `host label "${this.host}" must be 1-253 letters, digits, _ . - (give one with --host-label)`,
        },
      ]);
    this.workdir = resolve(o.workdir);
    const own = `termorch-worker-${this.name}`;
    this.sharedSocket = o.socket !== undefined && o.socket !== own;
    // Its agents end by themselves once this process has been gone as long as its jobs' locks
    // last (another worker runs those tasks by then), even if no worker of its name comes back.
    this.runner = new TmuxRunner(new TmuxServer({ socket: o.socket ?? own }), {
      pid: process.pid,
      afterMs: o.takeoverS * 1000,
    });
  }

  /** Connects, ends what an earlier life left, and starts taking jobs. */
  async start(): Promise<{ socketPath: string; stale: number }> {
    try {
      await requireRedis(this.o.redis, "--redis");
      mkdirSync(this.workdir, { recursive: true, mode: 0o700 });
      mkdirSync(locksDir(), { recursive: true, mode: 0o700 });
      this.lock = await acquireLockFile(join(locksDir(), `worker-${this.name}.lock`), `worker ${this.name}`, {
        run_id: `worker-${this.name}`,
        run_dir: this.workdir,
      });
      this.redis = await redisConnection(this.o.redis);
      await this.refuseTakenName();
      this.socketPath = await this.runner.socketPath();
      const stale = await this.endStale();
      await this.heartbeat();
      const { Worker, WaitingError } = await import("bullmq");
      this.requeue = async (job, token) => {
        await job.moveToWait(token);
        throw new WaitingError();
      };
      this.workerConnection = await redisConnection(this.o.redis);
      this.worker = new Worker(QUEUE, (job, token) => this.process(job, token), {
        connection: this.workerConnection,
        concurrency: this.o.maxParallel,
        lockDuration: this.o.takeoverS * 1000,
        stalledInterval: Math.max(500, (this.o.takeoverS * 1000) / 2),
        // A task whose workers keep dying fails as lost rather than killing workers for ever.
        maxStalledCount: 3,
        autorun: true,
      });
      this.worker.on("error", (error) =>
        this.o.log.warn({ err: error.message }, "Redis connection error; retrying"),
      );
      // The lock of a job lapsed (this process was paused, or cut off from Redis, past
      // --takeover-s): another worker runs the task now, so this attempt ends here.
      this.worker.on("lockRenewalFailed", (jobIds) => {
        for (const id of jobIds) this.lose(id);
      });
      this.timers.push(setInterval(() => void this.heartbeat(), HEARTBEAT_MS));
      this.timers.push(setInterval(() => void this.pollCancels(), CANCEL_POLL_MS));
      return { socketPath: this.socketPath, stale };
    } catch (error) {
      // Nothing of another worker's is touched (its announcement stays); only what this one opened goes.
      this.redis?.disconnect();
      await this.lock?.release();
      throw error;
    }
  }

  /**
   * Stops taking jobs. `force` false: the running tasks end and report as usual first. `force`
   * true: ends their agents as a cancel would and puts their jobs back in the queue, for another
   * worker to run those tasks from their bases. Either way the last steps are bounded: a worker
   * must stop even when Redis is what has gone.
   */
  async stop(force: boolean): Promise<void> {
    for (const t of this.timers) clearInterval(t);
    this.timers = [];
    if (!force) {
      await this.worker?.pause(true).catch(() => {});
      await this.idle();
    } else {
      for (const a of this.active.values()) {
        a.leaving = true;
        a.cancel.abort();
      }
      await boundedWait(this.idle(), FORCED_STOP_MS);
    }
    this.closing ??= this.close();
    await this.closing;
  }

  /** Once no task runs: BullMQ's worker closed (forced: its jobs are done with), the announcement withdrawn. */
  private async close(): Promise<void> {
    if (this.worker) await boundedWait(this.worker.close(true), 2000).catch(() => {});
    if (this.redis)
      await boundedWait(
        this.redis.del(workerKey(this.name)).catch(() => 0),
        2000,
      );
    this.redis?.disconnect();
    this.workerConnection?.disconnect();
    await this.runner.closeIfIdle().catch(() => {});
    await this.lock?.release();
  }

  /** Whether this worker still holds an active job: its lock renewed in Redis now. */
  private async holds(a: Active, token: string | undefined): Promise<boolean> {
    if (a.lost || token === undefined) return false;
    const renewed = await a.job.extendLock(token, this.o.takeoverS * 1000).catch(() => 0);
    if (renewed !== 1) this.lose(a.job.id!);
    return !a.lost;
  }

  /** A job whose lock this worker lost: its attempt ends, and nothing of it is published. */
  private lose(jobId: string): void {
    const a = this.active.get(jobId);
    if (!a || a.lost) return;
    a.lost = true;
    this.o.log.warn({ job: jobId, run: a.runId, task: a.taskId }, LOST_JOB);
    a.cancel.abort();
  }

  /** Resolves once no task runs here. */
  private idle(): Promise<void> {
    if (this.active.size === 0) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  get running(): number {
    return this.active.size;
  }

  private async process(job: Job, token: string | undefined): Promise<TaskJobResult> {
    const parsed = TaskJob.safeParse(job.data);
    if (!parsed.success)
      throw new Error(`not a termorch task job: ${parsed.error.issues[0]?.message ?? "invalid"}`);
    const data = parsed.data;
    const a: Active = {
      job,
      runId: data.run_id,
      taskId: data.task_id,
      cancel: new AbortController(),
      leaving: false,
      lost: false,
      attempt: 0,
    };
    this.active.set(job.id!, a);
    this.o.log.info(
      { job: job.id, run: data.run_id, task: data.task_id, delivery: job.attemptsStarted },
      "took a task",
    );
    try {
      const place: WorkerPlace = {
        name: this.name,
        host: this.host,
        workdir: this.workdir,
        runner: this.runner,
        socketPath: this.socketPath,
        env: this.o.env,
        log: this.o.log,
        unreachable: this.unreachable,
        ...(this.o.remote ? { remote: this.o.remote } : {}),
      };
      const holds = (): Promise<boolean> => this.holds(a, token);
      const result = await runTaskJob(data, place, {
        delivery: job.attemptsStarted,
        holds,
        cancel: a.cancel.signal,
        onProgress: (p) => {
          a.attempt = p.attempt;
          job
            .updateProgress(p)
            .catch((error: unknown) =>
              this.o.log.warn({ job: job.id, err: String(error) }, "could not report progress"),
            );
        },
        onLog: (chunk) => {
          job
            .log(JSON.stringify(chunk))
            .catch((error: unknown) =>
              this.o.log.debug({ job: job.id, err: String(error) }, "could not stream a log piece"),
            );
        },
      });
      // Its agent was ended because this worker stops: the job goes back to the queue, for
      // another worker to run the task from its base.
      if (a.leaving && !a.lost) return await this.requeue(job, token);
      // The files go under a key of their own (see BullmqHosts.withFiles), kept a day at most,
      // written only while this worker holds the job (one script: the lock checked and the key set).
      const key = filesKey(job.id!);
      const written =
        !a.lost &&
        token !== undefined &&
        (await this.redis!.eval(
          SET_IF_LOCKED,
          2,
          `${this.worker!.toKey(job.id!)}:lock`,
          key,
          token,
          JSON.stringify(result.files),
          String(24 * 3600),
        )) === 1;
      if (!written) {
        this.lose(job.id!);
        throw new Error(LOST_JOB);
      }
      this.o.log.info({ job: job.id, state: result.state, reason: result.reason }, "task done");
      return { ...result, files: [], files_key: key };
    } finally {
      this.active.delete(job.id!);
      if (this.active.size === 0) for (const resolve of this.idleWaiters.splice(0)) resolve();
    }
  }

  /**
   * A worker name another live worker announces is refused: its sessions are not ours to end.
   * On this host a dead process's announcement is an earlier life of this worker (it comes
   * back); on another host, one seen within the announcement's lifetime is live.
   */
  private async refuseTakenName(): Promise<void> {
    const raw = await this.redis!.get(workerKey(this.name));
    const other = raw === null ? null : WorkerInfo.safeParse(jsonOrNull(raw));
    if (!other?.success) return;
    const o = other.data;
    const live =
      o.host === this.host
        ? o.pid !== process.pid && pidAlive(o.pid)
        : Date.now() - o.seen_at < HEARTBEAT_MS * 3;
    if (live)
      throw new LockedError(
        `worker name ${this.name} is in use by pid ${o.pid} on ${o.host} (seen ${Math.round((Date.now() - o.seen_at) / 1000)} s ago); give this worker another --name`,
      );
  }

  /**
   * Ends what an earlier life of this worker left: its tmux sessions (their jobs were taken over
   * by another worker once its lock lapsed), task folders and worktrees. Answers how many sessions.
   */
  private async endStale(): Promise<number> {
    const open = await this.runner.openSessions();
    // On its own tmux server every session is this worker's; on a socket the config names, which
    // others may use too, only those of the jobs its earlier life left a folder for.
    const ours = this.sharedSocket ? await this.earlierJobSessions() : open;
    const sessions = [...open].filter((s) => ours.has(s));
    if (sessions.length > 0) {
      await this.runner.close(sessions);
      this.o.log.warn({ sessions }, "ended the sessions an earlier life of this worker left");
    }
    rmSync(join(this.workdir, "jobs"), { recursive: true, force: true });
    rmSync(join(this.workdir, "worktrees"), { recursive: true, force: true });
    for (const repo of await readdir(join(this.workdir, "repos")).catch(() => [] as string[]))
      await pruneWorktrees(join(this.workdir, "repos", repo));
    return sessions.length;
  }

  /** The sessions of the jobs whose folders (`jobs/<run>.<task>`) an earlier life of this worker left. */
  private async earlierJobSessions(): Promise<Set<string>> {
    const folders = await readdir(join(this.workdir, "jobs")).catch(() => [] as string[]);
    return new Set(
      folders.flatMap((f) => {
        const [run, task, ...rest] = f.split(".");
        return run && task && rest.length === 0 ? [sessionName(run, task)] : [];
      }),
    );
  }

  private async heartbeat(): Promise<void> {
    const now = Date.now();
    const info: WorkerInfo = {
      name: this.name,
      host: this.host,
      pid: process.pid,
      socket: this.socketPath,
      max_parallel: this.o.maxParallel,
      started_at: this.startedAt,
      seen_at: now,
      running: [...this.active.values()].map((a) => ({
        run_id: a.runId,
        task_id: a.taskId,
        attempt: a.attempt,
        session: sessionName(a.runId, a.taskId),
      })),
    };
    await writeJsonAtomic(join(this.workdir, "worker.json"), info).catch(() => {});
    await this.redis
      ?.set(workerKey(this.name), JSON.stringify(info), "PX", HEARTBEAT_MS * 3)
      .catch((error: unknown) => this.o.log.warn({ err: String(error) }, "could not announce this worker"));
  }

  private async pollCancels(): Promise<void> {
    const runs = [...new Set([...this.active.values()].map((a) => a.runId))];
    if (runs.length === 0 || !this.redis) return;
    const flags = await this.redis.mget(...runs.map(cancelKey)).catch(() => null);
    if (!flags) return;
    runs.forEach((run, i) => {
      if (flags[i] === null) return;
      for (const a of this.active.values())
        if (a.runId === run && !a.cancel.signal.aborted) {
          this.o.log.info({ run, task: a.taskId }, "the run was cancelled; ending its task");
          a.cancel.abort();
        }
    });
  }
}
