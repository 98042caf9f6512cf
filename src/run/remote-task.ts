import { existsSync, mkdirSync, rmSync, writeFileSync } from "node:fs";
import { appendFile, writeFile } from "node:fs/promises";
import { dirname, join, posix, relative } from "node:path";
import type { LogChunk, TaskJob, TaskJobProgress, TaskJobResult } from "../contract/task-job.js";
import { errorText } from "../errors.js";
import { sessionName, taskBranch } from "../fs/names.js";
import { baseRefOf, fetchRef, publishCommit, shownRemote } from "../git/remote.js";
import { branchRef, isAncestor } from "../git/repo.js";
import { createTaskBranch, taskStartCommit } from "../git/worktree.js";
import { redactFile, redactNames } from "../redact/redact-file.js";
import type { RemoteBackend } from "../runner/task-hosts.js";
import type { LiveRun, RunContext } from "./context.js";
import { killPoint } from "./faults.js";
import { promptText } from "./prompt.js";
import { fail, type TaskEnd, trailersOf } from "./task-exec.js";
import type { TaskPlan } from "./task-plan.js";
import type { TaskRun } from "./task-run.js";
import { markWaiting, transition } from "./transition.js";

const DETACHED: TaskEnd = { kind: "detached" };

/** Beyond the agents' kill grace, how long a cancelled task's worker has to answer before the run goes on without it. */
const CANCEL_ANSWER_MS = 30_000;

/** Default cap of what one task's result carries back through Redis (logs and artifacts). */
export const RESULT_MAX_BYTES = 16 * 1024 * 1024;

/**
 * Runs one task on another host (backend bullmq): its start commit is computed here exactly as
 * for a local worktree and published to the git remote with its branch created here; a worker
 * runs the task's local pipeline there and pushes the task branch; its result (state, gates,
 * logs, artifacts) is written here as a local task's would be, and its branch fetched, so the
 * merge, the ledger and the report work as in a local run. `resume`: the job of an earlier
 * process is picked up by its id, never run a second time.
 */
export async function executeRemoteTask(
  ctx: LiveRun,
  backend: RemoteBackend,
  taskId: string,
  resume = false,
): Promise<TaskEnd> {
  const t = ctx.tasks.get(taskId)!;
  const p = ctx.plans.get(taskId)!;
  const git = ctx.git!;
  t.startedAt ??= ctx.now();
  t.session = sessionName(ctx.runId, taskId);
  if (ctx.stop.detaching) return DETACHED;

  if (t.startCommit === null) {
    const start = await taskStartCommit({
      repo: git.root,
      base: git.baseCommit,
      deps: p.dependencies.map((d) => ({ task: d, branch: taskBranch(ctx.runId, d) })),
      branch: p.branch!,
      identity: ctx.identity,
      trailers: trailersOf(ctx, taskId),
    }).catch((error: unknown) => ({ ok: false as const, error }));
    if (!start.ok) {
      t.session = null;
      if ("conflict" in start) {
        ctx.depConflicts.push(start.conflict);
        return fail(ctx, t, "conflict", `its dependencies conflict: ${start.conflict.detail}`);
      }
      return fail(
        ctx,
        t,
        "launch_error",
        `could not compute its start commit: ${redacted(ctx, start.error)}`,
      );
    }
    try {
      await createTaskBranch(git.root, p.branch!, start.commit, ctx.resumed, p.worktree!);
      t.branch = p.branch;
      await publishCommit(git.root, backend.remote, start.commit, baseRefOf(ctx.runId, taskId));
    } catch (error) {
      t.session = null;
      return fail(ctx, t, "launch_error", `could not publish its base: ${redacted(ctx, error)}`);
    }
    t.startCommit = start.commit;
    await ctx.ledger.append(
      "task.published",
      {
        branch: t.branch,
        start_commit: t.startCommit,
        remote: shownRemote(backend.remote),
        ref: baseRefOf(ctx.runId, taskId),
      },
      taskId,
    );
    ctx.journal.write(t);
  }
  t.branch ??= p.branch;
  if (ctx.stop.ending && !(resume && t.attempts > 0)) {
    await transition(ctx, t, {
      to: "skipped",
      reason: "cancelled",
      detail: "the run stopped before it started",
    });
    return { kind: "done", ok: false };
  }
  if (!resume || t.attempts === 0) {
    if (existsSync(p.artifactsDir)) rmSync(p.artifactsDir, { recursive: true, force: true });
    mkdirSync(p.artifactsDir, { recursive: true });
  }
  let prompt: Buffer;
  try {
    prompt = await promptText(ctx, p);
    writeFileSync(join(p.artifactsDir, "prompt.md"), ctx.redactor.redactBytes(prompt), { mode: 0o600 });
  } catch (error) {
    return fail(ctx, t, "launch_error", `could not write its prompt: ${redacted(ctx, error)}`);
  }

  const job: TaskJob = {
    version: 1,
    run_id: ctx.runId,
    task_id: taskId,
    remote: backend.remote,
    base_ref: baseRefOf(ctx.runId, taskId),
    start_commit: t.startCommit,
    prefix: git.prefix,
    identity: { name: ctx.identity.name, email: ctx.identity.email },
    assignments: oneTask(ctx, taskId),
    config: ctx.input.config,
    prompt: prompt.toString("base64"),
    verify: ctx.verify,
    result_max_bytes: RESULT_MAX_BYTES,
  };
  // Progress and log pieces are handled one after another, and the result waits for the last of them.
  let progressed = Promise.resolve();
  const later = (work: () => Promise<void>): void => {
    progressed = progressed
      .then(work)
      .catch((error: unknown) =>
        ctx.log.warn({ task: taskId, err: errorText(error) }, "could not record a worker's progress"),
      );
  };
  const copies = new LogCopies(ctx);
  const seen = new Set<string>();
  const onProgress = (pr: TaskJobProgress): void => later(() => recordProgress(ctx, t, p, pr, seen, copies));
  const onLog = (chunk: LogChunk): void => later(() => copies.append(chunk));
  // A detach (the daemon stopping) leaves the job to the workers; a cancel or --fail-fast ends it there.
  // A detach (the daemon stopping) leaves the job to the workers; a cancel or --fail-fast ends it
  // there, and is not waited for past a bound: its worker, or Redis, may never answer.
  const stopWaiting = new AbortController();
  let gaveUp: NodeJS.Timeout | null = null;
  const follow = (): void => {
    if (ctx.stop.detaching) stopWaiting.abort();
    else if (ctx.stop.ending && gaveUp === null) {
      backend.hosts
        .cancel(ctx.runId)
        .catch((error: unknown) =>
          ctx.log.warn({ err: errorText(error) }, "could not tell the workers to cancel"),
        );
      gaveUp = setTimeout(() => stopWaiting.abort(), ctx.killGraceMs + CANCEL_ANSWER_MS);
    }
  };
  const unsubscribe = ctx.stop.onChange(follow);
  follow();
  let result: TaskJobResult | "detached";
  try {
    result = await backend.hosts.run(jobIdOf(ctx, taskId), job, {
      onProgress,
      onLog,
      detach: stopWaiting.signal,
    });
  } finally {
    unsubscribe();
    if (gaveUp) clearTimeout(gaveUp);
  }
  await progressed;
  if (result === "detached" && ctx.stop.detaching) return DETACHED;
  if (result === "detached")
    return fail(
      ctx,
      t,
      "cancelled",
      `the run was cancelled, and its worker did not answer within ${Math.round((ctx.killGraceMs + CANCEL_ANSWER_MS) / 1000)} s (is Redis reachable?); its agent may still run there`,
    );
  await killPoint(ctx.fault, "kill-after-exit", taskId);
  const end = await applyResult(ctx, backend, t, p, result, copies);
  // Its end is in the task journal now: a resume does not need the job, and its result (logs up
  // to the cap) need not sit in Redis's memory.
  await backend.hosts
    .forget(jobIdOf(ctx, taskId))
    .catch((error: unknown) =>
      ctx.log.warn({ task: taskId, err: errorText(error) }, "could not drop the task's job"),
    );
  return end;
}

/** One job per task of a run: the run's start time keeps a re-run under the same run id from finding an old job. */
export function jobIdOf(ctx: Pick<LiveRun, "runId" | "startedAt">, taskId: string): string {
  return `${ctx.runId}.${ctx.startedAt}.${taskId}`;
}

/** The assignments as the worker sees them: this task alone, its dependencies already in its start commit. */
function oneTask(ctx: RunContext, taskId: string): unknown {
  const a = ctx.input.assignments;
  const task = a.tasks.find((x) => x.id === taskId)!;
  return {
    ...a,
    run_id: ctx.runId,
    // The worker's worktree has no checkout of the user's to link or copy from.
    environment: { ...a.environment, workspace_dir: ".", worktree_include: [], worktree_copy: [] },
    tasks: [{ ...task, dependencies: [], context_path: "context.md" }],
    // Run-level checks are the coordinator's, after the merge.
    success_criteria: { required_artifacts: [] },
  };
}

/** A worker started an attempt (or changed its state): the ledger names its host; status and progress follow. */
async function recordProgress(
  ctx: RunContext,
  t: TaskRun,
  p: TaskPlan,
  pr: TaskJobProgress,
  seen: Set<string>,
  copies: LogCopies,
): Promise<void> {
  if (t.state !== "pending" && t.state !== "running") return;
  const key = `${pr.delivery}/${pr.worker}/${pr.attempt}`;
  if (pr.state === "running" && pr.attempt > 0 && !seen.has(key)) {
    seen.add(key);
    t.attempts += 1;
    t.attemptStartedAt = ctx.now();
    t.hosts = [...t.hosts, { attempt: t.attempts, worker: pr.worker, host: pr.host, socket: pr.socket }];
    // Its logs here, under names of this run's, filled as the worker streams them.
    if (pr.logs) t.logs = copies.open(pr.logs, p.agent, ctx.now());
    await ctx.ledger.append(
      "task.launched",
      {
        attempt: t.attempts,
        session: t.session,
        host: pr.host,
        worker: pr.worker,
        socket: pr.socket,
        delivery: pr.delivery,
        logs: t.logs,
      },
      t.id,
    );
    await transition(ctx, t, { to: "running" });
    return;
  }
  if (t.state === "running" && (pr.waiting_since !== t.waitingSince || pr.waiting_for !== t.waitingFor))
    await markWaiting(ctx, t, pr.waiting_since, pr.waiting_for);
}

/**
 * The coordinator's copies of the logs workers stream: a worker's log (by its name there) goes
 * to a log of this run's, appended in order and redacted again. A piece that does not follow on
 * what was written (a gap: pieces Redis dropped) is left out; the result brings the whole log.
 */
class LogCopies {
  /** The worker's log name → this run's (relative to the run directory), and how far it was copied. */
  private readonly logs = new Map<string, { local: string; next: number }>();

  constructor(private readonly ctx: RunContext) {}

  open(
    worker: { stdout: string; stderr: string },
    agent: string,
    now: number,
  ): { stdout: string; stderr: string } {
    const stem = this.ctx.logNames.next(agent, now);
    const local = { stdout: `logs/${stem}.out`, stderr: `logs/${stem}.err` };
    for (const stream of ["stdout", "stderr"] as const) {
      writeFileSync(join(this.ctx.runDir, local[stream]), "", { mode: 0o600 });
      this.logs.set(worker[stream], { local: local[stream], next: 0 });
    }
    return local;
  }

  async append(chunk: LogChunk): Promise<void> {
    const copy = this.logs.get(chunk.log);
    if (!copy) return;
    const data = Buffer.from(chunk.data, "base64");
    if (chunk.offset > copy.next || chunk.offset + data.length <= copy.next) return;
    const fresh = data.subarray(copy.next - chunk.offset);
    copy.next += fresh.length;
    await appendFile(join(this.ctx.runDir, copy.local), this.ctx.redactor.redactBytes(fresh));
  }

  /** Where a worker's log of that name was copied; undefined for one never streamed. */
  localOf(workerLog: string): string | undefined {
    return this.logs.get(workerLog)?.local;
  }
}

async function applyResult(
  ctx: RunContext,
  backend: RemoteBackend,
  t: TaskRun,
  p: TaskPlan,
  r: TaskJobResult,
  copies: LogCopies,
): Promise<TaskEnd> {
  const git = ctx.git!;
  t.attempts = Math.max(t.attempts, r.attempts);
  if (t.hosts.length === 0 && r.attempts > 0)
    t.hosts = [{ attempt: t.attempts, worker: r.worker, host: r.host, socket: "" }];
  t.exitCode = r.exit_code;
  t.gates = r.gates;
  t.agentResult = r.agent_result;
  t.usage = r.usage;
  t.waitingSince = null;
  const renamed = await writeResultFiles(ctx, t, p, r, copies);
  t.logs = r.logs
    ? {
        stdout: renamed.get(r.logs.stdout) ?? r.logs.stdout,
        stderr: renamed.get(r.logs.stderr) ?? r.logs.stderr,
      }
    : t.logs;
  await ctx.ledger.append(
    "task.exited",
    { attempt: t.attempts, exit_code: r.exit_code, host: r.host, worker: r.worker, state: r.state },
    t.id,
  );
  if (r.state === "skipped") {
    await transition(ctx, t, {
      to: "skipped",
      reason: "cancelled",
      detail: r.detail ?? "the run stopped before it started",
    });
    return { kind: "done", ok: false };
  }
  if (r.commit !== null) {
    // The worker pushed its branch: the commit it names must be that branch's tip, and built on the task's start.
    try {
      const tip = await fetchRef(git.root, backend.remote, branchRef(t.branch!));
      if (tip !== r.commit)
        throw new Error(`the remote's ${t.branch} is at ${tip}, not at the worker's ${r.commit}`);
      if (!(await isAncestor(git.root, t.startCommit!, tip)))
        throw new Error(`${t.branch} at ${tip} does not build on the task's start ${t.startCommit}`);
      t.commit = tip;
    } catch (error) {
      return fail(
        ctx,
        t,
        "lost",
        `its work could not be brought back from the git remote: ${redacted(ctx, error)}`,
      );
    }
  }
  if (r.state === "success") {
    if (t.commit === null) return fail(ctx, t, "lost", "its worker reported success but pushed no commit");
    await transition(ctx, t, { to: "success" });
    await killPoint(ctx.fault, "kill-after-status", t.id);
    return { kind: "done", ok: true };
  }
  return fail(ctx, t, r.reason ?? "lost", r.detail === null ? null : ctx.redactor.redact(r.detail));
}

/**
 * The result's logs and artifacts, written into the run directory and redacted with this run's
 * secrets too. A streamed log replaces its copy, whole; another log keeps the worker's name,
 * with a suffix when that name is taken here. Answers the new name of each log that was renamed.
 */
async function writeResultFiles(
  ctx: RunContext,
  t: TaskRun,
  p: TaskPlan,
  r: TaskJobResult,
  copies: LogCopies,
): Promise<Map<string, string>> {
  const stems = new Map<string, string>();
  const renamed = new Map<string, string>();
  const artifacts = relative(ctx.runDir, p.artifactsDir).split("\\").join("/");
  for (const f of r.files) {
    let rel = f.path;
    const copied = copies.localOf(rel);
    if (copied !== undefined) {
      rel = copied;
      renamed.set(f.path, rel);
    } else if (rel.startsWith("logs/")) {
      const name = rel.slice("logs/".length);
      if (name.includes("/")) continue;
      const stem = name.replace(/\.[^.]*$/, "");
      let mapped = stems.get(stem);
      if (mapped === undefined) {
        mapped = stem;
        for (
          let n = 2;
          existsSync(join(ctx.runDir, "logs", `${mapped}.out`)) ||
          existsSync(join(ctx.runDir, "logs", `${mapped}.err`));
          n++
        )
          mapped = `${stem}-${n}`;
        stems.set(stem, mapped);
      }
      rel = `logs/${mapped}${name.slice(stem.length)}`;
      if (rel !== f.path) renamed.set(f.path, rel);
    } else if (!rel.startsWith(`${artifacts}/`)) continue;
    const abs = join(ctx.runDir, ...rel.split("/"));
    const data = Buffer.from(f.data, "base64");
    const head =
      f.cut > 0
        ? Buffer.from(
            `[termorch: the first ${f.cut} bytes were cut to keep the task's result within its cap]\n`,
          )
        : null;
    mkdirSync(dirname(abs), { recursive: true, mode: 0o700 });
    await writeFile(abs, head ? Buffer.concat([head, data]) : data, { mode: 0o600 });
    await redactFile(abs, ctx.redactor);
  }
  if (existsSync(p.artifactsDir)) await redactNames(p.artifactsDir, ctx.redactor);
  t.artifacts = [
    `${artifacts}/`,
    ...r.files
      .map((f) => f.path)
      .filter((f) => f.startsWith(`${artifacts}/`) && existsSync(join(ctx.runDir, f)))
      .map((f) => posix.normalize(f)),
  ];
  return renamed;
}

function redacted(ctx: RunContext, error: unknown): string {
  return ctx.redactor.redact(errorText(error));
}
