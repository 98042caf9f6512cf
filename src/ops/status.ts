import { readdir } from "node:fs/promises";
import { isAbsolute, join } from "node:path";
import { addUsage } from "../contract/agent-result.js";
import { approvalView } from "../contract/approval.js";
import type { TaskState } from "../contract/reason.js";
import type { MergeProgress, RunState, TaskRun } from "../contract/state.js";
import { isLive, type RunView, type StatusView, type TaskView } from "../contract/status-view.js";
import { budgetStanding, spendOf } from "../spend/budget.js";
import { lastLogLine } from "./last-line.js";
import { driverAlive } from "./liveness.js";
import { type OpsRun, phaseOf, readRunState } from "./runs.js";
import type { SessionInfo } from "./sessions.js";

const FINAL: readonly string[] = ["success", "failed", "skipped"];

/** The command that attaches an operator to a task of a run. */
export function attachHint(runId: string, taskId: string): string {
  return `termorch attach ${taskId} --run ${runId}`;
}

/**
 * The command that answers a task of a run waiting for input: the keys that pick an answer of a
 * question termorch knows, or the text of the operator's own answer (TEXT). A key a shell would
 * read otherwise is quoted.
 */
export function sendHint(runId: string, taskId: string, keys: readonly string[] | null): string {
  const quoted = keys?.map((k) => (/^[A-Za-z0-9]+$/.test(k) ? k : `'${k.replaceAll("'", "'\\''")}'`));
  return `termorch send ${taskId} ${quoted ? `--keys ${quoted.join(" ")}` : "TEXT"} --run ${runId}`;
}

/** The raw tmux command for the same, for operators without termorch at hand. */
export function rawAttachHint(socket: string, session: string): string {
  return `tmux -L ${socket} attach -t =${session}`;
}

/**
 * The state of each task from its status file (`status/<task>.<state>`), which changes before
 * state.json is saved. A task briefly has two files while it moves on: the final one wins.
 */
async function statusFileStates(runDir: string): Promise<Map<string, TaskState>> {
  const out = new Map<string, TaskState>();
  const names = await readdir(join(runDir, "status")).catch(() => [] as string[]);
  for (const name of names) {
    const dot = name.lastIndexOf(".");
    if (dot <= 0) continue;
    const id = name.slice(0, dot);
    const state = name.slice(dot + 1);
    if (!["running", ...FINAL].includes(state)) continue;
    if (out.has(id) && !FINAL.includes(state)) continue;
    out.set(id, state as TaskState);
  }
  return out;
}

/**
 * What a task is doing: `redo` from the moment its redo is recorded until it resolved or its
 * earlier result is back (its record says success meanwhile, and its status file running once
 * the attempt starts); else state.json for finished tasks, else its status file, else pending.
 */
export function effectiveState(t: TaskRun, fromFile: TaskState | undefined): TaskView["state"] {
  if (t.redo.progress) return "redo";
  if (FINAL.includes(t.state)) return t.state;
  return fromFile ?? t.state;
}

function iso(ms: number | null): string | null {
  return ms === null ? null : new Date(ms).toISOString();
}

async function taskView(
  state: RunState,
  t: TaskRun,
  fileState: TaskState | undefined,
  sessions: Map<string, SessionInfo>,
  now: number,
): Promise<TaskView> {
  const s = effectiveState(t, fileState);
  const abs = (p: string): string => (isAbsolute(p) ? p : join(state.run_dir, p));
  const logs = t.result.logs
    ? { stdout: abs(t.result.logs.stdout), stderr: abs(t.result.logs.stderr) }
    : null;
  const session = t.current.session ? sessions.get(t.current.session) : undefined;
  // A session of the same name from another run is not this task's.
  const own = session && (session.run === null || session.run === state.run_id) ? session : undefined;
  const finished = FINAL.includes(s);
  // A redo runs again: its earlier attempt's end is not the task's.
  const redone = s === "redo";
  return {
    id: t.id,
    agent: t.history.at(-1)?.agent ?? t.agent,
    state: s,
    reason: t.reason,
    detail: t.detail,
    attempts: t.attempts,
    exit_code: redone ? null : t.result.exitCode,
    started_at: iso(t.startedAt),
    finished_at: redone ? null : iso(t.finishedAt),
    elapsed_ms: isLive(s) && t.startedAt !== null ? Math.max(0, now - t.startedAt) : null,
    duration_ms:
      finished && t.startedAt !== null && t.finishedAt !== null
        ? Math.max(0, t.finishedAt - t.startedAt)
        : null,
    last_line: logs ? await lastLogLine(logs.stdout) : null,
    logs,
    session: t.current.session,
    session_exists: own !== undefined,
    session_live: own?.live ?? false,
    attach:
      own && t.current.session
        ? { termorch: attachHint(state.run_id, t.id), tmux: rawAttachHint(state.socket, t.current.session) }
        : null,
    waiting_since: isLive(s) ? iso(t.waiting.since) : null,
    waiting_quota_until: isLive(s) ? iso(t.waiting.quotaUntil) : null,
    waiting_approval:
      (isLive(s) || s === "pending") && t.waiting.approval && !t.waiting.approval.approved
        ? approvalView(t.waiting.approval)
        : null,
    waiting_for: isLive(s) && t.waiting.since !== null ? t.waiting.for : null,
    waiting_answers: isLive(s) && t.waiting.since !== null ? t.waiting.answers : [],
    remote: remoteView(t),
    wave: waveOf(state, t.id),
    usage: addUsage(spendOf(t)),
    attempt_history: t.history,
    needs_human: s === "failed" && t.needsHuman,
    redo: t.redo.progress && {
      cause: t.redo.progress.cause,
      n: t.redo.progress.n,
      of: t.redo.progress.cause === "gate" ? state.options.gate_fix_attempts : state.options.redo_attempts,
      with: t.redo.progress.with,
      files: t.redo.progress.files,
      started_at: new Date(t.redo.progress.startedAt).toISOString(),
    },
  };
}

function waveOf(state: RunState, id: string): number | null {
  const i = state.waves.findIndex((w) => w.includes(id));
  return i < 0 ? null : i + 1;
}

/** Where a task of a scale-out run runs (its last attempt's worker), and the line that watches it there. */
function remoteView(t: TaskRun): TaskView["remote"] {
  const last = t.hosts.at(-1);
  if (!last || !t.current.session) return null;
  return {
    worker: last.worker,
    host: last.host,
    attach: remoteAttachHint(last.host, last.socket, t.current.session),
  };
}

/** How an operator watches a task's pane on a worker's host (read-only). */
export function remoteAttachHint(host: string, socket: string, session: string): string {
  return `ssh -t ${host} tmux -S ${socket} attach -r -t =${session}`;
}

/** One run's view; `sessions` are the sessions of the run's tmux server. */
export async function runView(
  state: RunState,
  sessions: Map<string, SessionInfo>,
  now: number,
): Promise<RunView> {
  const phase = phaseOf(state);
  const files = await statusFileStates(state.run_dir);
  const tasks = await Promise.all(state.tasks.map((t) => taskView(state, t, files.get(t.id), sessions, now)));
  const hint =
    phase === "interrupted"
      ? `its driver (pid ${state.pid}) is gone: finish it with termorch resume ${state.run_dir}`
      : phase === "running"
        ? `cancel it with termorch cancel ${state.run_id}`
        : null;
  return {
    run_id: state.run_id,
    run_dir: state.run_dir,
    phase,
    pid: state.pid,
    driver_alive: state.phase === "running" && driverAlive(state.pid, state.updated_at),
    started_at: new Date(state.started_at).toISOString(),
    updated_at: new Date(state.updated_at).toISOString(),
    workspace: state.workspace,
    socket: state.socket,
    socket_path: state.socket_path,
    report: state.report,
    exit_code: state.exit_code,
    hint,
    notices: state.notices,
    merge: mergeView(state.merge, phase !== "running"),
    budget: budgetStanding(state.options.budget, state.tasks.flatMap(spendOf)),
    tasks,
  };
}

/** The run's merge line: where the merge is while it runs; once it ended, only what a bisect found. */
export function mergeView(m: MergeProgress | null, ended: boolean): RunView["merge"] {
  if (m === null) return null;
  const line = mergeLine(m, ended);
  return line === null ? null : { ...m, line };
}

function mergeLine(m: MergeProgress, ended: boolean): string | null {
  if (m.red_on_base) return "run.tests_cmd is red on the base itself: no task broke it";
  if (m.culprit !== null) {
    const what = `${m.culprit}'s merge turns run.tests_cmd red`;
    return m.step === "fixing" && !ended ? `${what}: fixing it` : `culprit ${m.culprit} (${what})`;
  }
  if (ended) return null;
  if (m.step === "waiting_approval")
    return `the integration waits for a person's decision before it is merged: termorch approve|reject <run>${m.approval?.until ? ` (until ${new Date(m.approval.until).toISOString()})` : ""}`;
  if (m.step === "bisecting" && m.probe) {
    const { n, of, k, task } = m.probe;
    const merged =
      k === 0 ? "the base, no task merged" : `the first ${k} task${k === 1 ? "" : "s"}, up to ${task}`;
    return `bisecting run.tests_cmd: probe ${n} of ~${of} (${merged})`;
  }
  return m.step === "merging" ? "merging the tasks" : "running the run-level gates";
}

/**
 * A run's state, read again when it looks interrupted: a driver that wrote its report and exited
 * between the first read and the liveness check is not interrupted, and its newer state says so.
 */
async function settled(runDir: string, state: RunState): Promise<RunState> {
  if (phaseOf(state) !== "interrupted") return state;
  const again = await readRunState(runDir);
  return "state" in again && again.state.run_id === state.run_id ? again.state : state;
}

/**
 * The status document of some runs; runs without readable state become problems. `reuse` may
 * give a run's view from before instead of reading its files again (a live view's finished runs).
 */
export async function statusView(
  runs: readonly OpsRun[],
  sessionsOf: (socket: string) => Map<string, SessionInfo>,
  now: number,
  reuse: (state: RunState) => RunView | undefined = () => undefined,
): Promise<StatusView> {
  const views: RunView[] = [];
  const problems: StatusView["problems"] = [];
  for (const run of runs) {
    if (run.state)
      views.push(
        reuse(run.state) ??
          (await runView(await settled(run.runDir, run.state), sessionsOf(run.state.socket), now)),
      );
    else problems.push({ run_id: run.runId, run_dir: run.runDir, message: run.problem ?? "unreadable" });
  }
  return { schema_version: 1, generated_at: new Date(now).toISOString(), runs: views, problems, queued: [] };
}
