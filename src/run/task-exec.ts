import {
  closeSync,
  existsSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  readSync,
  rmSync,
  statSync,
} from "node:fs";
import { cp, stat, writeFile } from "node:fs/promises";
import { dirname, join, relative } from "node:path";
import {
  type OutputFormat,
  parseAgentOutput,
  parseTranscript,
  SIDE_OUTPUTS,
  type TranscriptFormat,
} from "../agent/results.js";
import { findSession } from "../agent/session-files.js";
import { addUsage } from "../contract/agent-result.js";
import type { Reason } from "../contract/reason.js";
import type { Gate } from "../contract/report.js";
import { errorText } from "../errors.js";
import { endRecordedCgroup } from "../fs/cgroup.js";
import { findMatches, matchesAny } from "../fs/find-files.js";
import { sessionName, taskBranch } from "../fs/names.js";
import { cgroupRecordOf } from "../fs/private-dir.js";
import type { CommitTaskChangesOptions } from "../git/commit.js";
import { withTrailers } from "../git/repo.js";
import { redactFile, redactNames } from "../redact/redact-file.js";
import type { ExitRecord, RunningAttempt } from "../runner/task-runner.js";
import { inWorkspace, type RunContext } from "./context.js";
import { killPoint, prepareHooks } from "./faults.js";
import { checkHandoff, handoffTemplate } from "./handoff.js";
import { watchInteractive } from "./interactive.js";
import { type AttemptOutcome, classifyExit, coreGate } from "./outcome.js";
import { writePrompt } from "./prompt.js";
import { createdDuringRun } from "./ref-watch.js";
import { secretsGate } from "./secrets-gate.js";
import { runSetup, setupGates } from "./setup.js";
import type { TaskPlan } from "./task-plan.js";
import type { TaskRun } from "./task-run.js";
import { testsGate } from "./tests-gate.js";
import { transition } from "./transition.js";

/** How executing a task ended: done (it succeeded or failed), or left running for a later resume. */
export type TaskEnd = { kind: "done"; ok: boolean } | { kind: "detached" };

const DETACHED: TaskEnd = { kind: "detached" };

/**
 * Runs one task to its end: worktree, every attempt in a fresh session, gates, artifacts.
 * `resume`: the task was started by an earlier process (state.json says so); its worktree is
 * reused and its live or finished attempt is adopted, never launched a second time.
 */
export async function executeTask(ctx: RunContext, taskId: string, resume = false): Promise<TaskEnd> {
  const t = ctx.tasks.get(taskId)!;
  const p = ctx.plans.get(taskId)!;
  const reuse = resume && (t.startCommit !== null || !ctx.git);
  t.startedAt ??= ctx.now();
  t.session = sessionName(ctx.runId, taskId);

  if (ctx.stop.detaching) return DETACHED;
  if (reuse && p.worktree !== null && !existsSync(p.worktree))
    return fail(ctx, t, "lost", `its worktree ${p.worktree} vanished while termorch was not running`);
  if (ctx.git && p.worktree !== null && p.branch !== null && !reuse) {
    t.branch = p.branch;
    const prepared = await ctx.workspace
      .prepare({
        repo: ctx.git.root,
        path: p.worktree,
        branch: p.branch,
        base: ctx.git.baseCommit,
        deps: p.dependencies.map((d) => ({ task: d, branch: taskBranch(ctx.runId, d) })),
        include: [...p.includeInRepo],
        copy: [...p.copyInRepo],
        identity: ctx.identity,
        trailers: trailersOf(ctx, taskId),
        // An earlier process of this run may have died while preparing this task, before it
        // recorded the start commit (so nothing was launched): its branch and worktree are taken
        // over when they provably hold nothing else.
        reclaim: ctx.resumed,
        pool: ctx.pool ?? undefined,
        hooks: prepareHooks(ctx.fault, taskId),
      })
      .catch((error: unknown) => ({ ok: false as const, error }));
    if (!prepared.ok) {
      t.session = null;
      if ("conflict" in prepared) {
        ctx.depConflicts.push(prepared.conflict);
        return fail(ctx, t, "conflict", `its dependencies conflict: ${prepared.conflict.detail}`);
      }
      t.branch = null;
      return fail(
        ctx,
        t,
        "launch_error",
        `could not prepare its worktree: ${ctx.redactor.redact(errorText(prepared.error))}`,
      );
    }
    t.startCommit = prepared.startCommit;
    await ctx.ledger.append(
      "task.worktree",
      { branch: t.branch, start_commit: t.startCommit, path: p.worktree, reused: prepared.reused },
      taskId,
    );
    ctx.journal.write(t);
  }
  // Another task's failure may have stopped the run (--fail-fast, cancel) while this one was
  // being prepared: a task that never launched is skipped, not failed.
  if (ctx.stop.ending && !(resume && t.attemptDir)) {
    await transition(ctx, t, {
      to: "skipped",
      reason: "cancelled",
      detail: "the run stopped before it started",
    });
    return { kind: "done", ok: false };
  }
  if (!(resume && t.attemptDir)) {
    // A re-run in the same folder starts from an empty artifacts folder.
    if (existsSync(p.artifactsDir)) rmSync(p.artifactsDir, { recursive: true, force: true });
    mkdirSync(p.artifactsDir);
  }

  let adopting = resume && t.attemptDir !== null;
  for (;;) {
    let attempt: AttemptResult | "detached";
    if (adopting) {
      adopting = false;
      attempt = await adoptAttempt(ctx, t, p);
    } else {
      // The daemon is shutting down: nothing new starts; the task stays as state.json has it.
      if (ctx.stop.detaching) return DETACHED;
      t.attempts += 1;
      if (t.attempts > 1 && ctx.git && p.worktree !== null && t.startCommit) {
        // A retry starts from the same base: drop what the failed attempt left in the worktree.
        await ctx.workspace.reset(p.worktree, t.startCommit, p.keepInRepo);
        t.commit = null;
      }
      const setup = await runSetup(ctx, t, p);
      if (setup === "detached") return DETACHED;
      attempt = setup ?? (await runAttempt(ctx, t, p));
    }
    if (attempt === "detached") return DETACHED;
    let { reason, detail } =
      attempt.record && p.output ? agentOutcome(ctx, t, p, p.output, attempt) : attempt;
    if (reason === null) {
      const gated = await runGates(ctx, t, p);
      if (gated === "detached") return DETACHED;
      ({ reason, detail } = gated);
    } else t.gates = [...setupGates(t), coreGate(attempt.record, reason)];
    t.exitCode = attempt.record?.exit_code ?? null;
    if (reason === null) {
      await collectArtifacts(ctx, t, p);
      await transition(ctx, t, { to: "success" });
      await killPoint(ctx.fault, "kill-after-status", t.id);
      // Its work is on its branch: the worktree can serve the run's next tasks (the warm pool).
      if (ctx.pool && p.worktree !== null && t.startCommit && !ctx.keepBranches)
        ctx.pool.giveLater(p.worktree, t.startCommit);
      return { kind: "done", ok: true };
    }
    // A worktree that is gone cannot be reset for another attempt.
    const gone = p.worktree !== null && !existsSync(p.worktree);
    if (reason === "cancelled" || ctx.stop.ending || t.attempts >= p.attempts || gone) {
      await collectArtifacts(ctx, t, p);
      return fail(ctx, t, reason, detail);
    }
    t.detail = detail;
    ctx.log.info({ task: taskId, attempt: t.attempts, reason }, "task failed; retrying in a fresh session");
    await ctx.ledger.append("task.retrying", { attempt: t.attempts, reason, detail }, taskId);
    await ctx.runner.close([t.session]);
  }
}

/** One attempt's end: its exit record (null: it never started) and what it means. */
interface AttemptResult extends AttemptOutcome {
  record: ExitRecord | null;
}

/**
 * What the agent's CLI said about its work (a preset's JSON on stdout, read from the log, which
 * is redacted already): kept on the task, and an error it reported while exiting 0 fails the
 * attempt with reason agent_error.
 */
function agentOutcome(
  ctx: RunContext,
  t: TaskRun,
  p: Pick<TaskPlan, "usageFile" | "sessions" | "env" | "cwd">,
  format: OutputFormat,
  attempt: AttemptResult,
): AttemptOutcome {
  let { result, usage } = parseAgentOutput(format, readLogTail(join(ctx.runDir, t.logs!.stdout)), {
    // Up to 16 MiB each: only what the CLI's parser reads.
    stderr: SIDE_OUTPUTS[format].includes("stderr") ? readLogTail(join(ctx.runDir, t.logs!.stderr)) : "",
    usageFile: SIDE_OUTPUTS[format].includes("usageFile") ? readLogTail(p.usageFile) : "",
  });
  // What its output leaves out (cn prints neither tokens nor a session id), from the session its
  // CLI kept.
  const found =
    p.sessions !== null && (usage === null || result?.session_id === null)
      ? findSession(p.sessions, { env: p.env, cwd: p.cwd, since: t.attemptStartedAt ?? 0 })
      : null;
  if (found) {
    const session = parseTranscript(found.format, ctx.redactor.redact(readLogTail(found.path)));
    usage = usage ?? session.usage;
    if (result && result.session_id === null)
      result = { ...result, session_id: session.result?.session_id ?? null };
  }
  t.agentResult = result;
  t.usage = addUsage([t.usage, usage]);
  if (attempt.reason !== null || !result?.is_error) return attempt;
  return {
    reason: "agent_error",
    detail: `its agent reported an error while exiting 0${result.summary ? `: ${result.summary.slice(0, 500)}` : ""}`,
  };
}

/**
 * An interactive agent's account of its work, from the transcript its CLI keeps of the session
 * (redacted here: it is the CLI's file, not a log of termorch's).
 */
function readTranscript(
  ctx: RunContext,
  t: TaskRun,
  transcript: { format: TranscriptFormat; path: string } | null,
): void {
  if (!transcript) return;
  const { result, usage } = parseTranscript(
    transcript.format,
    ctx.redactor.redact(readLogTail(transcript.path)),
  );
  if (result) t.agentResult = result;
  t.usage = addUsage([t.usage, usage]);
}

/** A log's text, or its last 16 MiB (a CLI's final result is at its end). */
function readLogTail(path: string): string {
  const MAX = 16 * 1024 * 1024;
  try {
    const size = statSync(path).size;
    if (size <= MAX) return readFileSync(path, "utf8");
    const fd = openSync(path, "r");
    try {
      const buf = Buffer.alloc(MAX);
      readSync(fd, buf, 0, MAX, size - MAX);
      return buf.toString("utf8");
    } finally {
      closeSync(fd);
    }
  } catch {
    return "";
  }
}

/** The agent's environment for this attempt. */
function attemptEnv(p: TaskPlan, t: TaskRun): Record<string, string> {
  return { ...p.env, TERMORCH_ATTEMPT: String(t.attempts) };
}

async function runAttempt(ctx: RunContext, t: TaskRun, p: TaskPlan): Promise<AttemptResult | "detached"> {
  newLogs(ctx, t, p);
  t.attemptDir = attemptDirOf(ctx, t.id, t.attempts);
  t.attemptStartedAt = ctx.now();
  // Recorded before the session exists, so an interrupted run knows which session to look for
  // (a resume also finds attempts by their folders, which the launch creates first).
  ctx.journal.write(t);
  await killPoint(ctx.fault, "kill-after-attempt-recorded", t.id);
  if (t.attempts > 1) await killPoint(ctx.fault, "kill-after-retry-recorded", t.id);
  try {
    await writePrompt(ctx, p);
    // Each attempt starts from the files termorch gives its CLI (its plugin: opencode's, pi's).
    const configDir = p.interactive?.events?.configDir;
    if (configDir)
      for (const [name, content] of Object.entries(configDir.files)) {
        mkdirSync(dirname(join(configDir.path, name)), { recursive: true, mode: 0o700 });
        await writeFile(join(configDir.path, name), content, { mode: 0o600 });
      }
    // Its CLI writes it afresh (copilot's usage): none of an earlier attempt's is counted again.
    mkdirSync(dirname(p.usageFile), { recursive: true, mode: 0o700 });
    rmSync(p.usageFile, { force: true });
    // Each attempt fills a fresh template, as it starts from a fresh worktree.
    if (p.handoff) {
      mkdirSync(dirname(p.handoff), { recursive: true });
      await writeFile(p.handoff, handoffTemplate(t.id), { mode: 0o600 });
    }
  } catch (error) {
    const detail = `could not write its prompt: ${ctx.redactor.redact(errorText(error))}`;
    return { record: null, reason: "launch_error", detail };
  }
  return launchAndWatch(ctx, t, p);
}

function newLogs(ctx: RunContext, t: TaskRun, p: TaskPlan): void {
  const stem = ctx.logNames.next(p.agent, ctx.now());
  t.logs = { stdout: `logs/${stem}.out`, stderr: `logs/${stem}.err` };
}

/** `<run-dir>/.termorch/<run>/tasks/<task>/<attempt>`: where an attempt's supervisor files and exit record live. */
export function attemptDirOf(ctx: Pick<RunContext, "privateDir">, taskId: string, attempt: number): string {
  return join(ctx.privateDir, "tasks", taskId, String(attempt));
}

async function launchAndWatch(ctx: RunContext, t: TaskRun, p: TaskPlan): Promise<AttemptResult | "detached"> {
  let running: RunningAttempt;
  try {
    running = await ctx.runner.launch({
      runId: ctx.runId,
      taskId: t.id,
      attempt: t.attempts,
      session: t.session!,
      argv: t.argv,
      env: attemptEnv(p, t),
      cwd: p.cwd,
      tty: p.tty,
      ...(p.prompt.delivery === "stdin" && !p.tty ? { stdin: p.prompt.file } : {}),
      stdoutLog: join(ctx.runDir, t.logs!.stdout),
      stderrLog: join(ctx.runDir, t.logs!.stderr),
      attemptDir: t.attemptDir!,
      redact: ctx.redactSources,
      maxLogBytes: ctx.maxLogBytes,
      ...(p.memoryMb ? { memoryMb: p.memoryMb } : {}),
      killGraceMs: ctx.killGraceMs,
      // For hosts whose cgroups a manager owns (and to test what works without one).
      ...(ctx.processEnv.TERMORCH_CGROUP === "off" ? { cgroup: false } : {}),
      // Kept when the run ends (its tasks folder is removed), so that clean finds what a killed
      // supervisor left there.
      cgroupRecord: cgroupRecordOf(ctx.privateDir, t.id, t.attempts),
    });
  } catch (error) {
    const detail = `could not start its tmux session: ${ctx.redactor.redact(errorText(error))}`;
    await writeFile(join(ctx.runDir, t.logs!.stderr), `termorch: ${detail}\n`, { flag: "a", mode: 0o600 });
    return { record: null, reason: "launch_error", detail };
  }
  await ctx.ledger.append(
    "task.launched",
    { attempt: t.attempts, session: t.session, argv: t.argv, cwd: p.cwd, logs: t.logs },
    t.id,
  );
  await transition(ctx, t, { to: "running" });
  await killPoint(ctx.fault, "kill-while-running", t.id);
  return watchAttempt(ctx, t, p, running);
}

/**
 * Picks up an attempt an earlier process launched: a finished one from its exit record, a live
 * one by watching its session. An attempt that was recorded but never got a session (the
 * process died in between) is launched now, under the same attempt number and session name.
 */
async function adoptAttempt(ctx: RunContext, t: TaskRun, p: TaskPlan): Promise<AttemptResult | "detached"> {
  const adopted = await ctx.runner.adopt({
    session: t.session!,
    attemptDir: t.attemptDir!,
    runId: ctx.runId,
    taskId: t.id,
    attempt: t.attempts,
    running: t.state === "running",
  });
  if (adopted === null) {
    if (!t.logs) newLogs(ctx, t, p);
    t.attemptStartedAt ??= ctx.now();
    return launchAndWatch(ctx, t, p);
  }
  const { attempt, finished, live } = adopted;
  await ctx.ledger.append("task.adopted", { attempt: t.attempts, session: t.session, finished, live }, t.id);
  if (t.state !== "running") await transition(ctx, t, { to: "running" });
  return watchAttempt(ctx, t, p, attempt);
}

/**
 * Waits for the attempt's end, ending it on its timeout (a resumed attempt keeps its original
 * deadline) or when the run stops; a detach lets go of it instead, still running.
 */
async function watchAttempt(
  ctx: RunContext,
  t: TaskRun,
  p: TaskPlan,
  running: RunningAttempt,
): Promise<AttemptResult | "detached"> {
  ctx.onChange();
  const interactive = p.interactive
    ? watchInteractive(ctx, t, { ...p, interactive: p.interactive }, running)
    : null;
  let timedOut = false;
  let stopped = false;
  const elapsed = ctx.now() - (t.attemptStartedAt ?? ctx.now());
  const timer =
    p.timeoutS === undefined
      ? null
      : setTimeout(
          () => {
            timedOut = true;
            void running.stop(ctx.killGraceMs);
          },
          Math.max(0, p.timeoutS * 1000 - elapsed),
        );
  let unsubscribe = (): void => {};
  const detached = new Promise<"detached">((resolve) => {
    unsubscribe = ctx.stop.onChange(() => {
      // A detach wins even over a stop already sent: the agent is left to the resumed run.
      if (ctx.stop.detaching) resolve("detached");
      else if (ctx.stop.ending && !stopped) {
        stopped = true;
        void running.stop(ctx.killGraceMs);
      }
    });
  });
  const record = await Promise.race([running.exited, detached]);
  if (timer) clearTimeout(timer);
  unsubscribe();
  interactive?.dispose();
  if (record === "detached") {
    // Stop watching (its watchers would keep this process alive); the agent keeps running.
    running.release();
    return "detached";
  }
  // The supervisor removes the agent's cgroup when it ends; one that is still recorded was left by
  // a supervisor that was killed (the attempt is then lost), and still holds what the agent started.
  const left = await endRecordedCgroup(cgroupRecordOf(ctx.privateDir, t.id, t.attempts), ctx.killGraceMs);
  if (left)
    ctx.log.info(
      { task: t.id, attempt: t.attempts, processes: left },
      "ended what the attempt left in its cgroup",
    );
  await ctx.ledger.append("task.exited", { attempt: t.attempts, ...record }, t.id);
  await killPoint(ctx.fault, "kill-after-exit", t.id);
  if (interactive) readTranscript(ctx, t, interactive.transcript());
  // Ended by termorch as done (`termorch finish`, done_when): its exit counts as exit 0.
  const done = interactive?.endedAsDone && !timedOut && !stopped && !record.launch_failed;
  if (done) return { record, reason: null, detail: null };
  // Ended by termorch because it never took its prompt.
  const failure = !timedOut && !stopped ? interactive?.failure : null;
  if (failure) return { record, reason: failure.reason, detail: ctx.redactor.redact(failure.detail) };
  const outcome = classifyExit(
    record.detail === undefined ? record : { ...record, detail: ctx.redactor.redact(record.detail) },
    { timeoutS: timedOut ? (p.timeoutS ?? null) : null, stopped },
  );
  return { record, ...outcome };
}

/**
 * Per-task gates in the README's order (docs/ARCHITECTURE.md: the pipeline), after the core gate
 * passed: the commit, required_artifacts, allowed_paths, tests_cmd. Returns the failing reason.
 */
async function runGates(ctx: RunContext, t: TaskRun, p: TaskPlan): Promise<AttemptOutcome | "detached"> {
  const gates: Gate[] = [
    ...setupGates(t),
    { name: "core", required: true, passed: true, detail: "exit code 0" },
  ];
  t.gates = gates;
  const failed = (reason: Reason, detail: string): AttemptOutcome => ({ reason, detail });
  if (ctx.git && p.worktree !== null) {
    // Without its worktree there is nothing to commit or check, and git cannot even start there.
    if (!existsSync(p.worktree)) {
      const detail = `its worktree ${p.worktree} was deleted while the agent ran (by the agent?); its work is lost`;
      gates.push({ name: "commit", required: true, passed: false, detail });
      return failed("lost", detail);
    }
    // Before the commit: a secret the agent wrote into its work must not reach a commit of termorch's.
    let secrets: Gate | null = null;
    let secretsError: unknown = null;
    if (t.startCommit)
      secrets = await secretsGate(ctx, p.worktree, t.startCommit, p.keepInRepo).catch((error: unknown) => {
        secretsError = error;
        return null;
      });
    if (secrets) {
      gates.push(secrets);
      if (!secrets.passed) return failed("validation", secrets.detail);
    }
    try {
      t.commit = await commitOnTaskBranch(ctx, t, p.worktree, {
        message: withTrailers(
          `termorch: task ${t.id} (agent ${p.agent}, run ${ctx.runId})`,
          trailersOf(ctx, t.id),
        ),
        exclude: [...p.keepInRepo],
        scratch: p.scratch,
        ...(t.startCommit ? { start: t.startCommit } : {}),
        identity: ctx.identity,
      });
    } catch (error) {
      const detail = `could not commit its changes: ${ctx.redactor.redact(errorText(error))}`;
      gates.push({ name: "commit", required: true, passed: false, detail });
      return failed("validation", detail);
    }
    // The commit worked where the look for secrets could not (git failed there): nothing is let through unseen.
    if (secretsError !== null) {
      const detail = `could not look for secrets in its changes: ${ctx.redactor.redact(errorText(secretsError))}`;
      gates.push({ name: "secrets", required: true, passed: false, detail });
      return failed("validation", detail);
    }
  }
  const required = p.criteria.requiredArtifacts;
  const changes = await changesGate(ctx, t, p);
  gates.push(changes);
  if (changes.passed === false) return failed("no_changes", changes.detail);
  if (p.handoff) {
    const handoff = await handoffGate(ctx, t, p.handoff, join(p.artifactsDir, "handoff.md"));
    gates.push(handoff);
    if (handoff.passed === false) return failed("validation", handoff.detail);
  }
  const failures: string[] = [];
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
    for (const pattern of required)
      if ((await findMatches(p.cwd, pattern, p.include)).length === 0) missing.push(pattern);
    const passed = missing.length === 0;
    gates.push({
      name: "required_artifacts",
      required: true,
      passed,
      detail: passed ? `present: ${required.join(", ")}` : `missing: ${missing.join(", ")}`,
    });
    if (!passed) failures.push(`required artifacts missing: ${missing.join(", ")}`);
  }

  const allowed = p.criteria.allowedPaths;
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
    const changed = inWorkspace(ctx, await ctx.workspace.changedFiles(ctx.git.root, t.startCommit, t.commit));
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

  const testsCmd = p.criteria.testsCmd;
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
      cwd: p.cwd,
      env: attemptEnv(p, t),
      timeoutS: p.timeoutS,
      logName: `tests-${t.id}`,
      taskId: t.id,
    });
    if (gate === "detached") return "detached";
    gates.push(gate);
    if (!gate.passed) failures.push(`tests_cmd failed (${gate.detail})`);
  }
  if (failures.length === 0) return { reason: null, detail: null };
  return failed("validation", failures.join("; "));
}

/**
 * An agent that exits 0 having done nothing (codex when its patch did not apply; an interactive
 * agent whose prompt never arrived) must not pass as done: no diff against its start and no
 * commit, and none of its required artifacts, fails, unless the task says its work is no change.
 */
async function changesGate(ctx: RunContext, t: TaskRun, p: TaskPlan): Promise<Gate> {
  const gate = (passed: boolean | null, detail: string): Gate => ({
    name: "changes",
    required: p.expectChanges,
    passed,
    detail,
  });
  if (!p.expectChanges) return gate(null, "not checked: expect_changes is false");
  if (!ctx.git || !t.startCommit || !t.commit)
    return gate(null, "not checked: the workspace is not a git repository");
  if (t.commit !== t.startCommit) return gate(true, `committed ${t.commit.slice(0, 12)}`);
  for (const pattern of p.criteria.requiredArtifacts)
    if ((await findMatches(p.cwd, pattern, p.include)).length > 0)
      return gate(true, `no change, but its required artifact ${pattern} is there`);
  return gate(
    false,
    "its agent exited 0 having changed nothing in its worktree (no diff against its start, no commit)" +
      (p.criteria.requiredArtifacts.length ? " and produced none of its required artifacts" : "") +
      '; if that is its job, give the task or its agent "expect_changes": false',
  );
}

/**
 * The ALTO handoff the agent filled in: its required sections there, and every file it lists
 * under Files Touched one the task changed (those it left out are named, not held against it).
 */
async function handoffGate(ctx: RunContext, t: TaskRun, path: string, kept: string): Promise<Gate> {
  const gate = (passed: boolean | null, detail: string): Gate => ({
    name: "handoff",
    required: true,
    passed,
    detail,
  });
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch {
    return gate(false, "its handoff ($TERMORCH_HANDOFF) is gone: the agent was to edit it, not remove it");
  }
  // Kept with the artifacts (redacted there): the report points to it and dependents read it.
  if (kept !== path) await writeFile(kept, text, { mode: 0o600 });
  if (!ctx.verify) return gate(null, "skipped (verify: false)");
  const { missing, listed } = checkHandoff(text);
  if (missing.length) return gate(false, `its handoff lacks ${missing.join(", ")} (filled in)`);
  if (!ctx.git || !t.startCommit || !t.commit)
    return gate(true, "sections present; Files Touched not checked: no git");
  const changed = inWorkspace(ctx, await ctx.workspace.changedFiles(ctx.git.root, t.startCommit, t.commit));
  const untouched = listed.filter((f) => !changed.includes(f));
  const unlisted = changed.filter((f) => !listed.includes(f));
  const leftOut = unlisted.length ? `; changed but not listed: ${unlisted.join(", ")}` : "";
  if (untouched.length)
    return gate(false, `its handoff lists files the task did not change: ${untouched.join(", ")}${leftOut}`);
  return gate(true, `sections present, ${listed.length} files listed, all changed${leftOut}`);
}

/** Trailers naming the run and task on every commit termorch makes for a task. */
export function trailersOf(ctx: RunContext, taskId: string): Record<string, string> {
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
  if (branch === null) return ctx.workspace.commit(wt, o);
  try {
    return await ctx.workspace.commit(wt, { ...o, branch });
  } catch (error) {
    const head = await ctx.workspace.takeHead(wt, branch, (ref) => createdDuringRun(ctx, ref));
    if (!head.moved) throw error;
    if (head.from !== null && !t.refsCreated.includes(head.from))
      t.refsCreated = [...t.refsCreated, head.from];
    await ctx.ledger.append("task.head_taken", { from: head.from, branch, commit: head.commit }, t.id);
    return ctx.workspace.commit(wt, { ...o, branch });
  }
}

/** artifacts/<task>/: what the agent wrote there, changes.patch, copies of required artifacts, handoff.md. */
async function collectArtifacts(ctx: RunContext, t: TaskRun, p: TaskPlan): Promise<void> {
  const { cwd, artifactsDir } = p;
  try {
    if (ctx.git && t.startCommit && t.commit) {
      // No commit of its own: the patch is empty, and no git process is needed to say so.
      const patch =
        t.commit === t.startCommit
          ? Buffer.alloc(0)
          : await ctx.workspace.diffPatch(ctx.git.root, t.startCommit, t.commit);
      // Redacted as bytes: a binary patch stays byte-exact.
      const redacted = ctx.redactor.redactBytes(patch);
      await writeFile(join(artifactsDir, "changes.patch"), redacted, { mode: 0o600 });
    }
    for (const pattern of p.criteria.requiredArtifacts) {
      for (const match of await findMatches(cwd, pattern, p.include)) {
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
    // Names first: an agent may name what it leaves here after a secret, and the list of
    // artifacts goes into the report and state.json.
    if (readdirSync(artifactsDir).length > 0) await redactNames(artifactsDir, ctx.redactor);
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

/** A task that ran (or tried to) and failed: its reason and detail. */
export async function fail(
  ctx: RunContext,
  t: TaskRun,
  reason: Reason,
  detail: string | null,
): Promise<TaskEnd> {
  await transition(ctx, t, { to: "failed", reason, detail });
  await killPoint(ctx.fault, "kill-after-status", t.id);
  return { kind: "done", ok: false };
}
