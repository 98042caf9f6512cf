import { availableParallelism } from "node:os";
import { join, resolve as resolvePath } from "node:path";
import type { Command } from "commander";
import type { Logger } from "pino";
import type { WorkerInfo } from "../contract/task-job.js";
import { daemonLogger } from "../daemon/log.js";
import { ExitCode, InputError } from "../errors.js";
import { loadConfig } from "../input/config-file.js";
import type { BackendChoice, BackendKind } from "../run/backend.js";
import type { TaskHosts } from "../runner/task-hosts.js";
import type { Io } from "./io.js";
import { environmentRedactor } from "./own-redactor.js";
import { positiveInt } from "./positive-int.js";

/** The scale-out flags of `run`, `resume` and `daemon`. */
export interface BackendFlags {
  backend?: BackendKind;
  redis?: string;
}

/**
 * What the command line chose, with a connector that opens the BullMQ queue only when a run
 * needs it; `close` lets go of what it opened.
 */
export function backendChoice(
  o: BackendFlags,
  io: Pick<Io, "env">,
  log: () => Logger,
): { choice: BackendChoice; close: () => Promise<void> } {
  let opened: TaskHosts | null = null;
  const redis = o.redis ?? io.env.TERMORCH_REDIS_URL;
  return {
    choice: {
      ...(o.backend ? { kind: o.backend } : {}),
      ...(redis ? { redis } : {}),
      connect: async (url) => {
        opened ??= await (await import("../scale/bullmq-hosts.js")).BullmqHosts.connect(url, log());
        return opened;
      },
    },
    close: async () => {
      await opened?.close();
    },
  };
}

/** `termorch worker`. */
export function registerScaleCommands(program: Command, io: Io, setCode: (code: number) => void): void {
  program
    .command("worker")
    .description(
      "take task jobs of scale-out runs (backend bullmq) from Redis and run them in this host's tmux",
    )
    .option("--redis <url>", "Redis URL (default: $TERMORCH_REDIS_URL)")
    .option("--max-parallel <n>", "tasks running at once on this host (default: CPU count)", positiveInt)
    .option(
      "--workdir <dir>",
      "the worker's folder: repositories, task folders, worktrees, logs",
      "termorch-worker",
    )
    .option("--name <name>", "the worker's name in status and the report (default: the host name)")
    .option(
      "--remote <url>",
      "the git remote as this host reaches it (default: the coordinator's git.remote)",
    )
    .option(
      "--takeover-s <n>",
      "seconds after which another worker takes over the task of a worker that died",
      positiveInt,
      30,
    )
    .option("--config <file>", "config file: its tmux.socket names this worker's tmux server")
    .option("--host-label <label>", "what reports and status call this host (default: its host name)")
    .option("--debug", "verbose logs")
    .action(async (o: WorkerFlags) => setCode(await workerCommand(o, io)));
}

interface WorkerFlags {
  redis?: string;
  maxParallel?: number;
  workdir: string;
  name?: string;
  remote?: string;
  takeoverS: number;
  config?: string;
  hostLabel?: string;
  debug?: boolean;
}

function redisOf(o: { redis?: string }, io: Pick<Io, "env">): string {
  const url = o.redis ?? io.env.TERMORCH_REDIS_URL;
  if (!url) throw new InputError([{ message: "no Redis given: pass --redis URL or set TERMORCH_REDIS_URL" }]);
  return url;
}

async function workerCommand(o: WorkerFlags, io: Io): Promise<number> {
  const redis = redisOf(o, io);
  const workdir = resolvePath(io.cwd, o.workdir);
  // The config's tmux.socket, or $TERMORCH_TMUX_SOCKET, as for a run; else the worker's own.
  const { config } = await loadConfig(o.config, io.env, io.cwd);
  const socket = io.env.TERMORCH_TMUX_SOCKET || config.tmux.socket;
  const { log, close } = await daemonLogger({
    logsDir: join(workdir, "logs"),
    redactor: environmentRedactor(io.env),
    tty: io.stderr.isTTY ? io.stderr : null,
    level: o.debug ? "debug" : "info",
  });
  const { TaskWorker } = await import("../scale/worker.js");
  const { shownRedis } = await import("../scale/redis.js");
  const worker = new TaskWorker({
    redis,
    maxParallel: o.maxParallel ?? availableParallelism(),
    workdir,
    ...(o.name ? { name: o.name } : {}),
    ...(o.remote ? { remote: o.remote } : {}),
    takeoverS: o.takeoverS,
    ...(socket ? { socket } : {}),
    ...(o.hostLabel !== undefined ? { hostLabel: o.hostLabel } : {}),
    env: io.env,
    log,
  });
  // The first signal stops taking tasks and lets the running ones finish; a second ends them, and
  // their jobs go back to the queue for other workers.
  let signals = 0;
  let stopAsked = (): void => {};
  let forceAsked = (): void => {};
  const stopping = new Promise<void>((resolve) => {
    stopAsked = resolve;
  });
  const forcing = new Promise<void>((resolve) => {
    forceAsked = resolve;
  });
  const onSignal = (signal: NodeJS.Signals): void => {
    signals++;
    log.info({ signal }, "signal received");
    if (signals > 1) {
      forceAsked();
      return;
    }
    if (worker.running > 0)
      io.stderr.write(
        `termorch worker: ${signal}: finishing ${worker.running} running task(s); send it again to end them and leave their tasks to other workers\n`,
      );
    stopAsked();
  };
  process.on("SIGINT", onSignal);
  process.on("SIGTERM", onSignal);
  try {
    const started = await worker.start();
    io.stderr.write(
      `termorch worker ${worker.name}: taking tasks from ${shownRedis(redis)} (up to ${o.maxParallel ?? availableParallelism()} at once; tmux socket ${started.socketPath}; folder ${workdir})\n`,
    );
    if (started.stale > 0)
      io.stderr.write(
        `termorch worker: ended ${started.stale} session(s) an earlier life of this worker left\n`,
      );
    await stopping;
    let forced = false;
    await Promise.race([
      worker.stop(false),
      forcing.then(() => {
        forced = true;
        return worker.stop(true);
      }),
    ]);
    return forced ? ExitCode.interrupted : ExitCode.ok;
  } finally {
    process.off("SIGINT", onSignal);
    process.off("SIGTERM", onSignal);
    await close();
  }
}

/** The workers announced on a Redis, and what each runs (`termorch status --redis`). */
export async function listWorkers(url: string): Promise<WorkerInfo[]> {
  const { requireRedis, redisConnection, announcedWorkers } = await import("../scale/redis.js");
  await requireRedis(url, "--redis");
  const redis = await redisConnection(url);
  try {
    return await announcedWorkers(redis);
  } finally {
    redis.disconnect();
  }
}
