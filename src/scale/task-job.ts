import { createHash } from "node:crypto";
import { mkdirSync, rmSync, writeFileSync } from "node:fs";
import { readdir, stat } from "node:fs/promises";
import { join } from "node:path";
import type { Logger } from "pino";
import { taskAgents } from "../agent/command.js";
import { Assignments } from "../contract/assignments.js";
import { Config } from "../contract/config.js";
import { reviewAsked } from "../contract/review.js";
import {
  emptyResult,
  type LogChunk,
  type ResultFile,
  type TaskJob,
  type TaskJobProgress,
  type TaskJobResult,
} from "../contract/task-job.js";
import { errorText } from "../errors.js";
import { readRange } from "../fs/file-range.js";
import { LogNames } from "../fs/log-names.js";
import { sessionName, taskBranch } from "../fs/names.js";
import { TaskJournal } from "../fs/run-state-file.js";
import { StatusFiles } from "../fs/status-files.js";
import {
  attemptRefOf,
  dropRef,
  dropWorkerTask,
  ensureBareRepo,
  fetchRef,
  pushAttempt,
  shownRemote,
} from "../git/remote.js";
import { serialized } from "../git/worktree.js";
import { WorktreePool } from "../git/worktree-pool.js";
import { checkAgentBinaries } from "../input/agent-binaries.js";
import { allDefined, type RunInput } from "../input/assignments-file.js";
import { checkSandboxes } from "../input/sandbox-check.js";
import { Ledger } from "../ledger/ledger.js";
import { Notifier } from "../notify/notifier.js";
import type { TaskRunner } from "../runner/task-runner.js";
import { executeTask } from "../task/execute.js";
import { gitWorkspace } from "../task/git-workspace.js";
import type { Ports } from "../task/ports.js";
import { TaskRecorder } from "../task/recorder.js";
import { planRun, type RunPlan } from "../task/run-plan.js";
import { runRedaction } from "../task/run-redaction.js";
import { RunStop } from "../task/stop.js";
import { newTaskRun, type TaskRun } from "../task/task-run.js";

/** A worker host, as the jobs it runs see it. */
export interface WorkerPlace {
  /** The worker's name (`--name`) and its machine's host name. */
  name: string;
  host: string;
  /** The worker's own folder: its copies of the remote, task folders and worktrees. */
  workdir: string;
  /** The worker's local tmux runner: attempts run there exactly as in a local run. */
  runner: TaskRunner;
  socketPath: string;
  env: Readonly<Record<string, string | undefined>>;
  log: Logger;
  /** `--remote`: this host reaches the git remote by another path or URL. */
  remote?: string;
  /** The remotes this worker could not fetch from last time (each said once in its log). */
  unreachable: Set<string>;
}

/** What a worker says of a job whose lock it lost: another worker runs the task now. */
export const LOST_JOB =
  "this worker lost the task's job (its lock lapsed: paused or cut off from Redis) and another took it over; nothing of this attempt was published";

/** One delivery of a job to this worker. */
export interface JobDelivery {
  /** BullMQ's count of deliveries of this job (a re-delivery after a worker died is the next one). */
  delivery: number;
  /**
   * Whether this worker still holds the job (its lock in Redis, renewed now): asked right before
   * anything is published. A worker that lost it publishes nothing (docs/SCALING.md, Fencing).
   */
  holds: () => Promise<boolean>;
  /** The run was cancelled (or stopped by --fail-fast) on its coordinator, or the worker is made to stop: the task ends as it would locally. */
  cancel: AbortSignal;
  onProgress: (progress: TaskJobProgress) => void;
  /** A piece of the running attempt's log, for the coordinator's copy. */
  onLog: (chunk: LogChunk) => void;
}

/** The most of each log streamed per second while a task runs (the rest follows, or comes with the result). */
const STREAM_CHUNK_BYTES = 64 * 1024;

/**
 * Runs a task job on this host: the task's base fetched from the git remote into the worker's
 * own repository, then the local pipeline of the task (executeTask: worktree from the warm pool,
 * set-up, attempts in tmux through the local runner, the secrets gate, the commit, the task's
 * gates, artifacts, retries), then its branch pushed back. Answers the result the coordinator
 * writes into its run directory; never throws for the task's own failure.
 */
export async function runTaskJob(job: TaskJob, w: WorkerPlace, d: JobDelivery): Promise<TaskJobResult> {
  const remote = w.remote ?? job.remote;
  const { run_id: runId, task_id: taskId } = job;
  const jobDir = join(w.workdir, "jobs", `${runId}.${taskId}`);
  const worktreesDir = join(w.workdir, "worktrees", runId);
  const repo = join(w.workdir, "repos", createHash("sha256").update(remote).digest("hex").slice(0, 16));
  const session = sessionName(runId, taskId);
  const failed = (detail: string): TaskJobResult =>
    emptyResult({ worker: w.name, host: w.host, state: "failed", reason: "launch_error", detail });

  // What an earlier delivery of this job left on this host (its worker died): never reused.
  await w.runner.close([session]);
  rmSync(jobDir, { recursive: true, force: true });
  mkdirSync(jobDir, { recursive: true, mode: 0o700 });
  try {
    await serialized(repo, () => ensureBareRepo(repo));
    await dropWorkerTask(repo, join(worktreesDir, taskId), taskBranch(runId, taskId));
    const base = await fetchRef(repo, remote, job.base_ref);
    if (base !== job.start_commit)
      return failed(
        `the git remote's ${job.base_ref} is at ${base}, not at the task's start ${job.start_commit}`,
      );
  } catch (error) {
    const said = errorText(error);
    // Said once in the worker's log while the remote stays out of reach (every task's detail says it too).
    if (!w.unreachable.has(remote)) {
      w.unreachable.add(remote);
      w.log.error({ remote: shownRemote(remote), err: said }, "cannot reach the git remote of its jobs");
    }
    return failed(`on worker ${w.name}, could not fetch its base: ${said}`);
  }
  w.unreachable.delete(remote);

  const config = Config.safeParse(job.config);
  const assignments = Assignments.safeParse(job.assignments);
  if (!config.success || !assignments.success)
    return failed(
      `the job's ${config.success ? "assignments" : "config"} do not parse here (is this worker's termorch older than the coordinator's?)`,
    );
  const task = assignments.data.tasks.find((t) => t.id === taskId);
  // The same agents, in the same order, as the coordinator resolved: from the job's task and config.
  const named = task
    ? taskAgents(
        {
          ...task,
          review: reviewAsked(
            task.success_criteria?.review,
            assignments.data.success_criteria.review,
            config.data.defaults.review,
          )?.agent,
        },
        config.data,
      )
    : [];
  const agents = allDefined(named);
  if (!task || !agents)
    return failed(
      `its agent "${named.find((a) => !a.agent)?.name ?? task?.agent ?? "?"}" is not defined in the job's config`,
    );
  const contextPath = join(jobDir, "context.md");
  writeFileSync(contextPath, Buffer.from(job.prompt, "base64"), { mode: 0o600 });
  const input: RunInput = {
    file: join(jobDir, "assignments.json"),
    sha256: "",
    configFile: null,
    runId,
    assignments: assignments.data,
    workspace: jobDir,
    tasks: [{ task, agents, contextPath, conflictFile: null }],
    // Notifications are the coordinator's, and so is the review of the run's integration.
    config: { ...config.data, notify: undefined },
    mergeReviewer: null,
  };
  try {
    checkAgentBinaries(input, w.env);
    checkSandboxes(input, w.env);
  } catch (error) {
    return failed(`on worker ${w.name}: ${errorText(error)}`);
  }

  const stop = new RunStop();
  let sent = "";
  const progress = (t: Readonly<TaskRun>): void => {
    const now: TaskJobProgress = {
      worker: w.name,
      host: w.host,
      socket: w.socketPath,
      delivery: d.delivery,
      attempt: t.attempts,
      agent_index: t.current.agentIndex,
      state: t.state,
      waiting_since: t.waiting.since,
      waiting_for: t.waiting.for,
      logs: t.result.logs,
    };
    const key = JSON.stringify(now);
    if (key !== sent) {
      sent = key;
      d.onProgress(now);
    }
  };
  const { run, ports, recorder } = await openJob(input, job, w, { repo, jobDir, worktreesDir }, (r) =>
    progress(r.get(taskId)),
  );
  const t = recorder.get(taskId);
  if (d.cancel.aborted) stop.request("cancel");
  else d.cancel.addEventListener("abort", () => stop.request("cancel"), { once: true });

  const streaming = streamLogs(jobDir, t, d.onLog);
  // Never "detached": nothing here asks the pipeline to detach.
  await executeTask(run, ports, stop, recorder, taskId).finally(() => streaming.stop());
  await ports.pool?.settled();
  let commit = t.git.commit;
  let ended: Pick<TaskJobResult, "state" | "reason" | "detail"> = {
    state: t.state === "success" ? "success" : t.state === "skipped" ? "skipped" : "failed",
    reason: t.reason,
    detail: t.detail,
  };
  let ref: string | null = null;
  if (commit !== null && !(await d.holds())) {
    // Another worker runs the task now (this one was paused, or cut off, past its lock): its work
    // is not published, whatever it is.
    ended = { state: "failed", reason: "lost", detail: LOST_JOB };
    commit = null;
  } else if (commit !== null) {
    try {
      ref = attemptRefOf(runId, taskId, d.delivery);
      await pushAttempt(repo, remote, t.git.branch!, ref);
    } catch (error) {
      ref = null;
      if (t.state === "success")
        ended = {
          state: "failed",
          reason: "lost",
          detail: `its work could not be pushed: ${ports.redactor.redact(errorText(error))}`,
        };
      commit = null;
    }
  }
  const files = await resultFiles(jobDir, taskId, t, job.result_max_bytes);
  await w.runner.close([session]);
  // The worktree went to the warm pool on success; else it goes now, with the branch (the remote
  // has it, when it was pushed).
  await dropWorkerTask(repo, join(worktreesDir, taskId), t.git.branch ?? taskBranch(runId, taskId));
  await dropRef(repo, job.base_ref);
  rmSync(jobDir, { recursive: true, force: true });
  return {
    worker: w.name,
    host: w.host,
    socket: w.socketPath,
    ...ended,
    // Only the task's own end (blocked) asks for a person, not a lost job's.
    needs_human: ended.reason === "blocked" && t.needsHuman,
    exit_code: t.result.exitCode,
    attempts: t.attempts,
    agent_index: t.current.agentIndex,
    history: t.history,
    commit,
    ref,
    gates: t.result.gates,
    agent_result: t.result.agentResult,
    usage: t.result.usage,
    logs: t.result.logs,
    files,
    files_key: null,
  };
}

/**
 * What one job runs through: the local pipeline's plan, ports and recorder, over the worker's
 * folders and its repository. The coordinator keeps the run's ledger, journal and notifications;
 * the job's own stay in its folder, which goes when the job is done.
 */
async function openJob(
  input: RunInput,
  job: TaskJob,
  w: WorkerPlace,
  at: { repo: string; jobDir: string; worktreesDir: string },
  changed: (recorder: TaskRecorder) => void,
): Promise<{ run: RunPlan; ports: Ports; recorder: TaskRecorder }> {
  const { runId } = input;
  const runDir = at.jobDir;
  const { redactor, secretFinder } = runRedaction(input, w.env);
  const run = planRun({
    input,
    git: { root: at.repo, baseCommit: job.start_commit, targetRef: null, prefix: job.prefix },
    runId,
    runDir,
    baseDir: runDir,
    cwd: runDir,
    settings: {
      max_parallel: 1,
      schedule: "eager",
      fail_fast: false,
      verify: job.verify,
      sessions: "default",
      keep_branches: false,
      allow_dirty: false,
      backend: "local",
      on_conflict: "halt",
      redo_attempts: 1,
      on_gate_failure: "halt",
      gate_fix_attempts: 1,
      // The run's budget is the coordinator's: it starts no task the budget cannot pay for.
      budget: null,
      on_budget: input.assignments.environment.resource_limits.on_budget ?? "stop",
    },
    identity: job.identity,
    env: w.env,
    redactSources: redactor.sources,
    startedAt: Date.now(),
    fault: null,
    resumed: false,
    worktreesDir: at.worktreesDir,
  });
  mkdirSync(run.privateDir, { recursive: true, mode: 0o700 });
  for (const d of ["logs", "status", "artifacts"]) mkdirSync(join(runDir, d), { recursive: true });
  mkdirSync(at.worktreesDir, { recursive: true, mode: 0o700 });
  const ledger = await Ledger.open(join(runDir, "events.jsonl"), redactor);
  const ports: Ports = {
    runner: w.runner,
    workspace: gitWorkspace,
    pool: new WorktreePool(
      at.repo,
      {
        maxWorktrees: input.config.git.pool.max_worktrees,
        maxBytes: input.config.git.pool.max_disk_mb * 1024 * 1024,
      },
      { run_id: runId, run_dir: runDir },
    ),
    now: Date.now,
    log: w.log.child({ run: runId, task: job.task_id }),
    redactor,
    secretFinder,
    ledger,
    logNames: new LogNames(join(runDir, "logs")),
    // Notifications are the coordinator's.
    notifier: new Notifier({
      config: undefined,
      runId,
      runDir,
      redactor,
      now: Date.now,
      deliver: async () => null,
      onFailure: () => {},
    }),
  };
  const [only] = input.tasks;
  const recorder: TaskRecorder = new TaskRecorder(
    {
      runId,
      interactive: (id) => Boolean(run.plans.get(id)?.agents[0].interactive),
      ledger,
      journal: new TaskJournal(join(run.privateDir, "tasks.jsonl")),
      status: new StatusFiles(join(runDir, "status")),
      redactor,
      // The coordinator tells of failures and waits, from the progress it hears.
      listeners: { taskFailed: () => {}, taskWaitingInput: () => {}, changed: () => changed(recorder) },
      now: Date.now,
      socket: w.runner.socket,
    },
    [newTaskRun(only!.task.id, only!.task.agent, [], run.plans.get(only!.task.id)!.agents[0].argv)],
  );
  recorder.placeSessions(w.socketPath);
  return { run, ports, recorder };
}

/**
 * The task folder's logs and artifacts, within `max` bytes: the last attempt's logs first (a
 * log over what is left keeps its end), then earlier logs, then artifacts (one that does not fit
 * whole is left out: half a patch is no patch, and NOT-SENT.txt names it).
 */
async function resultFiles(
  jobDir: string,
  taskId: string,
  t: Readonly<TaskRun>,
  max: number,
): Promise<ResultFile[]> {
  const logs = (await readdir(join(jobDir, "logs")).catch(() => [] as string[])).map((n) => `logs/${n}`);
  const last = t.result.logs ? [t.result.logs.stdout, t.result.logs.stderr] : [];
  const artifacts = (await walk(join(jobDir, "artifacts", taskId))).map((r) => `artifacts/${taskId}/${r}`);
  const ordered = [...last.filter((l) => logs.includes(l)), ...logs.filter((l) => !last.includes(l)).sort()];
  let left = max;
  const out: ResultFile[] = [];
  for (const rel of ordered) {
    const size = (await stat(join(jobDir, rel))).size;
    const keep = Math.min(size, left);
    out.push({
      path: rel,
      data: (await readRange(join(jobDir, rel), null, keep)).toString("base64"),
      cut: size - keep,
    });
    left -= keep;
  }
  const notSent: string[] = [];
  for (const rel of artifacts) {
    const size = (await stat(join(jobDir, rel))).size;
    if (size > left) {
      notSent.push(`${rel} (${size} bytes)`);
      continue;
    }
    out.push({ path: rel, data: (await readRange(join(jobDir, rel), 0, size)).toString("base64"), cut: 0 });
    left -= size;
  }
  if (notSent.length > 0)
    out.push({
      path: `artifacts/${taskId}/NOT-SENT.txt`,
      data: Buffer.from(
        `These artifacts were left on worker ${t.hosts.at(-1)?.worker ?? "its worker"}: the task's result is capped at ${max} bytes.\n${notSent.join("\n")}\n`,
      ).toString("base64"),
      cut: 0,
    });
  return out;
}

/**
 * Sends what the running attempt adds to its logs, once a second, at most STREAM_CHUNK_BYTES a
 * log each time. stop() sends nothing more (the result carries the logs whole).
 */
function streamLogs(
  jobDir: string,
  t: Readonly<TaskRun>,
  send: (chunk: LogChunk) => void,
): { stop: () => Promise<void> } {
  const sent = new Map<string, number>();
  const pass = async (): Promise<void> => {
    if (t.state !== "running" || !t.result.logs) return;
    for (const log of [t.result.logs.stdout, t.result.logs.stderr]) {
      const size = (await stat(join(jobDir, log)).catch(() => null))?.size ?? 0;
      const offset = sent.get(log) ?? 0;
      if (size <= offset) continue;
      const data = await readRange(join(jobDir, log), offset, Math.min(size - offset, STREAM_CHUNK_BYTES));
      sent.set(log, offset + data.length);
      send({ log, offset, data: data.toString("base64") });
    }
  };
  let passing = Promise.resolve();
  const timer = setInterval(() => {
    passing = passing.then(pass).catch(() => {});
  }, 1000);
  return {
    stop: async () => {
      clearInterval(timer);
      await passing;
    },
  };
}

/** Regular files under `root`, relative, sorted; links and others are not carried. */
async function walk(root: string, prefix = ""): Promise<string[]> {
  const out: string[] = [];
  for (const e of await readdir(join(root, prefix), { withFileTypes: true }).catch(() => [])) {
    const rel = prefix ? `${prefix}/${e.name}` : e.name;
    if (e.isDirectory()) out.push(...(await walk(root, rel)));
    else if (e.isFile()) out.push(rel);
  }
  return out.sort();
}
