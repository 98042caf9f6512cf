import { z } from "zod";
import { AgentResult, Usage } from "./agent-result.js";
import { RUN_ID_PATTERN, TASK_ID_PATTERN } from "./assignments.js";
import { AttemptRecord } from "./attempt-record.js";
import { Reason } from "./reason.js";
import { Gate } from "./report.js";

/**
 * The messages of the scale-out backend (docs/SCALING.md): a task job the coordinator puts on
 * the queue, what a worker says while it runs it, and its result. They cross hosts through
 * Redis, so each side parses what it gets against these schemas, as it would a file.
 */

const Sha = z.string().regex(/^[0-9a-f]{40}([0-9a-f]{24})?$/, "must be a full commit id");
const RunId = z.string().regex(RUN_ID_PATTERN);
const TaskId = z.string().regex(TASK_ID_PATTERN);

/** One task for a worker: where its base is, and everything its plan is built from. */
export const TaskJob = z.strictObject({
  version: z.literal(1),
  run_id: RunId,
  task_id: TaskId,
  /**
   * The git remote the base is fetched from and the task branch pushed to (config `git.remote`);
   * a worker's `--remote` replaces it (the same remote, reached another way from that host).
   */
  remote: z.string().min(1),
  /** The ref on the remote holding the task's start commit: the workspace's base merged with its dependencies. */
  base_ref: z.string().regex(/^refs\/termorch\/[A-Za-z0-9_-]+\/base\/[A-Za-z0-9_-]+$/),
  start_commit: Sha,
  /** Where the workspace sits in the repository ("" at its root). */
  prefix: z.string(),
  identity: z.strictObject({ name: z.string().min(1), email: z.string() }),
  /**
   * The assignments file reduced to this one task, dependencies dropped (their work is in the
   * start commit); parsed against the assignments schema by the worker. Environment variables
   * named in `env_vars` take their values from the worker's own environment.
   */
  assignments: z.unknown(),
  /** The coordinator's config (agents, redaction, defaults), parsed against the config schema by the worker. */
  config: z.unknown(),
  /** The task's whole prompt (its context file and what its dependencies did), base64. */
  prompt: z.string(),
  verify: z.boolean(),
  /** Bytes of logs and artifacts the result may carry back (the rest is cut, and says so). */
  result_max_bytes: z.number().int().positive(),
});
export type TaskJob = z.infer<typeof TaskJob>;

/** What a worker reports while it runs a job: the task's state and its current attempt. */
export const TaskJobProgress = z.strictObject({
  worker: z.string(),
  host: z.string(),
  socket: z.string(),
  /** BullMQ's count of deliveries of the job: a worker that died mid-task leaves the next delivery to another. */
  delivery: z.number().int().min(0),
  /** The worker's own count of attempts in this delivery of the job (a re-delivery starts again at 1). */
  attempt: z.number().int().min(0),
  /** Which of the task's agents runs that attempt (0: its own, then its escalation list). */
  agent_index: z.number().int().min(0).default(0),
  state: z.enum(["pending", "running", "success", "failed", "skipped"]),
  waiting_since: z.number().nullable(),
  waiting_for: z.string().nullable().default(null),
  /** The current attempt's logs in the worker's task folder (what LogChunk.log names). */
  logs: z.strictObject({ stdout: z.string(), stderr: z.string() }).nullable(),
});
export type TaskJobProgress = z.infer<typeof TaskJobProgress>;

/**
 * A piece of a running attempt's log, streamed while the task runs (a BullMQ job log row):
 * the bytes of `log` from `offset`. The result carries the whole log again at the end.
 */
export const LogChunk = z.strictObject({
  log: z.string(),
  offset: z.number().int().min(0),
  /** base64 */
  data: z.string(),
});
export type LogChunk = z.infer<typeof LogChunk>;

/** A file of the worker's task folder, carried back: `logs/...` or `artifacts/<task>/...`. */
export const ResultFile = z.strictObject({
  path: z
    .string()
    .regex(/^(logs|artifacts)\/[^\0]+$/)
    .refine(
      (p) => !p.split("/").some((s) => s === ".." || s === "." || s === ""),
      "must be a plain relative path",
    ),
  /** base64 */
  data: z.string(),
  /** Bytes cut from the file's start to keep the result within its cap. */
  cut: z.number().int().min(0),
});
export type ResultFile = z.infer<typeof ResultFile>;

/** How the task ended on the worker: its TaskRun's outcome, and its logs and artifacts. */
export const TaskJobResult = z.strictObject({
  worker: z.string(),
  host: z.string(),
  /** The worker's tmux socket the task's attempts ran on (its path on that host). */
  socket: z.string().default(""),
  state: z.enum(["success", "failed", "skipped"]),
  reason: Reason.nullable(),
  detail: z.string().nullable(),
  exit_code: z.number().int().nullable(),
  attempts: z.number().int().min(0),
  /** Which of the task's agents ran its last attempt (0: its own, then its escalation list). */
  agent_index: z.number().int().min(0).default(0),
  /** Its attempts on the worker, each with its agent, start, feedback section and decision (the report's attempt_history). */
  history: z.array(AttemptRecord).default([]),
  /** The task branch's tip as pushed to the remote; null when nothing was pushed (it failed before a commit). */
  commit: Sha.nullable(),
  /** The attempt's own ref on the remote that holds `commit` (`refs/termorch/<run>/attempts/<task>/<delivery>`). */
  ref: z.string().nullable().default(null),
  gates: z.array(Gate),
  agent_result: AgentResult.nullable(),
  usage: Usage.nullable(),
  /** The last attempt's logs among `files` (earlier attempts' logs are there too). */
  logs: z.strictObject({ stdout: z.string(), stderr: z.string() }).nullable(),
  files: z.array(ResultFile),
  /** Where `files` wait instead (a Redis key), when they travel apart from the result; null: in `files`. */
  files_key: z.string().nullable().default(null),
});
export type TaskJobResult = z.infer<typeof TaskJobResult>;

/** The result of a job whose task never got to run its pipeline (nothing to carry back). */
export function emptyResult(
  o: Pick<TaskJobResult, "worker" | "host" | "state" | "reason" | "detail"> & {
    attempts?: number;
    socket?: string;
  },
): TaskJobResult {
  return {
    socket: "",
    ...o,
    exit_code: null,
    attempts: o.attempts ?? 0,
    agent_index: 0,
    history: [],
    commit: null,
    ref: null,
    gates: [],
    agent_result: null,
    usage: null,
    logs: null,
    files: [],
    files_key: null,
  };
}

/** A worker's announcement in Redis (`termorch status --redis`). */
export const WorkerInfo = z.strictObject({
  name: z.string(),
  host: z.string(),
  pid: z.number().int(),
  socket: z.string(),
  max_parallel: z.number().int().positive(),
  started_at: z.number(),
  seen_at: z.number(),
  /** What it runs now. */
  running: z.array(
    z.strictObject({
      run_id: z.string(),
      task_id: z.string(),
      attempt: z.number().int(),
      session: z.string(),
    }),
  ),
});
export type WorkerInfo = z.infer<typeof WorkerInfo>;
