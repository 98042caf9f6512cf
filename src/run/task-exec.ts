import { existsSync, mkdirSync, readdirSync, rmSync, statSync } from "node:fs";
import { cp, stat, writeFile } from "node:fs/promises";
import { join, relative } from "node:path";
import { substitute } from "../agent/command.js";
import { agentEnvironment } from "../agent/environment.js";
import type { Reason } from "../contract/reason.js";
import type { Gate } from "../contract/report.js";
import type { StatusFile } from "../contract/status.js";
import { endRecordedCgroup } from "../fs/cgroup.js";
import { findMatches, matchesAny } from "../fs/find-files.js";
import { sessionName, taskBranch, taskWorktree } from "../fs/names.js";
import { cgroupRecordOf } from "../fs/private-dir.js";
import { type CommitTaskChangesOptions, changedFiles, commitTaskChanges, diffPatch } from "../git/commit.js";
import { git, withTrailers } from "../git/repo.js";
import { bringHeadOntoTaskBranch } from "../git/task-head.js";
import { prepareTaskWorktree } from "../git/worktree.js";
import { redactFile } from "../redact/redact-file.js";
import { adopt, type ExitRecord, launch, type RunningTask } from "../tmux/session.js";
import { inRepo, inWorkspace, type RunContext, taskCwd } from "./context.js";
import { Detached } from "./detached.js";
import { prepareHooks } from "./faults.js";
import { createdDuringRun } from "./ref-watch.js";
import type { TaskRun } from "./task-run.js";
import { testsGate } from "./tests-gate.js";

/** The outcome of one task, once all its attempts are done. */
export interface TaskOutcome {
  ok: boolean;
}

/** The argv a task runs, with placeholders substituted (also what a dry run reports). */
export function taskArgv(
  ctx: Pick<RunContext, "git" | "input" | "runDir" | "runId" | "resolved">,
  taskId: string,
): string[] {
  const r = ctx.resolved.get(taskId)!;
  return substitute(r.agent.command, {
    task_id: taskId,
    context_path: r.contextPath,
    workspace: taskCwd(ctx, taskId),
    artifacts_dir: join(ctx.runDir, "artifacts", taskId),
    run_id: ctx.runId,
  });
}

/**
 * Runs one task to its end: worktree, every attempt in a fresh session, gates, artifacts.
 * `resume`: the task was started by an earlier process (state.json says so); its worktree is
 * reused and its live or finished attempt is adopted, never launched a second time.
 */
export async function executeTask(ctx: RunContext, taskId: string, resume = false): Promise<TaskOutcome> {
  const t = ctx.tasks.get(taskId)!;
  const r = ctx.resolved.get(taskId)!;
  const task = r.task;
  const cwd = taskCwd(ctx, taskId);
  const wt = taskWorktree(ctx.runId, taskId);
  const artifactsDir = join(ctx.runDir, "artifacts", taskId);
  const reuse = resume && (t.startCommit !== null || !ctx.git);
  t.startedAt ??= ctx.now();
  t.session = sessionName(ctx.runId, taskId);

  if (ctx.detach.aborted) throw new Detached();
  if (reuse && ctx.git && !existsSync(wt)) {
    t.detail = `its worktree ${wt} vanished while termorch was not running`;
    return finish(ctx, t, "lost", null);
  }
  if (ctx.git && !reuse) {
    t.branch = taskBranch(ctx.runId, taskId);
    const prepared = await prepareTaskWorktree({
      repo: ctx.git.root,
      path: wt,
      branch: t.branch,
      base: ctx.git.baseCommit,
      deps: task.dependencies.map((d) => ({ task: d, branch: taskBranch(ctx.runId, d) })),
      include: inRepo(ctx, ctx.input.assignments.environment.worktree_include),
      identity: ctx.identity,
      trailers: trailersOf(ctx, taskId),
      // An earlier process of this run may have died while preparing this task, before it
      // recorded the start commit (so nothing was launched): its branch and worktree are taken
      // over when they provably hold nothing else.
      reclaim: ctx.resumed,
      hooks: prepareHooks(ctx.fault, taskId),
    }).catch((error: unknown) => ({ ok: false as const, error }));
    if (!prepared.ok) {
      t.session = null;
      if ("conflict" in prepared) {
        t.detail = `its dependencies conflict: ${prepared.conflict.detail}`;
        ctx.depConflicts.push(prepared.conflict);
        return finish(ctx, t, "conflict", null);
      }
      t.branch = null;
      t.detail = `could not prepare its worktree: ${ctx.redactor.redact(errorText(prepared.error))}`;
      return finish(ctx, t, "launch_error", null);
    }
    t.startCommit = prepared.startCommit;
    await ctx.ledger.append(
      "task.worktree",
      { branch: t.branch, start_commit: t.startCommit, path: wt },
      taskId,
    );
    ctx.journal.write(t);
  }
  // Another task's failure may have stopped the run (--fail-fast, cancel) while this one was
  // being prepared: a task that never launched is skipped, not failed.
  if (ctx.signal.aborted && !(resume && t.attemptDir)) {
    await skipTask(ctx, t, "cancelled", "the run stopped before it started");
    return { ok: false };
  }
  if (!(resume && t.attemptDir)) {
    // A re-run in the same folder starts from an empty artifacts folder.
    if (existsSync(artifactsDir)) rmSync(artifactsDir, { recursive: true, force: true });
    mkdirSync(artifactsDir);
  }

  const maxAttempts = task.retries + 1;
  let adopting = resume && t.attemptDir !== null;
  for (;;) {
    let exit: AttemptResult;
    if (adopting) {
      adopting = false;
      exit = await adoptAttempt(ctx, t, cwd, artifactsDir);
    } else {
      // The daemon is shutting down: nothing new starts; the task stays as state.json has it.
      if (ctx.detach.aborted) throw new Detached();
      t.attempts += 1;
      if (t.attempts > 1) await resetForRetry(ctx, t, wt);
      exit = await runAttempt(ctx, t, cwd, artifactsDir);
    }
    let reason = exit.reason;
    if (reason === null) reason = await runGates(ctx, t, cwd, wt);
    else t.gates = [coreGate(exit)];
    t.exitCode = exit.record?.exit_code ?? null;
    if (reason === null) {
      await collectArtifacts(ctx, t, cwd, artifactsDir);
      return finish(ctx, t, null, exit.record);
    }
    // A worktree that is gone cannot be reset for another attempt.
    const gone = ctx.git !== null && !existsSync(wt);
    if (reason === "cancelled" || ctx.signal.aborted || t.attempts >= maxAttempts || gone) {
      await collectArtifacts(ctx, t, cwd, artifactsDir);
      return finish(ctx, t, reason, exit.record);
    }
    ctx.log.info({ task: taskId, attempt: t.attempts, reason }, "task failed; retrying in a fresh session");
    await ctx.ledger.append("task.retrying", { attempt: t.attempts, reason, detail: t.detail }, taskId);
    await ctx.tmux.killSession(t.session);
  }
}

interface AttemptResult {
  record: ExitRecord | null;
  /** null: the agent exited 0 (gates still to run). */
  reason: Reason | null;
}

function agentEnvOf(ctx: RunContext, t: TaskRun, cwd: string, artifactsDir: string): Record<string, string> {
  const r = ctx.resolved.get(t.id)!;
  return agentEnvironment({
    processEnv: ctx.processEnv,
    envVars: ctx.input.assignments.environment.env_vars,
    agentEnv: r.agent.env,
    taskEnv: r.task.env,
    termorch: {
      TERMORCH_RUN_ID: ctx.runId,
      TERMORCH_RUN_DIR: ctx.runDir,
      TERMORCH_TASK_ID: t.id,
      TERMORCH_CONTEXT_PATH: r.contextPath,
      TERMORCH_WORKSPACE: cwd,
      TERMORCH_ARTIFACTS_DIR: artifactsDir,
      TERMORCH_ATTEMPT: String(t.attempts),
    },
    config: ctx.input.config,
  }).env;
}

async function runAttempt(
  ctx: RunContext,
  t: TaskRun,
  cwd: string,
  artifactsDir: string,
): Promise<AttemptResult> {
  newLogs(ctx, t);
  t.attemptDir = attemptDirOf(ctx, t.id, t.attempts);
  t.attemptStartedAt = ctx.now();
  // Recorded before the session exists, so an interrupted run knows which session to look for
  // (a resume also finds attempts by their folders, which the launch creates first).
  ctx.journal.write(t);
  return launchAndWatch(ctx, t, cwd, artifactsDir);
}

function newLogs(ctx: RunContext, t: TaskRun): void {
  const stem = ctx.logNames.next(ctx.resolved.get(t.id)!.task.agent, ctx.now());
  t.logs = { stdout: `logs/${stem}.out`, stderr: `logs/${stem}.err` };
}

/** `<run-dir>/.termorch/<run>/tasks/<task>/<attempt>`: where an attempt's wrapper files and exit.json live. */
export function attemptDirOf(ctx: Pick<RunContext, "privateDir">, taskId: string, attempt: number): string {
  return join(ctx.privateDir, "tasks", taskId, String(attempt));
}

async function launchAndWatch(
  ctx: RunContext,
  t: TaskRun,
  cwd: string,
  artifactsDir: string,
): Promise<AttemptResult> {
  const r = ctx.resolved.get(t.id)!;
  const limits = ctx.input.assignments.environment.resource_limits;
  let running: RunningTask;
  try {
    running = await launch(ctx.tmux, {
      runId: ctx.runId,
      taskId: t.id,
      attempt: t.attempts,
      session: t.session!,
      argv: t.argv,
      env: agentEnvOf(ctx, t, cwd, artifactsDir),
      cwd,
      tty: r.agent.tty,
      stdoutLog: join(ctx.runDir, t.logs!.stdout),
      stderrLog: join(ctx.runDir, t.logs!.stderr),
      attemptDir: t.attemptDir!,
      redact: ctx.redactSources,
      maxLogBytes: ctx.maxLogBytes,
      ...(limits.memory_mb ? { memoryMb: limits.memory_mb } : {}),
      killGraceMs: ctx.killGraceMs,
      // For hosts whose cgroups a manager owns (and to test what works without one).
      ...(ctx.processEnv.TERMORCH_CGROUP === "off" ? { cgroup: false } : {}),
      // Kept when the run ends (its tasks folder is removed), so that clean finds what a killed
      // wrapper left there.
      cgroupRecord: cgroupRecordOf(ctx.privateDir, t.id, t.attempts),
    });
  } catch (error) {
    t.detail = `could not start its tmux session: ${ctx.redactor.redact(errorText(error))}`;
    await writeFile(join(ctx.runDir, t.logs!.stderr), `termorch: ${t.detail}\n`, { flag: "a", mode: 0o600 });
    return { record: null, reason: "launch_error" };
  }
  await ctx.ledger.append(
    "task.launched",
    { attempt: t.attempts, session: t.session, argv: t.argv, cwd, logs: t.logs },
    t.id,
  );
  t.state = "running";
  await setStatus(ctx, t, "running");
  return watchAttempt(ctx, t, running);
}

/**
 * Picks up an attempt an earlier process launched: a finished one from its exit record, a live
 * one by watching its session. An attempt that was recorded but never got a session (the
 * process died in between) is launched now, under the same attempt number and session name.
 */
async function adoptAttempt(
  ctx: RunContext,
  t: TaskRun,
  cwd: string,
  artifactsDir: string,
): Promise<AttemptResult> {
  const attemptDir = t.attemptDir!;
  const finished = existsSync(join(attemptDir, "exit.json"));
  const live = !finished && (await ctx.tmux.hasSession(t.session!));
  if (!finished && !live && t.state !== "running") {
    if (!t.logs) newLogs(ctx, t);
    t.attemptStartedAt ??= ctx.now();
    return launchAndWatch(ctx, t, cwd, artifactsDir);
  }
  const running = await adopt(ctx.tmux, {
    session: t.session!,
    attemptDir,
    runId: ctx.runId,
    taskId: t.id,
    attempt: t.attempts,
  });
  await ctx.ledger.append("task.adopted", { attempt: t.attempts, session: t.session, finished, live }, t.id);
  if (t.state !== "running") {
    t.state = "running";
    await setStatus(ctx, t, "running");
  }
  return watchAttempt(ctx, t, running);
}

async function watchAttempt(ctx: RunContext, t: TaskRun, running: RunningTask): Promise<AttemptResult> {
  const r = ctx.resolved.get(t.id)!;
  const limits = ctx.input.assignments.environment.resource_limits;
  ctx.running.add(t.id);
  ctx.onChange();
  const timeoutS =
    r.task.timeout_s ?? r.agent.timeout_s ?? limits.timeout_s ?? ctx.input.config.defaults.timeout_s;
  let timedOut = false;
  let cancelled = false;
  // A resumed attempt keeps its original deadline.
  const elapsed = ctx.now() - (t.attemptStartedAt ?? ctx.now());
  const timer =
    timeoutS === undefined
      ? null
      : setTimeout(
          () => {
            timedOut = true;
            void running.kill(ctx.killGraceMs);
          },
          Math.max(0, timeoutS * 1000 - elapsed),
        );
  const onAbort = (): void => {
    cancelled = true;
    void running.kill(ctx.killGraceMs);
  };
  if (ctx.signal.aborted) onAbort();
  else ctx.signal.addEventListener("abort", onAbort, { once: true });
  let onDetach: (() => void) | undefined;
  const detached = new Promise<"detached">((resolve) => {
    onDetach = () => resolve("detached");
    if (ctx.detach.aborted) onDetach();
    else ctx.detach.addEventListener("abort", onDetach, { once: true });
  });
  const record = await Promise.race([running.exited, detached]);
  if (timer) clearTimeout(timer);
  ctx.signal.removeEventListener("abort", onAbort);
  if (onDetach) ctx.detach.removeEventListener("abort", onDetach);
  ctx.running.delete(t.id);
  if (record === "detached") {
    // Stop watching (its watchers would keep this process alive); the agent keeps running.
    running.detach();
    throw new Detached();
  }
  // The wrapper removes the agent's cgroup when it ends; one that is still recorded was left by a
  // wrapper that was killed (the attempt is then lost), and still holds what the agent started.
  const left = await endRecordedCgroup(cgroupRecordOf(ctx.privateDir, t.id, t.attempts), ctx.killGraceMs);
  if (left)
    ctx.log.info(
      { task: t.id, attempt: t.attempts, processes: left },
      "ended what the attempt left in its cgroup",
    );
  await ctx.ledger.append("task.exited", { attempt: t.attempts, ...record }, t.id);
  return classifyExit(ctx, t, record, { timedOut, timeoutS, cancelled });
}

/** Details never name a log: the report's `output_log` says which one holds the agent's output. */
function classifyExit(
  ctx: RunContext,
  t: TaskRun,
  record: ExitRecord,
  how: { timedOut: boolean; timeoutS: number | undefined; cancelled: boolean },
): AttemptResult {
  if (how.timedOut) {
    t.detail = `timed out after ${how.timeoutS} s; its process group was terminated`;
    return { record, reason: "timeout" };
  }
  if (how.cancelled) {
    t.detail = "the run was cancelled while it ran";
    return { record, reason: "cancelled" };
  }
  if (record.launch_failed) {
    t.detail = `its command could not be started (exit ${record.exit_code})${record.detail ? `: ${ctx.redactor.redact(record.detail)}` : ""}`;
    return { record, reason: "launch_error" };
  }
  if (record.lost) {
    t.detail = `its session ended without an exit record${record.detail ? ` (${record.detail})` : ""}`;
    return { record, reason: "lost" };
  }
  if (record.signal) {
    t.detail = `killed by ${record.signal}`;
    return { record, reason: "signal" };
  }
  if (record.exit_code !== 0) {
    t.detail =
      record.exit_code === 127
        ? "exited with code 127 (command not found?)"
        : `exited with code ${record.exit_code}`;
    return { record, reason: "exit_code" };
  }
  t.detail = null;
  return { record, reason: null };
}

function coreGate(exit: AttemptResult): Gate {
  const rec = exit.record;
  const detail =
    rec === null
      ? "never started"
      : rec.lost
        ? "session lost"
        : rec.signal
          ? `killed by ${rec.signal}`
          : `exit code ${rec.exit_code}`;
  return {
    name: "core",
    required: true,
    passed: exit.reason === null,
    detail: exit.reason === "timeout" ? "timed out" : detail,
  };
}

/** Per-task gates in the README's order (docs/ARCHITECTURE.md: the pipeline), after the core gate passed. Returns the failing reason. */
async function runGates(ctx: RunContext, t: TaskRun, cwd: string, wt: string): Promise<Reason | null> {
  const r = ctx.resolved.get(t.id)!;
  const gates: Gate[] = [{ name: "core", required: true, passed: true, detail: "exit code 0" }];
  t.gates = gates;
  const include = ctx.input.assignments.environment.worktree_include;
  if (ctx.git) {
    // Without its worktree there is nothing to commit or check, and git cannot even start there.
    if (!existsSync(wt)) {
      t.detail = `its worktree ${wt} was deleted while the agent ran (by the agent?); its work is lost`;
      gates.push({ name: "commit", required: true, passed: false, detail: t.detail });
      return "lost";
    }
    try {
      t.commit = await commitOnTaskBranch(ctx, t, wt, {
        message: withTrailers(
          `termorch: task ${t.id} (agent ${r.task.agent}, run ${ctx.runId})`,
          trailersOf(ctx, t.id),
        ),
        exclude: inRepo(ctx, include),
        ...(t.startCommit ? { start: t.startCommit } : {}),
        identity: ctx.identity,
      });
    } catch (error) {
      t.detail = `could not commit its changes: ${ctx.redactor.redact(errorText(error))}`;
      gates.push({ name: "commit", required: true, passed: false, detail: t.detail });
      return "validation";
    }
  }
  const failures: string[] = [];
  const required = r.task.success_criteria?.required_artifacts ?? [];
  if (required.length === 0)
    gates.push({ name: "required_artifacts", required: false, passed: null, detail: "none required" });
  else if (!ctx.verify)
    gates.push({
      name: "required_artifacts",
      required: true,
      passed: null,
      detail: "skipped (verify: false)",
    });
  else {
    const missing: string[] = [];
    for (const p of required) if ((await findMatches(cwd, p, include)).length === 0) missing.push(p);
    const passed = missing.length === 0;
    gates.push({
      name: "required_artifacts",
      required: true,
      passed,
      detail: passed ? `present: ${required.join(", ")}` : `missing: ${missing.join(", ")}`,
    });
    if (!passed) failures.push(`required artifacts missing: ${missing.join(", ")}`);
  }

  const allowed = r.task.allowed_paths;
  if (!allowed)
    gates.push({ name: "allowed_paths", required: false, passed: null, detail: "no restriction" });
  else if (!ctx.git || !t.startCommit || !t.commit)
    gates.push({
      name: "allowed_paths",
      required: true,
      passed: null,
      detail: "skipped: the workspace is not a git repository",
    });
  else {
    const changed = inWorkspace(ctx, await changedFiles(ctx.git.root, t.startCommit, t.commit));
    const outside = changed.filter((f) => !matchesAny(f, allowed));
    const passed = outside.length === 0;
    gates.push({
      name: "allowed_paths",
      required: true,
      passed,
      detail: passed
        ? `all changes within ${allowed.join(", ")}`
        : `changed outside ${allowed.join(", ")}: ${outside.join(", ")}`,
    });
    if (!passed) failures.push(`changed files outside allowed_paths: ${outside.join(", ")}`);
  }

  const testsCmd = r.task.success_criteria?.tests_cmd;
  if (!testsCmd) gates.push({ name: "tests_cmd", required: false, passed: null, detail: "none given" });
  else if (!ctx.verify)
    gates.push({ name: "tests_cmd", required: true, passed: null, detail: "skipped (verify: false)" });
  else if (failures.length > 0)
    gates.push({
      name: "tests_cmd",
      required: true,
      passed: null,
      detail: "not run: an earlier gate failed",
    });
  else {
    const gate = await testsGate(ctx, {
      name: "tests_cmd",
      command: testsCmd,
      cwd,
      env: agentEnvOf(ctx, t, cwd, join(ctx.runDir, "artifacts", t.id)),
      timeoutS:
        r.task.timeout_s ??
        r.agent.timeout_s ??
        ctx.input.assignments.environment.resource_limits.timeout_s ??
        ctx.input.config.defaults.timeout_s,
      logName: `tests-${t.id}`,
    });
    gates.push(gate);
    if (!gate.passed) failures.push(`tests_cmd failed (${gate.detail})`);
  }
  if (failures.length === 0) return null;
  t.detail = failures.join("; ");
  return "validation";
}

/** Trailers naming the run and task on every commit termorch makes for a task. */
function trailersOf(ctx: RunContext, taskId: string): Record<string, string> {
  return { "Termorch-Run": ctx.runId, "Termorch-Task": taskId };
}

/**
 * Commits the agent's work on the task branch, which is what gets merged and reported. An
 * agent may have switched its worktree to a branch of its own or a detached HEAD: then its
 * work is brought onto the task branch (the branch it created is recorded, to be reported and
 * removed), or the commit gate fails. Looked into only when the commit finds HEAD elsewhere,
 * so the usual task pays no extra git process.
 */
async function commitOnTaskBranch(
  ctx: RunContext,
  t: TaskRun,
  wt: string,
  o: Omit<CommitTaskChangesOptions, "branch">,
): Promise<string> {
  const branch = t.branch;
  if (branch === null) return commitTaskChanges(wt, o);
  try {
    return await commitTaskChanges(wt, { ...o, branch });
  } catch (error) {
    const head = await bringHeadOntoTaskBranch(wt, branch, (ref) => createdDuringRun(ctx, ref));
    if (!head.moved) throw error;
    if (head.from !== null && !t.refsCreated.includes(head.from))
      t.refsCreated = [...t.refsCreated, head.from];
    await ctx.ledger.append("task.head_taken", { from: head.from, branch, commit: head.commit }, t.id);
    return commitTaskChanges(wt, { ...o, branch });
  }
}

/** artifacts/<task>/: what the agent wrote there, changes.patch, copies of required artifacts, handoff.md. */
async function collectArtifacts(
  ctx: RunContext,
  t: TaskRun,
  cwd: string,
  artifactsDir: string,
): Promise<void> {
  try {
    if (ctx.git && t.startCommit && t.commit) {
      // No commit of its own: the patch is empty, and no git process is needed to say so.
      const patch =
        t.commit === t.startCommit ? Buffer.alloc(0) : await diffPatch(ctx.git.root, t.startCommit, t.commit);
      // latin1 maps bytes 1:1, so redaction keeps binary patches byte-exact.
      const redacted = ctx.redactor.redactBytes(patch);
      await writeFile(join(artifactsDir, "changes.patch"), redacted, { mode: 0o600 });
    }
    const include = ctx.input.assignments.environment.worktree_include;
    const r = ctx.resolved.get(t.id)!;
    for (const p of r.task.success_criteria?.required_artifacts ?? []) {
      for (const match of await findMatches(cwd, p, include)) {
        await cp(join(cwd, match), join(artifactsDir, "files", match), {
          recursive: true,
          dereference: false,
          force: true,
        });
      }
    }
    const handoff = join(cwd, "handoff.md");
    if (
      statSync(handoff, { throwIfNoEntry: false })?.isFile() &&
      !existsSync(join(artifactsDir, "handoff.md"))
    ) {
      await cp(handoff, join(artifactsDir, "handoff.md"));
    }
    // Most agents leave nothing here: one readdir spares the walk.
    const files =
      readdirSync(artifactsDir).length === 0
        ? []
        : await onlyFiles(artifactsDir, await findMatches(artifactsDir, "**", []));
    // Everything under the run directory is redacted, what the agent put here included.
    for (const f of files) await redactFile(join(artifactsDir, f), ctx.redactor);
    const dir = relative(ctx.runDir, artifactsDir);
    t.artifacts = [`${dir}/`, ...files.map((f) => `${dir}/${f}`)];
  } catch (error) {
    ctx.log.warn({ task: t.id, err: errorText(error) }, "collecting artifacts failed");
  }
}

async function onlyFiles(root: string, rels: string[]): Promise<string[]> {
  const out: string[] = [];
  for (const rel of rels) if ((await stat(join(root, rel)).catch(() => null))?.isFile()) out.push(rel);
  return out;
}

/** A retry starts from the same base: drop what the failed attempt left in the worktree. */
async function resetForRetry(ctx: RunContext, t: TaskRun, wt: string): Promise<void> {
  if (!ctx.git || !t.startCommit) return;
  const keep = inRepo(ctx, ctx.input.assignments.environment.worktree_include).flatMap((p) => [
    "-e",
    `/${p}`,
  ]);
  await git(wt, ["reset", "-q", "--hard", t.startCommit]);
  await git(wt, ["clean", "-q", "-ffdx", ...keep]);
  t.commit = null;
}

/** A task that will never run: its status is `skipped`, with the reason. */
export async function skipTask(
  ctx: RunContext,
  t: TaskRun,
  reason: "dependency_failed" | "cancelled",
  detail: string,
): Promise<void> {
  t.state = "skipped";
  t.reason = reason;
  t.detail = detail;
  t.finishedAt = ctx.now();
  await setStatus(ctx, t, "skipped");
  ctx.onChange();
}

async function finish(
  ctx: RunContext,
  t: TaskRun,
  reason: Reason | null,
  record: ExitRecord | null,
): Promise<TaskOutcome> {
  t.finishedAt = ctx.now();
  t.reason = reason;
  t.state = reason === null ? "success" : "failed";
  if (record) t.exitCode = record.exit_code;
  await setStatus(ctx, t, t.state);
  ctx.onChange();
  return { ok: reason === null };
}

function statusOf(ctx: RunContext, t: TaskRun, state: StatusFile["state"]): StatusFile {
  return {
    task_id: t.id,
    state,
    run_id: ctx.runId,
    session: t.session,
    socket: ctx.socketName,
    socket_path: ctx.socketPath,
    attempt: t.attempts,
    started_at: t.startedAt === null ? null : new Date(t.startedAt).toISOString(),
    finished_at: t.finishedAt === null ? null : new Date(t.finishedAt).toISOString(),
    exit_code: t.exitCode,
    reason: t.reason,
    detail: t.detail === null ? null : ctx.redactor.redact(t.detail),
  };
}

/**
 * Every state change goes to the ledger, the task journal and the status file, in that
 * order: whoever sees the status file (an operator, a test, a resume) can rely on the other two.
 */
export async function setStatus(ctx: RunContext, t: TaskRun, state: StatusFile["state"]): Promise<void> {
  const status = statusOf(ctx, t, state);
  await ctx.ledger.append(
    `task.${state}`,
    { ...status, gates: state === "running" ? [] : t.gates, branch: t.branch, commit: t.commit },
    t.id,
  );
  ctx.journal.write(t);
  ctx.status.set(status);
}

export function errorText(error: unknown): string {
  if (error instanceof Error) return error.message;
  return String(error);
}
