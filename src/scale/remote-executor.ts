import { existsSync, writeFileSync } from "node:fs";
import { appendFile } from "node:fs/promises";
import { join, posix, relative } from "node:path";
import type { LogChunk, TaskJob, TaskJobProgress, TaskJobResult } from "../contract/task-job.js";
import { errorText } from "../errors.js";
import { taskBranch } from "../fs/names.js";
import { writeFresh } from "../fs/no-follow.js";
import {
  attemptRefsOf,
  baseRefOf,
  deleteRemoteRefsUnder,
  fetchInto,
  publishCommit,
  shownRemote,
} from "../git/remote.js";
import { branchRef, isAncestor } from "../git/repo.js";
import { createTaskBranch, taskStartCommit } from "../git/worktree.js";
import { redactFile, redactNames } from "../redact/redact-file.js";
import type { Redactor } from "../redact/redactor.js";
import type { RemoteBackend } from "../runner/task-hosts.js";
import { admitTask } from "../task/approval.js";
import { DETACHED, type TaskEnd, type TaskExecutor } from "../task/executor.js";
import { killPoint } from "../task/faults.js";
import { failTask, openTask, type StartMade } from "../task/opening.js";
import type { Ports } from "../task/ports.js";
import { promptText } from "../task/prompt.js";
import type { TaskRecorder } from "../task/recorder.js";
import { type RunPlan, trailersOf } from "../task/run-plan.js";
import type { RunStop } from "../task/stop.js";
import { agentOf, type TaskPlan } from "../task/task-plan.js";
import type { TaskRun } from "../task/task-run.js";
import { boundStoppedWait } from "./cancel-bound.js";

/** Default cap of what one task's result carries back through Redis (logs and artifacts). */
export const RESULT_MAX_BYTES = 16 * 1024 * 1024;

/** The remote executor: each task is one job for the workers of the run's backend (docs/SCALING.md). */
export function remoteExecutor(
  run: RunPlan,
  ports: Ports,
  stop: RunStop,
  recorder: TaskRecorder,
  backend: RemoteBackend,
): TaskExecutor {
  return {
    execute: (taskId, resume) => executeRemoteTask(run, ports, stop, recorder, backend, taskId, resume),
    // The coordinator's: a person answers the run, wherever its tasks run.
    admit: (taskId) => admitTask({ run, ports, stop, recorder }, taskId),
  };
}

/**
 * Runs one task on another host (backend bullmq): its start commit is computed here exactly as
 * for a local worktree and published to the git remote with its branch created here; a worker
 * runs the task's local pipeline there and pushes the task branch; its result (state, gates,
 * logs, artifacts) is written here as a local task's would be, and its branch fetched, so the
 * merge, the ledger and the report work as in a local run. `resume`: the job of an earlier
 * process is picked up by its id, never run a second time.
 */
async function executeRemoteTask(
  run: RunPlan,
  ports: Ports,
  stop: RunStop,
  recorder: TaskRecorder,
  backend: RemoteBackend,
  taskId: string,
  resume: boolean,
): Promise<TaskEnd> {
  const t = recorder.get(taskId);
  const p = run.plans.get(taskId)!;
  const git = run.git!;
  if (t.git.startCommit !== null && t.git.branch === null)
    recorder.note(taskId, { git: { branch: p.workspace.branch } });
  const opened = await openTask(run, ports, stop, recorder, p, {
    needed: t.git.startCommit === null,
    startedBefore: resume && t.attempts > 0,
    lost: null,
    make: () => publishStart(run, ports.redactor, backend.remote, p),
  });
  if (opened !== "go") return opened;
  let prompt: Buffer;
  try {
    prompt = await promptText(run, ports, recorder, p);
    writeFresh(p.workspace.artifactsDir, "prompt.md", ports.redactor.redactBytes(prompt));
  } catch (error) {
    return failTask(
      run,
      recorder,
      taskId,
      "launch_error",
      `could not write its prompt: ${redacted(ports, error)}`,
    );
  }

  const job: TaskJob = {
    version: 1,
    run_id: run.runId,
    task_id: taskId,
    remote: backend.remote,
    base_ref: baseRefOf(run.runId, taskId),
    start_commit: t.git.startCommit!,
    prefix: git.prefix,
    identity: { name: run.identity.name, email: run.identity.email },
    assignments: oneTask(run, taskId),
    config: run.input.config,
    prompt: prompt.toString("base64"),
    verify: run.settings.verify,
    result_max_bytes: RESULT_MAX_BYTES,
  };
  // Progress and log pieces are handled one after another, and the result waits for the last of them.
  let progressed = Promise.resolve();
  const later = (work: () => Promise<void>): void => {
    progressed = progressed
      .then(work)
      .catch((error: unknown) =>
        ports.log.warn({ task: taskId, err: errorText(error) }, "could not record a worker's progress"),
      );
  };
  const copies = new LogCopies(run.runDir, ports);
  // The attempts a coordinator before this one recorded (it was killed, and this is its resume):
  // their progress, read again from the job, is not a new attempt.
  const seen = new Set(
    t.hosts.flatMap((h) =>
      h.delivery === undefined || h.worker_attempt === undefined
        ? []
        : [progressKey(h.delivery, h.worker, h.worker_attempt)],
    ),
  );
  const onProgress = (pr: TaskJobProgress): void =>
    later(() => recordProgress(ports, recorder, t, p, pr, { seen, copies, fault: run.fault }));
  const onLog = (chunk: LogChunk): void => later(() => copies.append(chunk));
  // A detach (the daemon stopping) leaves the job to the workers; a cancel or --fail-fast ends it
  // there, and is not waited for past a bound.
  const stopWaiting = new AbortController();
  let unanswered = "";
  const release = boundStoppedWait({
    stop,
    killGraceMs: run.killGraceMs,
    cancel: () => backend.hosts.cancel(run.runId),
    onCancelError: (error) =>
      ports.log.warn({ err: errorText(error) }, "could not tell the workers to cancel"),
    leave: (why) => {
      if (why !== null) unanswered = why;
      stopWaiting.abort();
    },
  });
  let result: TaskJobResult | "detached";
  try {
    result = await backend.hosts.run(jobIdOf(run, taskId), job, {
      onProgress,
      onLog,
      detach: stopWaiting.signal,
    });
  } finally {
    release();
  }
  await progressed;
  if (result === "detached" && stop.detaching) return DETACHED;
  if (result === "detached")
    return failTask(
      run,
      recorder,
      taskId,
      "cancelled",
      `the run was cancelled, and its worker did not answer (${unanswered}; is Redis reachable?); its agent may still run there`,
    );
  await killPoint(run.fault, "kill-after-exit", taskId);
  const end = await applyResult(run, ports, recorder, backend, t, p, result, copies);
  // Its end is in the task journal now: a resume does not need the job, and its result (logs up
  // to the cap) need not sit in Redis's memory.
  await backend.hosts
    .forget(jobIdOf(run, taskId))
    .catch((error: unknown) =>
      ports.log.warn({ task: taskId, err: errorText(error) }, "could not drop the task's job"),
    );
  return end;
}

/** One job per task of a run: the run's start time keeps a re-run under the same run id from finding an old job. */
export function jobIdOf(run: Pick<RunPlan, "runId" | "startedAt">, taskId: string): string {
  return `${run.runId}.${run.startedAt}.${taskId}`;
}

/** The assignments as the worker sees them: this task alone, its dependencies already in its start commit. */
function oneTask(run: Pick<RunPlan, "input" | "runId">, taskId: string): unknown {
  const a = run.input.assignments;
  const task = a.tasks.find((x) => x.id === taskId)!;
  return {
    ...a,
    run_id: run.runId,
    // The worker's worktree has no checkout of the user's to link or copy from.
    environment: { ...a.environment, workspace_dir: ".", worktree_include: [], worktree_copy: [] },
    tasks: [{ ...task, dependencies: [], context_path: "context.md" }],
    // Run-level checks are the coordinator's, after the merge.
    success_criteria: { required_artifacts: [] },
  };
}

/** One attempt of a worker's, as its progress names it. */
const progressKey = (delivery: number, worker: string, attempt: number): string =>
  `${delivery}/${worker}/${attempt}`;

/** A worker started an attempt (or changed its state): the ledger names its host; status and progress follow. */
async function recordProgress(
  ports: Pick<Ports, "ledger" | "now" | "log">,
  recorder: TaskRecorder,
  t: Readonly<TaskRun>,
  p: TaskPlan,
  pr: TaskJobProgress,
  at: { seen: Set<string>; copies: LogCopies; fault: RunPlan["fault"] },
): Promise<void> {
  const { seen, copies } = at;
  ports.log.debug(
    { task: t.id, worker: pr.worker, delivery: pr.delivery, attempt: pr.attempt, state: pr.state },
    "a worker's progress",
  );
  if (t.state !== "pending" && t.state !== "running") return;
  const key = progressKey(pr.delivery, pr.worker, pr.attempt);
  if (pr.state === "running" && pr.attempt > 0 && !seen.has(key)) {
    seen.add(key);
    const attempt = t.attempts + 1;
    // Into the journal before the ledger: a resume that finds the launch in the ledger finds its
    // host in the journal too, and does not record it again from the job's result.
    recorder.checkpoint(t.id, {
      attempts: attempt,
      current: { agentIndex: pr.agent_index, startedAt: ports.now() },
      hosts: [
        ...t.hosts,
        {
          attempt,
          worker: pr.worker,
          host: pr.host,
          socket: pr.socket,
          delivery: pr.delivery,
          worker_attempt: pr.attempt,
        },
      ],
      // Its logs here, under names of this run's, filled as the worker streams them.
      ...(pr.logs
        ? { result: { logs: copies.open(pr.logs, agentOf(p, pr.agent_index).name, ports.now()) } }
        : {}),
    });
    await ports.ledger.append(
      "task.launched",
      {
        attempt: t.attempts,
        session: t.current.session,
        host: pr.host,
        worker: pr.worker,
        socket: pr.socket,
        delivery: pr.delivery,
        agent: agentOf(p, pr.agent_index).name,
        logs: t.result.logs,
      },
      t.id,
    );
    await killPoint(at.fault, "kill-after-remote-launch", t.id);
    await recorder.transition(t.id, { to: "running" });
    return;
  }
  if (pr.state === "running" && pr.attempt > 0) {
    // An attempt the journal has from a coordinator before this one (killed; this is its resume):
    // its logs are copied again from their start (the job's log pieces are read again from the
    // first), and a task it left pending, its launch recorded but not its state, is running.
    if (pr.logs && t.result.logs && copies.localOf(pr.logs.stdout) === undefined)
      copies.adopt(pr.logs, t.result.logs);
    if (t.state === "pending") await recorder.transition(t.id, { to: "running" });
  }
  if (t.state === "running" && (pr.waiting_since !== t.waiting.since || pr.waiting_for !== t.waiting.for))
    await recorder.markWaiting(t.id, pr.waiting_since, pr.waiting_for);
}

/**
 * The coordinator's copies of the logs workers stream: a worker's log (by its name there) goes
 * to a log of this run's, appended in order and redacted again. A piece that does not follow on
 * what was written (a gap: pieces Redis dropped) is left out; the result brings the whole log.
 */
class LogCopies {
  /** The worker's log name → this run's (relative to the run directory), and how far it was copied. */
  private readonly logs = new Map<string, { local: string; next: number }>();

  constructor(
    private readonly runDir: string,
    private readonly ports: Pick<Ports, "logNames" | "redactor">,
  ) {}

  open(
    worker: { stdout: string; stderr: string },
    agent: string,
    now: number,
  ): { stdout: string; stderr: string } {
    const stem = this.ports.logNames.next(agent, now);
    const local = { stdout: `logs/${stem}.out`, stderr: `logs/${stem}.err` };
    this.adopt(worker, local);
    return local;
  }

  /** The worker's logs copied to `local` (this run's names), from their start. */
  adopt(worker: { stdout: string; stderr: string }, local: { stdout: string; stderr: string }): void {
    for (const stream of ["stdout", "stderr"] as const) {
      writeFileSync(join(this.runDir, local[stream]), "", { mode: 0o600 });
      this.logs.set(worker[stream], { local: local[stream], next: 0 });
    }
  }

  async append(chunk: LogChunk): Promise<void> {
    const copy = this.logs.get(chunk.log);
    if (!copy) return;
    const data = Buffer.from(chunk.data, "base64");
    if (chunk.offset > copy.next || chunk.offset + data.length <= copy.next) return;
    const fresh = data.subarray(copy.next - chunk.offset);
    copy.next += fresh.length;
    await appendFile(join(this.runDir, copy.local), this.ports.redactor.redactBytes(fresh));
  }

  /** Where a worker's log of that name was copied; undefined for one never streamed. */
  localOf(workerLog: string): string | undefined {
    return this.logs.get(workerLog)?.local;
  }
}

async function applyResult(
  run: RunPlan,
  ports: Ports,
  recorder: TaskRecorder,
  backend: RemoteBackend,
  t: Readonly<TaskRun>,
  p: TaskPlan,
  r: TaskJobResult,
  copies: LogCopies,
): Promise<TaskEnd> {
  const git = run.git!;
  const attempts = Math.max(t.attempts, r.attempts);
  // No progress of the worker reached this coordinator (it was killed first, and its resume found
  // the job done): the result names where the task ran.
  const unseen = t.hosts.length === 0 && r.attempts > 0;
  // Its spend is the run's: the run's budget marks are told from here.
  recorder.spent(t.id, {
    attempts,
    // A result of a delivery that never ran an attempt says nothing of its agent.
    ...(r.attempts > 0 ? { current: { agentIndex: r.agent_index } } : {}),
    // What the worker's attempts were told and ran (its feedback sections come with its artifacts).
    ...(r.history.length > 0 ? { history: r.history } : {}),
    ...(unseen ? { hosts: [{ attempt: attempts, worker: r.worker, host: r.host, socket: r.socket }] } : {}),
    result: { exitCode: r.exit_code, gates: r.gates, agentResult: r.agent_result, usage: r.usage },
  });
  recorder.stopWaiting(t.id);
  const { renamed, artifacts } = await writeResultFiles(run.runDir, ports.redactor, p, r, copies);
  recorder.note(t.id, {
    result: {
      artifacts,
      logs: r.logs
        ? {
            stdout: renamed.get(r.logs.stdout) ?? r.logs.stdout,
            stderr: renamed.get(r.logs.stderr) ?? r.logs.stderr,
          }
        : t.result.logs,
    },
  });
  // The ledger names the host of every attempt: one seen only in its result is launched here.
  if (unseen)
    await ports.ledger.append(
      "task.launched",
      { attempt: attempts, session: t.current.session, host: r.host, worker: r.worker, logs: t.result.logs },
      t.id,
    );
  await ports.ledger.append(
    "task.exited",
    { attempt: t.attempts, exit_code: r.exit_code, host: r.host, worker: r.worker, state: r.state },
    t.id,
  );
  if (r.state === "skipped") {
    await recorder.transition(t.id, {
      to: "skipped",
      reason: "cancelled",
      detail: r.detail ?? "the run stopped before it started",
    });
    return { kind: "done", ok: false };
  }
  if (r.commit !== null) {
    // The worker pushed to its attempt's own ref: the commit it names must be that ref's tip, and
    // built on the task's start. Only this result's attempt is taken (only the job's holder can
    // finish it); the refs of the task's other attempts, a worker that lost the job may have
    // pushed, go.
    try {
      if (r.ref === null || !r.ref.startsWith(attemptRefsOf(run.runId, t.id)))
        throw new Error(`its worker names no attempt ref of this task (${r.ref ?? "none"})`);
      const tip = await fetchInto(git.root, backend.remote, r.ref, branchRef(t.git.branch!));
      if (tip !== r.commit)
        throw new Error(`the remote's ${r.ref} is at ${tip}, not at the worker's ${r.commit}`);
      if (!(await isAncestor(git.root, t.git.startCommit!, tip)))
        throw new Error(`${t.git.branch} at ${tip} does not build on the task's start ${t.git.startCommit}`);
      recorder.note(t.id, { git: { commit: tip } });
      await dropAttemptRefs(run, ports, backend.remote, t.id);
    } catch (error) {
      return failTask(
        run,
        recorder,
        t.id,
        "lost",
        `its work could not be brought back from the git remote: ${redacted(ports, error)}`,
      );
    }
  }
  if (r.state === "success") {
    if (t.git.commit === null)
      return failTask(run, recorder, t.id, "lost", "its worker reported success but pushed no commit");
    await recorder.transition(t.id, { to: "success" });
    await killPoint(run.fault, "kill-after-status", t.id);
    return { kind: "done", ok: true };
  }
  return failTask(
    run,
    recorder,
    t.id,
    r.reason ?? "lost",
    r.detail === null ? null : ports.redactor.redact(r.detail),
    r.needs_human,
  );
}

/** The refs a task's attempts pushed to the remote, gone once one of them was fetched (or none is wanted). */
async function dropAttemptRefs(
  run: Pick<RunPlan, "runId" | "git">,
  ports: Pick<Ports, "log">,
  remote: string,
  taskId: string,
): Promise<void> {
  await deleteRemoteRefsUnder(run.git!.root, remote, attemptRefsOf(run.runId, taskId)).catch(
    (error: unknown) =>
      ports.log.warn(
        { task: taskId, err: errorText(error) },
        "could not delete the task's attempt refs on the git remote",
      ),
  );
}

/**
 * The result's logs and artifacts, written into the run directory and redacted with this run's
 * secrets too. A streamed log replaces its copy, whole; another log keeps the worker's name,
 * with a suffix when that name is taken here. Answers the new name of each log that was renamed.
 */
async function writeResultFiles(
  runDir: string,
  redactor: Redactor,
  p: TaskPlan,
  r: TaskJobResult,
  copies: LogCopies,
): Promise<{ renamed: Map<string, string>; artifacts: string[] }> {
  const stems = new Map<string, string>();
  const renamed = new Map<string, string>();
  const artifacts = relative(runDir, p.workspace.artifactsDir).split("\\").join("/");
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
          existsSync(join(runDir, "logs", `${mapped}.out`)) ||
          existsSync(join(runDir, "logs", `${mapped}.err`));
          n++
        )
          mapped = `${stem}-${n}`;
        stems.set(stem, mapped);
      }
      rel = `logs/${mapped}${name.slice(stem.length)}`;
      if (rel !== f.path) renamed.set(f.path, rel);
    } else if (!rel.startsWith(`${artifacts}/`)) continue;
    const data = Buffer.from(f.data, "base64");
    const head =
      f.cut > 0
        ? Buffer.from(
            `[termorch: the first ${f.cut} bytes were cut to keep the task's result within its cap]\n`,
          )
        : null;
    // A worker's path never leads out of the run directory, nor through a link in it.
    writeFresh(runDir, rel, head ? Buffer.concat([head, data]) : data);
    await redactFile(join(runDir, rel), redactor);
  }
  if (existsSync(p.workspace.artifactsDir)) await redactNames(p.workspace.artifactsDir, redactor);
  const kept = [
    `${artifacts}/`,
    ...r.files
      .map((f) => f.path)
      .filter((f) => f.startsWith(`${artifacts}/`) && existsSync(join(runDir, f)))
      .map((f) => posix.normalize(f)),
  ];
  return { renamed, artifacts: kept };
}

function redacted(ports: Pick<Ports, "redactor">, error: unknown): string {
  return ports.redactor.redact(errorText(error));
}

/**
 * The remote start: the task's start commit computed in memory (its dependencies' branches
 * merged onto the base, as for a local worktree), its branch created here without a worktree,
 * and the start published to the git remote for a worker to fetch.
 */
async function publishStart(
  run: Pick<RunPlan, "git" | "runId" | "identity" | "resumed">,
  redactor: Redactor,
  remote: string,
  p: TaskPlan,
): Promise<StartMade> {
  const git = run.git!;
  const start = await taskStartCommit({
    repo: git.root,
    base: git.baseCommit,
    start: p.workspace.startCommit ?? undefined,
    deps: p.dependencies.map((d) => ({ task: d, branch: taskBranch(run.runId, d) })),
    branch: p.workspace.branch!,
    identity: run.identity,
    trailers: trailersOf(run.runId, p.id),
  }).catch((error: unknown) => ({ ok: false as const, error }));
  if (!start.ok) {
    if ("conflict" in start) return { ok: false, conflict: start.conflict, branch: null };
    return {
      ok: false,
      branch: null,
      detail: `could not compute its start commit: ${redactor.redact(errorText(start.error))}`,
    };
  }
  let branch: string | null = null;
  try {
    await createTaskBranch(git.root, p.workspace.branch!, start.commit, run.resumed, p.workspace.worktree!);
    branch = p.workspace.branch;
    await publishCommit(git.root, remote, start.commit, baseRefOf(run.runId, p.id));
  } catch (error) {
    return { ok: false, branch, detail: `could not publish its base: ${redactor.redact(errorText(error))}` };
  }
  return {
    ok: true,
    startCommit: start.commit,
    branch: p.workspace.branch!,
    event: {
      type: "task.published",
      data: {
        branch: p.workspace.branch!,
        start_commit: start.commit,
        remote: shownRemote(remote),
        ref: baseRefOf(run.runId, p.id),
      },
    },
  };
}
