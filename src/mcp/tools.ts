import { existsSync } from "node:fs";
import { open, readFile } from "node:fs/promises";
import { basename, dirname, isAbsolute, join, resolve } from "node:path";
import type { z } from "zod";
import * as M from "../contract/mcp.js";
import { parseWith } from "../contract/parse.js";
import { Report } from "../contract/report.js";
import type { RunState } from "../contract/state.js";
import { StatusView } from "../contract/status-view.js";
import { InputError } from "../errors.js";
import { HANDOFF_FILE } from "../fs/names.js";
import { agentRows } from "../input/agent-binaries.js";
import { loadConfig, loadConfigOrProblems } from "../input/config-file.js";
import { readJsonFile } from "../input/json-file.js";
import { decide } from "../ops/approval.js";
import { requestCancel, waitForReport } from "../ops/cancel.js";
import { findReport } from "../ops/find-report.js";
import { requestFinish, sendInputOf, sendToTask } from "../ops/interactive.js";
import { plainText } from "../ops/last-line.js";
import { driverAlive } from "../ops/liveness.js";
import { logPathOf } from "../ops/logs.js";
import { runScope, scopeStatus } from "../ops/run-feed.js";
import { phaseOf, readRunState, resolveRun, startedRun, unreadableRun } from "../ops/runs.js";
import { sessionsBySocket } from "../ops/sessions.js";
import { runView } from "../ops/status.js";
import { requestStop } from "../ops/stop.js";
import { findTask } from "../ops/task-target.js";
import { DEFAULT_PLAN_TRIES, planObjective } from "../planning/plan-objective.js";
import { isSecretName } from "../redact/redactor.js";
import { gitSightOf } from "../run/run-dir.js";
import { type Validated, validateAssignments } from "../run/validate.js";
import { budgetOf } from "../spend/budget.js";
import { changeIn, cursorText, parseCursor, readChanges, taskSummary } from "./follow.js";
import { type Apart, secretsApart } from "./secrets-apart.js";
import { dropInInbox, dropInline, keepInline, keepObjective, runFlags, startDriver } from "./start-run.js";

type Env = Readonly<Record<string, string | undefined>>;

/** What a tool call may use besides its arguments. */
export interface ToolCall {
  env: Env;
  /** termorch mcp's working folder: relative paths are taken from it. */
  cwd: string;
  /** `--home`: runs go to that daemon, and `status` lists its runs. */
  home: string | null;
  /** Aborted when the client cancels the call or goes away. */
  signal: AbortSignal;
  /** An MCP progress notification, when the client asked for them. */
  progress: (progress: number, total: number, message: string) => Promise<void>;
}

export interface Tool<I extends z.ZodType, O extends z.ZodType> {
  name: string;
  title: string;
  description: string;
  input: I;
  output: O;
  /** Changes nothing: clients may call it without asking. */
  readOnly: boolean;
  call: (args: z.infer<I>, call: ToolCall) => Promise<z.infer<O>>;
}

const tool = <I extends z.ZodType, O extends z.ZodType>(t: Tool<I, O>): Tool<I, O> => t;

/** The folder relative paths of a call are taken from. */
function cwdOf(args: { cwd?: string | undefined }, call: ToolCall): string {
  return args.cwd === undefined ? call.cwd : resolve(call.cwd, args.cwd);
}

/** The assignments a call names: its file, or the inline document kept in a file of its own. */
interface Source {
  file: string;
  inline: boolean;
  /** The environment its run gets: the call's, plus the secret values kept out of an inline document. */
  env: Env;
}

async function sourceOf(
  args: {
    assignments?: Record<string, unknown> | undefined;
    path?: string | undefined;
    config?: string | undefined;
  },
  cwd: string,
  env: Env,
): Promise<Source> {
  oneOf("assignments", args.assignments, "path", args.path);
  if (args.path !== undefined) return { file: resolve(cwd, args.path), inline: false, env };
  const apart = await withoutSecrets(args.assignments!, args.config, cwd, env);
  return { file: await keepInline(apart.doc), inline: true, env: { ...env, ...apart.env } };
}

/** A call gives what it names inline (`inline`) or as a file (`file`): exactly one of them. */
function oneOf(inline: string, given: unknown, file: string, path: unknown): void {
  if ((given === undefined) === (path === undefined))
    throw new InputError(
      [
        {
          message: `give the ${inline} either inline ("${inline}") or as a file ("${file}"); ${path === undefined ? "neither was" : "both were"} given`,
        },
      ],
      "Call again with one of them.",
    );
}

/** secretsApart with the secret names of the config the call would use. */
async function withoutSecrets(
  doc: Record<string, unknown>,
  config: string | undefined,
  cwd: string,
  env: Env,
): Promise<Apart> {
  const loaded = await loadConfigOrProblems(
    config === undefined ? undefined : resolve(cwd, config),
    env,
    cwd,
  );
  const { secret_name_fragments: fragments, secret_env: names } = loaded.config;
  const apart = secretsApart(doc, (name) => isSecretName(name, fragments, names));
  if (apart.problems.length > 0)
    throw new InputError(
      apart.problems.map((p) => ({ file: INLINE, ...p })),
      "Pass a secret as NAME=VALUE in environment.env_vars (its value reaches the run without being written down), or set it in termorch mcp's environment and list NAME alone.",
    );
  return apart;
}

/** The inline document's file as the caller knows it: by what it is, not where termorch keeps it. */
const INLINE = "(inline assignments)";

const validate = tool({
  name: "validate",
  title: "Check an assignments document",
  description:
    "Check an assignments document without running it: schema, dependency graph, paths inside the workspace, agents (and that their CLIs are installed), sandbox, and the workspace's git state. Answers every problem at once (file, field, task, message), or the plan: waves of tasks that can run in parallel, the critical path, and what each task will run. Call it before `run`; fix each problem it lists.",
  input: M.ValidateInput,
  output: M.ValidateOutput,
  readOnly: true,
  async call(args, call) {
    const cwd = cwdOf(args, call);
    let source: Source | null = null;
    try {
      source = await sourceOf(args, cwd, call.env);
      const { input, waves, criticalPath, collisions } = await checked(source, args.config, cwd);
      return {
        valid: true,
        problems: [],
        hint: null,
        run_id: input.runId,
        workspace: input.workspace,
        waves,
        critical_path: criticalPath,
        collisions,
        tasks: input.tasks.map(({ task, agents: [{ agent }, ...others] }) => {
          // Its escalation list: not the fallbacks of its rate limit, nor its reviewer.
          const later = others.filter((a) => a.escalation?.list === "task" || a.escalation?.list === "agent");
          const argvOf = (a: typeof agent) => (task.interactive ? a.interactive.command : a.command);
          return {
            id: task.id,
            agent: task.agent,
            source: agent.source,
            argv: argvOf(agent),
            escalation: later.map((e) => ({ agent: e.name, argv: argvOf(e.agent) })),
            interactive: task.interactive ?? false,
            dependencies: task.dependencies,
          };
        }),
      };
    } catch (error) {
      if (!(error instanceof InputError)) throw error;
      return {
        valid: false,
        problems: error.problems,
        hint: error.hint,
        run_id: null,
        workspace: null,
        waves: [],
        critical_path: [],
        collisions: [],
        tasks: [],
      };
    } finally {
      if (source?.inline) await dropInline(source.file);
    }
  },
});

/** validateAssignments, an inline document's problems named by what it is rather than by its file. */
async function checked(source: Source, config: string | undefined, cwd: string): Promise<Validated> {
  const { file, inline, env } = source;
  try {
    return await validateAssignments({
      file,
      config: config === undefined ? undefined : resolve(cwd, config),
      env,
      cwd,
      ...(inline ? { baseDir: cwd } : {}),
    });
  } catch (error) {
    if (!(error instanceof InputError) || !inline) throw error;
    throw new InputError(
      error.problems.map((p) => ({
        ...p,
        ...(p.file === file ? { file: INLINE } : {}),
        message: p.message.replaceAll(file, INLINE),
      })),
      error.hint,
    );
  }
}

const run = tool({
  name: "run",
  title: "Start a run",
  description:
    "Start running an assignments document: each task's agent in its own tmux session and git worktree, in dependency order, then the merge and the report. Answers at once with the run's id and folder; the run belongs to a detached termorch process (or the daemon), so it goes on even if this MCP server or its client ends. Follow it with `wait`, then read `report`. Invalid input is refused with its problems and nothing starts.",
  input: M.RunInput,
  output: M.RunOutput,
  readOnly: false,
  async call(args, call) {
    const cwd = cwdOf(args, call);
    if (call.home !== null) return runByDaemon(args, call.home, cwd, call.env);
    const source = await sourceOf(args, cwd, call.env);
    try {
      // Checked here first, so that bad input is answered with its problems, one by one.
      await checked(source, args.config, cwd);
      // An inline document has no folder of its own that a run could hold: in a repository its
      // runs go apart (.termorch/runs/<run_id>), elsewhere each into the folder kept for it.
      const apart = !source.inline || args.out !== undefined || (await gitSightOf(cwd)) !== null;
      return await startDriver({
        file: source.file,
        baseDir: source.inline ? cwd : null,
        flags: [...runFlags(args, cwd), ...(apart ? [] : ["--out", dirname(source.file)])],
        env: source.env,
        cwd,
      });
    } catch (error) {
      // A run that never started needs no copy of its document; one that started keeps it for a resume.
      if (source.inline) await dropInline(source.file);
      throw error;
    }
  },
});

async function runByDaemon(args: M.RunInput, home: string, cwd: string, env: Env): Promise<M.RunOutput> {
  const options = Object.keys(M.RunOptions).filter((k) => args[k as keyof M.RunInput] !== undefined);
  if (args.config !== undefined) options.push("config");
  if (options.length > 0)
    throw new InputError(
      [
        {
          message: `the daemon of ${home} runs with its own settings: ${options.join(", ")} cannot be given`,
        },
      ],
      "Leave them out, or start termorch mcp without --home to run with them.",
    );
  if (args.path !== undefined) {
    const file = resolve(cwd, args.path);
    const text = await readFile(file, "utf8").catch((error: Error) => {
      throw new InputError([{ file, message: `cannot read it: ${error.message}` }]);
    });
    let doc: unknown;
    try {
      doc = JSON.parse(text);
    } catch (error) {
      throw new InputError([{ file, message: `not JSON: ${(error as Error).message}` }]);
    }
    if (doc === null || typeof doc !== "object" || Array.isArray(doc))
      throw new InputError([{ file, message: "not a JSON object" }]);
    return toDaemon(home, doc as Record<string, unknown>, join(file, ".."), env);
  }
  if (args.assignments === undefined)
    throw new InputError([{ message: 'give the assignments inline ("assignments") or as a file ("path")' }]);
  return toDaemon(home, args.assignments, cwd, env);
}

/** A document for the daemon's inbox: written down there, so without secret values. */
async function toDaemon(
  home: string,
  doc: Record<string, unknown>,
  baseDir: string,
  env: Env,
): Promise<M.RunOutput> {
  const apart = await withoutSecrets(doc, undefined, baseDir, env);
  const given = Object.keys(apart.env);
  if (given.length > 0)
    throw new InputError(
      given.map((name) => ({
        field: "environment.env_vars",
        message: `${name} is given a value, which would be written into the daemon's inbox; the daemon passes on its own environment's ${name}`,
      })),
      `List ${given.join(", ")} by name alone, with the value set in the daemon's environment.`,
    );
  return dropInInbox({ home, doc, baseDir });
}

const status = tool({
  name: "status",
  title: "Show runs and their tasks",
  description:
    "The state of one run or of every run: for each task its state (pending, running, redo, success, failed, skipped), why it failed, attempts, times, last log line, whether it waits for input, and how to attach. The same document as `termorch status --json`.",
  input: M.StatusInput,
  output: StatusView,
  readOnly: true,
  async call(args, call) {
    // A named run that cannot be shown is the same error as for wait, report and logs.
    if (args.run !== undefined) await startedRun(args.run, call.env, call.cwd);
    return scopeStatus(
      runScope(args.run, args.run === undefined ? (call.home ?? undefined) : undefined, call.cwd),
      call.env,
      call.cwd,
    );
  },
});

/** A run found for `wait`: started (with state), or taken by a daemon that has not started it. */
async function followedRun(
  ref: string,
  call: ToolCall,
): Promise<{ runId: string; runDir: string; queued: boolean }> {
  const dir = isAbsolute(ref) || ref.includes("/") ? resolve(call.cwd, ref) : null;
  if (dir && !existsSync(join(dir, "state.json")) && existsSync(join(dir, "claim.json")))
    return { runId: basename(dir), runDir: dir, queued: true };
  const found = await startedRun(ref, call.env, call.cwd);
  return { runId: found.runId, runDir: found.runDir, queued: false };
}

/**
 * The run's state.json, read again when it looks interrupted: a driver that wrote its report and
 * exited between the read and the look at its pid is not interrupted. null: not started (queued).
 * `queued`: followed since before it started, by its folder, so whatever run starts there is it.
 */
async function stateOf(runDir: string, runId: string, queued: boolean): Promise<RunState | null> {
  for (let i = 0; ; i++) {
    const read = await readRunState(runDir);
    if ("problem" in read) {
      // A daemon's claimed run has no state yet; one refused before it started has only its report.
      if (existsSync(join(runDir, "claim.json")) || existsSync(join(runDir, "execution_report.json")))
        return null;
      // Deleted (or moved) while followed: it will never change again.
      throw unreadableRun({ runId, runDir, problem: read.problem });
    }
    if (read.state.run_id !== runId && !queued)
      throw unreadableRun({
        runId,
        runDir,
        problem: `its run directory ${runDir} now holds run ${read.state.run_id}`,
      });
    if (i > 0 || phaseOf(read.state) !== "interrupted") return read.state;
  }
}

const wait = tool({
  name: "wait",
  title: "Wait for a run to change",
  description: `Wait: block until something happens in a run (a task started, ended, retried, waits for input or got it, is redone because its result conflicted in the merge; the merge; the run finished), or until timeout_s (default 30, at most ${M.MAX_BLOCK_S}) passes. Answers what changed since the cursor of the previous answer, the run's phase, task counts by state and who waits for input. Call it again with the answer's cursor until finished is true, then call report. A task waiting for input needs send (or finish); one held for a person's decision, approve or reject.`,
  input: M.WaitInput,
  output: M.WaitOutput,
  readOnly: true,
  async call(args, call) {
    const { runId, runDir, queued } = await followedRun(args.run, call);
    const timeoutMs = (args.timeout_s ?? 30) * 1000;
    const started = Date.now();
    let cursor = parseCursor(args.cursor);
    const changes: M.RunChange[] = [];
    for (;;) {
      const runState = await stateOf(runDir, runId, queued);
      const phase: M.WaitOutput["phase"] = runState
        ? phaseOf(runState)
        : existsSync(join(runDir, "execution_report.json"))
          ? "reported"
          : "queued";
      // The ledger records the report just before it is written, and state.json says reported
      // just after. Read after the state, the ledger of a run seen reported holds run_finished;
      // read before, it could miss it, and the answer that says finished would not bring it.
      const read = await readChanges(runDir, cursor);
      cursor = read.cursor;
      changes.push(...read.changes);
      const elapsed = Date.now() - started;
      // A ledger not read to its end is not finished yet: the caller comes back for the rest.
      const settled = (phase === "reported" || phase === "interrupted") && !read.more;
      // The answer that brings run_finished waits for state.json, so that `finished` means the
      // report can be read.
      const finishing = phase === "running" && changes.some((c) => c.event === "run_finished");
      if ((changes.length > 0 && !finishing) || settled || elapsed >= timeoutMs) {
        // The tasks as status shows them (waiting for input is in their status files), once.
        const view = runState
          ? await runView(
              runState,
              (await sessionsBySocket([runState.socket], call.env)).get(runState.socket)!,
              Date.now(),
            )
          : null;
        return {
          run_id: runId,
          cursor: cursorText(cursor),
          changes,
          phase,
          finished: phase === "reported" && !read.more,
          exit_code: view?.exit_code ?? null,
          ...taskSummary(view),
          timed_out: changes.length === 0 && !settled,
        };
      }
      const counts = new Map<string, number>();
      for (const t of runState?.tasks ?? []) counts.set(t.state, (counts.get(t.state) ?? 0) + 1);
      await call.progress(
        Math.round(elapsed / 1000),
        timeoutMs / 1000,
        `run ${runId} ${phase}: ${[...counts].map(([s, n]) => `${n} ${s}`).join(", ")}`,
      );
      // Looked at again at least each second: a driver that dies announces nothing. A ledger not
      // read to its end is read on at once.
      if (!read.more) await changeIn(runDir, Math.min(1000, timeoutMs - elapsed), call.signal);
      if (call.signal.aborted) throw new Error("the call was cancelled");
    }
  },
});

const report = tool({
  name: "report",
  title: "Read a run's report",
  description:
    "The run's execution_report.json once it finished: each task's status, reason, attempts, agent result, usage, gates and artifacts; the merge's result and conflicts; the run's summary and exit code. A run still going has no report yet: wait for it first.",
  input: M.ReportInput,
  output: Report,
  readOnly: true,
  call: (args, call) => reportOf(args.run, call.env, call.cwd),
});

/** A finished run's report. */
export async function reportOf(ref: string, env: Env, cwd: string): Promise<Report> {
  const found = await findReport(ref, env, cwd);
  if (found.path === null)
    throw new InputError(
      [
        {
          message: `run ${found.runId} has no report yet: it is still running, or it stopped before it could write one`,
        },
      ],
      "Wait for it to finish (the wait tool); an interrupted run writes its report when `termorch resume` finishes it.",
    );
  return parseWith(Report, await readJsonFile(found.path, "the run's report"), found.path);
}

/** The bytes of a log's end read for a tail: enough for the lines asked, at most 1 MiB. */
const TAIL_BYTES = 1 << 20;

const logs = tool({
  name: "logs",
  title: "Read a task's output",
  description:
    "The last lines of a task's output log (stdout by default, or stderr), redacted as termorch keeps it and with terminal escapes removed. Use it to see what an agent is doing or why it failed.",
  input: M.LogsInput,
  output: M.LogsOutput,
  readOnly: true,
  async call(args, call) {
    const { state, task } = await findTask(args.task, args.run, {
      env: call.env,
      cwd: call.cwd,
      needSession: false,
    });
    const stream = args.stream ?? "stdout";
    const path = logPathOf(state, task, stream);
    if (!path)
      throw new InputError(
        [
          {
            message: `task ${args.task} of run ${state.run_id} has no log: ${task.state === "skipped" ? "it was skipped" : "it has not started"}`,
          },
        ],
        "Wait for it to start (the wait tool).",
      );
    const { text, truncated } = await tail(path, args.lines ?? 100);
    return { run_id: state.run_id, task: args.task, stream, path, text, truncated };
  },
});

async function tail(path: string, lines: number): Promise<{ text: string; truncated: boolean }> {
  const handle = await open(path, "r");
  try {
    const size = (await handle.stat()).size;
    const start = Math.max(0, size - TAIL_BYTES);
    const buffer = Buffer.alloc(size - start);
    await handle.read(buffer, 0, buffer.length, start);
    const all = buffer.toString("utf8").split(/\r?\n/);
    if (all.at(-1) === "") all.pop();
    const kept = all.slice(-lines);
    return { text: kept.map(plainText).join("\n"), truncated: start > 0 || kept.length < all.length };
  } finally {
    await handle.close();
  }
}

const send = tool({
  name: "send",
  title: "Answer a task's agent",
  description:
    "Type an answer into a running task's agent (an interactive task that waits for input): `text` is pasted as one bracketed paste, then Enter; `keys` are pressed one by one instead, for a menu (the `answers` of a waiting task name the keys of each choice). termorch never answers an agent's questions itself; this is how the caller does.",
  input: M.SendInput,
  output: M.TaskActionOutput,
  readOnly: false,
  async call(args, call) {
    const { state } = await sendToTask(args.task, args.run, sendInputOf(args.task, args), {
      env: call.env,
      cwd: call.cwd,
    });
    return { run_id: state.run_id, task: args.task, detail: "sent" };
  },
});

const finish = tool({
  name: "finish",
  title: "Finish an interactive task",
  description:
    "End a running interactive task's agent (TERM, then KILL after its grace) and count the task as done: its changes are committed and go through its gates as if the agent had exited 0. For an agent that finished its work and waits for more.",
  input: M.FinishInput,
  output: M.TaskActionOutput,
  readOnly: false,
  async call(args, call) {
    const { state } = await requestFinish(args.task, args.run, {
      env: call.env,
      cwd: call.cwd,
      now: Date.now(),
    });
    const live = driverAlive(state.pid, state.updated_at);
    return {
      run_id: state.run_id,
      task: args.task,
      detail: live
        ? "finish requested; its driver ends the agent within a second"
        : `finish requested; its driver (pid ${state.pid}) is not live, so it happens when the run is resumed`,
    };
  },
});

/** approve and reject: one call, the decision apart. */
function decision(d: "approve" | "reject") {
  return async (
    args: { run: string; task?: string | undefined; reason?: string | undefined },
    call: ToolCall,
  ): Promise<M.DecideOutput> => {
    const { state, wait } = await decide(
      args.run,
      args.task,
      { decision: d, reason: args.reason ?? null, by: "mcp" },
      { env: call.env, cwd: call.cwd, now: Date.now() },
    );
    const live = driverAlive(state.pid, state.updated_at);
    const what =
      args.task === undefined
        ? "the merge"
        : `task ${args.task}${wait.at === "start" ? "'s start" : `'s attempt ${wait.attempt}`}`;
    return {
      run_id: state.run_id,
      task: args.task ?? null,
      decision: d,
      at: wait.at,
      attempt: wait.attempt,
      driver_live: live,
      detail: `${d === "approve" ? "approved" : "rejected"} ${what}; ${
        live
          ? "its driver takes it within a second"
          : `its driver (pid ${state.pid}) is not live, so it is taken when the run is resumed (termorch resume ${state.run_dir})`
      }`,
    };
  };
}

const approve = tool({
  name: "approve",
  title: "Approve what is held for a person's decision",
  description:
    "Approve what is held for a person's decision: a task (its `approval`: its start, or its attempt's result once it passed every gate), or, without `task`, the run's merge (merge.approval). Like the command line's approve; the ledger records it as decided by mcp. `status` names what is held.",
  input: M.ApproveInput,
  output: M.DecideOutput,
  readOnly: false,
  call: decision("approve"),
});

const reject = tool({
  name: "reject",
  title: "Reject what is held for a person's decision",
  description:
    "Reject what is held for a person's decision, saying why (`reason`, required): a task's result is tried again with the reason as its next attempt's feedback (with no attempts left, or at its start, the task ends, reason rejected); without `task`, the run's merge: nothing is merged. Like the command line's reject; the ledger records it as decided by mcp.",
  input: M.RejectInput,
  output: M.DecideOutput,
  readOnly: false,
  call: decision("reject"),
});

const stop = tool({
  name: "stop",
  title: "Stop a run at its wave boundary",
  description:
    "Stop a run at its wave boundary: nothing new starts, running tasks finish, nothing is merged; the run then ends with a session handoff (handoff.json: stop_reason wave_complete, progress, resume.command, next_tasks, blockers) and exit code 5. Resuming its run directory goes on with the tasks not done, none run twice. Like the command line's stop --at-boundary; to end running agents now, use cancel.",
  input: M.StopInput,
  output: M.StopOutput,
  readOnly: false,
  call: async (args, call) => {
    const { state } = await requestStop(args.run, "mcp", { env: call.env, cwd: call.cwd, now: Date.now() });
    const live = driverAlive(state.pid, state.updated_at);
    return {
      run_id: state.run_id,
      driver_live: live,
      handoff: join(state.run_dir, HANDOFF_FILE),
      detail: live
        ? "nothing new starts; the run ends once its running tasks finish"
        : `its driver (pid ${state.pid}) is not live: termorch resume ${state.run_dir} stops at once`,
    };
  },
});

const cancel = tool({
  name: "cancel",
  title: "Cancel a run",
  description: `Cancel a run: its running agents are ended, pending tasks skipped, nothing is merged, and the report is written (exit code 130). Waits up to wait_s (default 30, at most ${M.MAX_BLOCK_S}) for the report.`,
  input: M.CancelInput,
  output: M.CancelOutput,
  readOnly: false,
  async call(args, call) {
    const found = await resolveRun(args.run, call.env, call.cwd);
    const state = found.state;
    if (!state)
      throw new InputError(
        [{ message: `run ${found.runId}: ${found.problem}` }],
        "There is nothing to cancel.",
      );
    const answer = (outcome: z.infer<typeof M.CancelOutput>["outcome"], s = state) => ({
      run_id: s.run_id,
      outcome,
      exit_code: s.exit_code,
      report: s.report,
    });
    if (state.phase === "reported") return answer("already_finished");
    const live = driverAlive(state.pid, state.updated_at);
    await requestCancel(state, { pid: process.pid, now: Date.now() });
    if (!live) return answer("driver_gone");
    const waitMs = (args.wait_s ?? 30) * 1000;
    if (waitMs === 0) return answer("requested");
    const end = await waitForReport({
      initial: state,
      timeoutMs: waitMs,
      progressMs: 2000,
      signal: call.signal,
      onProgress: (_s, elapsed) => void call.progress(Math.round(elapsed / 1000), waitMs / 1000, "stopping"),
    });
    switch (end.outcome) {
      case "reported":
      case "driver_gone":
      case "timed_out":
        return answer(end.outcome, end.state);
      default:
        return answer("requested");
    }
  },
});

const plan = tool({
  name: "plan",
  title: "Plan an objective's work",
  description:
    "Turn an objective (what you want done, in words) into an assignments document: a planner agent reads the objective and the repository, read-only, and writes the tasks, each with its context file and the paths it will own; every problem `validate` finds goes back to it until the plan is valid. Answers with the plan (waves, critical path, each task's agent and paths, predicted collisions, the planner's cost) and the file written; with `run`, starts it too. It takes as long as the planner takes: minutes with a real model.",
  input: M.PlanInput,
  output: M.PlanOutput,
  readOnly: false,
  async call(args, call) {
    const cwd = cwdOf(args, call);
    oneOf("objective", args.objective, "objective_path", args.objective_path);
    const kept = args.objective === undefined ? null : await keepObjective(args.objective);
    try {
      const config = args.config === undefined ? undefined : resolve(cwd, args.config);
      const answer = await planObjective({
        objectiveFile: kept ?? resolve(cwd, args.objective_path!),
        ...(args.agent ? { agent: args.agent } : {}),
        ...(args.out ? { out: args.out } : {}),
        ...(args.workspace ? { workspace: args.workspace } : {}),
        ...(args.max_tasks ? { maxTasks: args.max_tasks } : {}),
        ...(args.tries ? { tries: args.tries } : {}),
        budget: budgetOf({ max_cost_usd: args.max_cost_usd, max_tokens: args.max_tokens }),
        ...(args.force ? { force: true } : {}),
        ...(args.env_vars ? { envVars: args.env_vars } : {}),
        ...(config ? { configFile: config } : {}),
        env: call.env,
        cwd,
        signal: call.signal,
        onTry: (t) =>
          void call
            .progress(
              t.try,
              args.tries ?? DEFAULT_PLAN_TRIES,
              `try ${t.try}: ${t.problems.length ? `${t.problems.length} problems, given back to the planner` : "valid"}`,
            )
            .catch(() => {}),
      });
      if (!args.run) return { ...answer, started: null };
      const started =
        call.home !== null
          ? await runByDaemon({ path: answer.file, ...(config ? { config } : {}) }, call.home, cwd, call.env)
          : await startDriver({
              file: answer.file,
              baseDir: null,
              flags: config ? ["--config", config] : [],
              env: call.env,
              cwd,
            });
      return { ...answer, started };
    } finally {
      if (kept) await dropInline(kept);
    }
  },
});

const agents = tool({
  name: "agents",
  title: "List the agents",
  description:
    "Every agent a task can name in its `agent` field: the built-in presets (claude, codex, gemini, opencode, ...) and the config's own, with the command each runs, how it takes its prompt, and whether its CLI is installed here.",
  input: M.AgentsInput,
  output: M.AgentsOutput,
  readOnly: true,
  async call(args, call) {
    const cwd = cwdOf(args, call);
    const { config } = await loadConfig(
      args.config === undefined ? undefined : resolve(cwd, args.config),
      call.env,
      cwd,
    );
    return { agents: agentRows(config, call.env.PATH) };
  },
});

/** Every tool, in the order `tools/list` and `termorch mcp --help` give them. */
export const TOOLS = [
  validate,
  plan,
  run,
  status,
  wait,
  report,
  logs,
  send,
  finish,
  approve,
  reject,
  stop,
  cancel,
  agents,
] as const;
