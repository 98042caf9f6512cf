import { mkdirSync, rmSync } from "node:fs";
import { writeFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import { errorText } from "../errors.js";
import { endRecordedCgroup } from "../fs/cgroup.js";
import { writeFresh } from "../fs/no-follow.js";
import { cgroupRecordOf } from "../fs/private-dir.js";
import type { AttemptSpec, ExitRecord, RunningAttempt } from "../runner/task-runner.js";
import { cappedArgv } from "../spend/budget.js";
import { type AgentAccount, transcriptAccount } from "./agent-output.js";
import { clearDecision } from "./decision.js";
import { killPoint } from "./faults.js";
import { handoffTemplate } from "./handoff.js";
import { watchInteractive } from "./interactive.js";
import { type AttemptOutcome, classifyExit } from "./outcome.js";
import type { Ports } from "./ports.js";
import { writePrompt } from "./prompt.js";
import type { TaskRecorder } from "./recorder.js";
import { type RetriedTooLong, watchRetrying } from "./retry-watch.js";
import type { RunPlan } from "./run-plan.js";
import { agentWork, endSandbox, sandboxDirOf, sandboxFor } from "./sandbox.js";
import { usdLeftFor } from "./spend.js";
import { ENDED_AT_BUDGET, spendSource, watchSpend } from "./spend-watch.js";
import type { RunStop } from "./stop.js";
import { type AgentPlan, handoffPlace, type TaskPlan } from "./task-plan.js";
import type { TaskRun } from "./task-run.js";

/** One attempt's end: its exit record (null: it never started) and what it means. */
export interface AttemptResult extends AttemptOutcome {
  record: ExitRecord | null;
  /** An interactive agent's account of its work, from its session's transcript. */
  account?: AgentAccount | null;
}

/** How the runner bounds and cleans any agent of the run: its logs, memory, kill grace, cgroup. */
export function runnerBounds(
  run: Pick<RunPlan, "redactSources" | "maxLogBytes" | "killGraceMs" | "processEnv">,
  agent: Pick<AgentPlan, "memoryMb">,
): Pick<AttemptSpec, "redact" | "maxLogBytes" | "memoryMb" | "killGraceMs" | "cgroup"> {
  return {
    redact: [...run.redactSources],
    maxLogBytes: run.maxLogBytes,
    ...(agent.memoryMb ? { memoryMb: agent.memoryMb } : {}),
    killGraceMs: run.killGraceMs,
    // For hosts whose cgroups a manager owns (and to test what works without one).
    ...(run.processEnv.TERMORCH_CGROUP === "off" ? { cgroup: false } : {}),
  };
}

/** The agent's environment for this attempt. */
export function attemptEnv(agent: Pick<AgentPlan, "env">, attempt: number): Record<string, string> {
  return { ...agent.env, TERMORCH_ATTEMPT: String(attempt) };
}

/** `<run-dir>/.termorch/<run>/tasks/<task>/<attempt>`: where an attempt's supervisor files and exit record live. */
export function attemptDirOf(privateDir: string, taskId: string, attempt: number): string {
  return join(privateDir, "tasks", taskId, String(attempt));
}

/** The run's side of an attempt: what launching and watching one reads and works through. */
export interface AttemptSide {
  run: RunPlan;
  ports: Ports;
  stop: RunStop;
  recorder: TaskRecorder;
}

/** A new attempt of `agent`: recorded, its prompt and the CLI's files written, launched, watched to its end. */
export async function runAttempt(
  a: AttemptSide,
  t: Readonly<TaskRun>,
  p: TaskPlan,
  agent: AgentPlan,
): Promise<AttemptResult | "detached"> {
  const { run, ports, recorder } = a;
  // Recorded before the session exists, so an interrupted run knows which session to look for
  // (a resume also finds attempts by their folders, which the launch creates first).
  recorder.checkpoint(t.id, {
    result: { logs: newLogs(ports, agent) },
    current: { dir: attemptDirOf(run.privateDir, t.id, t.attempts), startedAt: ports.now() },
  });
  await killPoint(run.fault, "kill-after-attempt-recorded", t.id, t.attempts);
  if (t.attempts > 1) await killPoint(run.fault, "kill-after-retry-recorded", t.id);
  const unwritten = await writeAttemptFiles(a, t, p, agent);
  if (unwritten) return unwritten;
  return launchAndWatch(a, t, p, agent);
}

/** What an attempt starts from, written before its launch: its prompt, its CLI's files, a fresh handoff template. */
async function writeAttemptFiles(
  a: AttemptSide,
  t: Readonly<TaskRun>,
  p: TaskPlan,
  agent: Pick<AgentPlan, "interactive" | "usageFile">,
): Promise<AttemptResult | null> {
  const { run, ports, recorder } = a;
  try {
    await writePrompt(run, ports, recorder, p);
    // Each attempt starts from the files termorch gives its CLI (its plugin: opencode's, pi's).
    const configDir = agent.interactive?.events?.configDir;
    if (configDir)
      for (const [name, content] of Object.entries(configDir.files)) {
        mkdirSync(dirname(join(configDir.path, name)), { recursive: true, mode: 0o700 });
        await writeFile(join(configDir.path, name), content, { mode: 0o600 });
      }
    // Its CLI writes it afresh (copilot's usage): none of an earlier attempt's is counted again.
    mkdirSync(dirname(agent.usageFile), { recursive: true, mode: 0o700 });
    rmSync(agent.usageFile, { force: true });
    // No earlier attempt's decision is read as this one's.
    clearDecision(p.workspace);
    // Each attempt fills a fresh template, as it starts from a fresh worktree.
    if (p.gates.handoff) {
      const at = handoffPlace(p.workspace);
      writeFresh(at.root, at.rel, handoffTemplate(t.id));
    }
  } catch (error) {
    const detail = `could not write its prompt: ${ports.redactor.redact(errorText(error))}`;
    return { record: null, reason: "launch_error", detail };
  }
  return null;
}

function newLogs(
  ports: Pick<Ports, "logNames" | "now">,
  agent: Pick<AgentPlan, "name">,
): { stdout: string; stderr: string } {
  const stem = ports.logNames.next(agent.name, ports.now());
  return { stdout: `logs/${stem}.out`, stderr: `logs/${stem}.err` };
}

async function launchAndWatch(
  a: AttemptSide,
  t: Readonly<TaskRun>,
  p: TaskPlan,
  agent: AgentPlan,
): Promise<AttemptResult | "detached"> {
  const { run, ports, recorder } = a;
  let running: RunningAttempt;
  let wrap: string[] | undefined;
  try {
    if (agent.sandbox)
      wrap = await sandboxFor(
        run,
        ports,
        agent.sandbox,
        agentWork(p, agent),
        sandboxDirOf(run.privateDir, t.id, t.attempts),
      );
  } catch (error) {
    const detail = `could not set up its sandbox: ${ports.redactor.redact(errorText(error))}`;
    await writeFile(join(run.runDir, t.result.logs!.stderr), `termorch: ${detail}\n`, {
      flag: "a",
      mode: 0o600,
    });
    return { record: null, reason: "launch_error", detail };
  }
  // Only a CLI with a cap of its own is told what the budgets leave.
  const argv = agent.budgetCap
    ? cappedArgv(agent.argv, agent.budgetCap, usdLeftFor(run, recorder, p))
    : agent.argv;
  try {
    running = await ports.runner.launch({
      runId: run.runId,
      taskId: t.id,
      attempt: t.attempts,
      session: t.current.session!,
      argv: [...argv],
      env: attemptEnv(agent, t.attempts),
      cwd: p.workspace.cwd,
      tty: agent.tty,
      ...(agent.delivery === "stdin" && !agent.tty ? { stdin: p.prompt.file } : {}),
      stdoutLog: join(run.runDir, t.result.logs!.stdout),
      stderrLog: join(run.runDir, t.result.logs!.stderr),
      attemptDir: t.current.dir!,
      ...runnerBounds(run, agent),
      ...(wrap ? { wrap } : {}),
      // Kept when the run ends (its tasks folder is removed), so that clean finds what a killed
      // supervisor left there.
      cgroupRecord: cgroupRecordOf(run.privateDir, t.id, t.attempts),
    });
  } catch (error) {
    const detail = `could not start its tmux session: ${ports.redactor.redact(errorText(error))}`;
    await writeFile(join(run.runDir, t.result.logs!.stderr), `termorch: ${detail}\n`, {
      flag: "a",
      mode: 0o600,
    });
    return { record: null, reason: "launch_error", detail };
  }
  await ports.ledger.append(
    "task.launched",
    {
      attempt: t.attempts,
      session: t.current.session,
      agent: agent.name,
      argv: [...argv],
      cwd: p.workspace.cwd,
      logs: t.result.logs,
      ...(agent.sandbox
        ? {
            sandbox: {
              network:
                typeof agent.sandbox.network === "string"
                  ? agent.sandbox.network
                  : [...agent.sandbox.network],
            },
          }
        : {}),
    },
    t.id,
  );
  await recorder.transition(t.id, { to: "running" });
  await killPoint(run.fault, "kill-while-running", t.id, t.attempts);
  return watchAttempt(a, t, p, agent, running);
}

/**
 * Picks up an attempt an earlier process launched: a finished one from its exit record, a live
 * one by watching its session. An attempt that was recorded but never got a session (the
 * process died in between) is launched now, under the same attempt number and session name.
 */
export async function adoptAttempt(
  a: AttemptSide,
  t: Readonly<TaskRun>,
  p: TaskPlan,
  agent: AgentPlan,
): Promise<AttemptResult | "detached"> {
  const { run, ports, recorder } = a;
  const adopted = await ports.runner.adopt({
    session: t.current.session!,
    attemptDir: t.current.dir!,
    runId: run.runId,
    taskId: t.id,
    attempt: t.attempts,
    running: t.state === "running",
  });
  if (adopted === null) {
    recorder.note(t.id, {
      result: { logs: t.result.logs ?? newLogs(ports, agent) },
      current: { startedAt: t.current.startedAt ?? ports.now() },
    });
    // The process that recorded it may have died before writing them (a redo's prompt differs).
    const unwritten = await writeAttemptFiles(a, t, p, agent);
    if (unwritten) return unwritten;
    return launchAndWatch(a, t, p, agent);
  }
  const { attempt, finished, live } = adopted;
  await ports.ledger.append(
    "task.adopted",
    { attempt: t.attempts, session: t.current.session, finished, live },
    t.id,
  );
  if (t.state !== "running") await recorder.transition(t.id, { to: "running" });
  return watchAttempt(a, t, p, agent, attempt);
}

/**
 * Waits for the attempt's end, ending it on its timeout (a resumed attempt keeps its original
 * deadline) or when the run stops; a detach lets go of it instead, still running.
 */
async function watchAttempt(
  a: AttemptSide,
  t: Readonly<TaskRun>,
  p: TaskPlan,
  agent: AgentPlan,
  running: RunningAttempt,
): Promise<AttemptResult | "detached"> {
  const { run, ports, stop, recorder } = a;
  recorder.announce();
  const interactive = agent.interactive
    ? watchInteractive(run, ports, recorder, t, p, { ...agent, interactive: agent.interactive }, running)
    : null;
  let timedOut = false;
  let stopped = false;
  // When termorch ended it at a budget (ms), to tell that from an end it came to first.
  let overBudgetAt: number | null = null;
  let retried: RetriedTooLong | null = null;
  const retrying = watchRetrying(
    agent.output,
    p.rateLimit.max_retrying_s,
    { stdout: join(run.runDir, t.result.logs!.stdout), stderr: join(run.runDir, t.result.logs!.stderr) },
    ports.now,
    (seen) => {
      retried = seen;
      void running.stop(run.killGraceMs);
    },
  );
  const spend = watchSpend(
    run,
    ports,
    recorder,
    t,
    p,
    agent,
    spendSource(
      agent,
      {
        stdoutLog: join(run.runDir, t.result.logs!.stdout),
        cwd: p.workspace.cwd,
        since: t.current.startedAt ?? ports.now(),
      },
      interactive ? () => interactive.transcript() : null,
    ),
    () => {
      overBudgetAt = ports.now();
      void running.stop(run.killGraceMs);
    },
  );
  const elapsed = ports.now() - (t.current.startedAt ?? ports.now());
  const timer =
    agent.timeoutS === undefined
      ? null
      : setTimeout(
          () => {
            timedOut = true;
            void running.stop(run.killGraceMs);
          },
          Math.max(0, agent.timeoutS * 1000 - elapsed),
        );
  let unsubscribe = (): void => {};
  const detached = new Promise<"detached">((resolve) => {
    unsubscribe = stop.onChange(() => {
      // A detach wins even over a stop already sent: the agent is left to the resumed run.
      if (stop.detaching) resolve("detached");
      else if (stop.ending && !stopped) {
        stopped = true;
        void running.stop(run.killGraceMs);
      }
    });
  });
  const record = await Promise.race([running.exited, detached]);
  if (timer) clearTimeout(timer);
  unsubscribe();
  spend.dispose();
  retrying.dispose();
  interactive?.dispose();
  if (record === "detached") {
    // Stop watching (its watchers would keep this process alive); the agent keeps running.
    running.release();
    return "detached";
  }
  // The supervisor removes the agent's cgroup when it ends; one that is still recorded was left by
  // a supervisor that was killed (the attempt is then lost), and still holds what the agent started.
  const left = await endRecordedCgroup(cgroupRecordOf(run.privateDir, t.id, t.attempts), run.killGraceMs);
  if (left)
    ports.log.info(
      { task: t.id, attempt: t.attempts, processes: left },
      "ended what the attempt left in its cgroup",
    );
  if (agent.sandbox) {
    const note = await endSandbox(sandboxDirOf(run.privateDir, t.id, t.attempts), p.workspace);
    if (note) {
      const said = ports.redactor.redact(note);
      ports.log.warn({ task: t.id, attempt: t.attempts }, said);
      await writeFile(join(run.runDir, t.result.logs!.stderr), `termorch: ${said}\n`, {
        flag: "a",
        mode: 0o600,
      });
    }
  }
  await ports.ledger.append("task.exited", { attempt: t.attempts, ...record }, t.id);
  await killPoint(run.fault, "kill-after-exit", t.id, t.attempts);
  const account = interactive ? transcriptAccount(ports.redactor, t, interactive.transcript(), agent) : null;
  // Ended by termorch at a budget (the run's on_budget: stop), unless it had ended by itself first
  // (an adopted attempt whose log already crossed the budget).
  const budgetAt = overBudgetAt as number | null;
  const endedFirst =
    budgetAt !== null && record.finished_at !== null && Date.parse(record.finished_at) < budgetAt;
  if (budgetAt !== null && !endedFirst && !timedOut && !stopped)
    return { record, reason: "budget", detail: ENDED_AT_BUDGET, account };
  // Ended by termorch: its CLI had retried a rate limit by itself for too long.
  // Set by the watcher's callback, which the compiler does not follow.
  const gaveUp = retried as RetriedTooLong | null;
  if (gaveUp && !timedOut && !stopped)
    return {
      record,
      reason: "rate_limited",
      detail: `its CLI kept retrying a rate limit by itself for ${Math.round(gaveUp.forMs / 1000)} s, past rate_limit.max_retrying_s; termorch ended it: ${gaveUp.said}`,
      resetsAt: gaveUp.nextAt,
      account,
    };
  // Ended by termorch as done (`termorch finish`, done_when): its exit counts as exit 0.
  const done = interactive?.endedAsDone && !timedOut && !stopped && !record.launch_failed;
  if (done) return { record, reason: null, detail: null, account };
  // Ended by termorch because it never took its prompt.
  const failure = !timedOut && !stopped ? interactive?.failure : null;
  if (failure)
    return { record, reason: failure.reason, detail: ports.redactor.redact(failure.detail), account };
  const outcome = classifyExit(
    record.detail === undefined ? record : { ...record, detail: ports.redactor.redact(record.detail) },
    { timeoutS: timedOut ? (agent.timeoutS ?? null) : null, stopped },
  );
  return { record, ...outcome, account };
}
