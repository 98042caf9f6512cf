// Simulated workers for `node bench/scale.js --stub N` (docs/SCALING.md): N BullMQ workers in
// this one process, on the queue and with the options `termorch worker` uses (concurrency 1,
// lock = --takeover-s 30 s, stalled check every 15 s, 3 stalls allowed), each announcing itself
// every 5 s and polling its run's cancel key every second while it holds a job, as the real
// worker does. A job is held `--hold-ms` ms (the task "runs"), reported as running through
// BullMQ's progress, its attempt's ref (refs/termorch/<run>/attempts/<task>/<delivery>, as the
// real worker pushes) put on the bare remote at the task's start commit (one `git update-ref`
// there: no fetch, no worktree, no agent, no tmux, no push), and completed with a canned success
// result naming that ref, without logs. What it measures is real: Redis, and the coordinator
// (`termorch run`, unchanged) with N workers and N jobs in flight. What it skips: everything a
// real worker does on its host, and the git transfers (bench/scale.js measures those with real
// workers).
import { execFile } from "node:child_process";
import { hostname } from "node:os";
import { promisify } from "node:util";

const run = promisify(execFile);
const args = {};
for (let i = 2; i < process.argv.length; i += 2)
  args[process.argv[i].replace(/^--/, "")] = process.argv[i + 1];
const url = args.redis;
const n = Number(args.workers);
const holdMs = Number(args["hold-ms"] ?? 5000);
const remote = args.remote;
const tag = args.tag ?? "stub";
const host = hostname();

const { Worker } = await import("bullmq");
const { Redis } = await import("ioredis");
const conn = () => {
  const c = new Redis(url, { maxRetriesPerRequest: null });
  c.on("error", () => {});
  return c;
};
// One connection for the announcements and cancel polls of all simulated workers: the real
// worker has one of its own for them; the count of commands is the same, not the connections.
const side = conn();
const workers = [];
const active = new Map();
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

for (let i = 0; i < n; i++) {
  const name = `${tag}-${i}`;
  const connection = conn();
  const w = new Worker(
    "termorch-tasks",
    async (job) => {
      const d = job.data;
      active.set(name, d.run_id);
      try {
        await job.updateProgress({
          worker: name,
          host,
          socket: "",
          delivery: job.attemptsStarted,
          attempt: 1,
          state: "running",
          waiting_since: null,
          logs: null,
        });
        await sleep(holdMs);
        // src/git/remote.ts attemptRefOf: the coordinator takes the work only from there.
        const ref = `refs/termorch/${d.run_id}/attempts/${d.task_id}/${job.attemptsStarted}`;
        await run("git", ["--git-dir", remote, "update-ref", ref, d.start_commit]);
        return {
          worker: name,
          host,
          state: "success",
          reason: null,
          detail: null,
          exit_code: 0,
          attempts: 1,
          commit: d.start_commit,
          ref,
          gates: [],
          agent_result: null,
          usage: null,
          logs: null,
          files: [],
        };
      } finally {
        active.delete(name);
      }
    },
    { connection, concurrency: 1, lockDuration: 30_000, stalledInterval: 15_000, maxStalledCount: 3 },
  );
  w.on("error", () => {});
  workers.push({ w, connection, name });
}

const timers = [
  setInterval(() => {
    const now = Date.now();
    const p = side.pipeline();
    for (const { name } of workers)
      p.set(
        `termorch:worker:${name}`,
        JSON.stringify({
          name,
          host,
          pid: process.pid,
          socket: "",
          max_parallel: 1,
          started_at: now,
          seen_at: now,
          running: [],
        }),
        "PX",
        15_000,
      );
    p.exec().catch(() => {});
  }, 5000),
  setInterval(() => {
    for (const runId of active.values()) side.mget(`termorch:cancel:${runId}`).catch(() => {});
  }, 1000),
];

const stop = async () => {
  for (const t of timers) clearInterval(t);
  await Promise.allSettled(workers.map(({ w }) => w.close(true)));
  for (const { connection } of workers) connection.disconnect();
  side.disconnect();
  process.exit(0);
};
process.once("SIGTERM", stop);
process.once("SIGINT", stop);
console.error(`stub: ${n} workers up`);
