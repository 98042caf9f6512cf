import { basename } from "node:path";
import type { Usage } from "../contract/agent-result.js";
import type { StateSource } from "../contract/agent-state.js";
import { type ApprovalWait, approvalView } from "../contract/approval.js";
import type { KeyAnswer } from "../contract/keys.js";
import type { Reason } from "../contract/reason.js";
import type { Conflict } from "../contract/report.js";
import type { StatusFile } from "../contract/status.js";
import type { TaskJournal } from "../fs/run-state-file.js";
import type { StatusFiles } from "../fs/status-files.js";
import type { Ledger } from "../ledger/ledger.js";
import type { Redactor } from "../redact/redactor.js";
import type { TaskRun } from "./task-run.js";

/** A state a task moves into (pending is where it starts). */
export type TaskTransition =
  | { to: "running" }
  | { to: "success" }
  | {
      to: "failed";
      reason: Reason;
      detail: string | null;
      /** Blocked, and its agent asked for a person (views, notify and the report say so). */
      needsHuman?: boolean;
    }
  | { to: "skipped"; reason: "dependency_failed" | "cancelled"; detail: string };

/** The groups of a task's record: a fact names only the fields of a group it changes. */
type Group = "git" | "current" | "result" | "redo";

/**
 * What may change on a task's record besides its state (which only `transition` changes) and
 * its wait for input (`markWaiting`): top-level fields replaced, a group's fields merged into it.
 */
export type TaskFacts = Partial<
  Omit<
    TaskRun,
    "id" | "agent" | "dependencies" | "state" | "reason" | "finishedAt" | "needsHuman" | "waiting" | Group
  >
> & { [G in Group]?: Partial<TaskRun[G]> };

/** Facts into a record: top-level fields replaced, each group's named fields replaced in it. */
function apply(t: TaskRun, facts: TaskFacts): void {
  const { git, current, result, redo, ...top } = facts;
  Object.assign(t, top);
  if (git) t.git = { ...t.git, ...git };
  if (current) t.current = { ...t.current, ...current };
  if (result) t.result = { ...t.result, ...result };
  if (redo) t.redo = { ...t.redo, ...redo };
}

/** Who hears of a task's changes besides the files: failures and waits (the notifier), every change (progress). */
export interface TaskListeners {
  taskFailed(t: TaskRun): void;
  taskWaitingInput(taskId: string, since: number, asks: string | null): void;
  /** Any task changed (progress display, a worker's progress to its coordinator). */
  changed(): void;
  /** A task waits for a rate limit or a usage cap to lift until then (epoch ms). */
  taskWaitingQuota?(taskId: string, until: number): void;
  /** A task waits for a person's decision. */
  taskWaitingApproval?(taskId: string, wait: ApprovalWait): void;
}

/**
 * The only writer of the run's task records. A change of state goes to the ledger, the task
 * journal and the status file, in that order, so whoever sees the status file (an operator, a
 * test, a resume) can rely on the other two; then the listeners hear of it. Everyone else reads
 * the records (`get`, `all`) as they are at that moment.
 */
export class TaskRecorder {
  private readonly tasks = new Map<string, TaskRun>();
  private readonly found: Conflict[] = [];
  private readonly spendListeners = new Set<() => void>();
  /** When each task's streamed spend last went into the journal. */
  private readonly journaledSpend = new Map<string, number>();
  private socket: { name: string; path: string };

  constructor(
    private readonly o: {
      runId: string;
      /** Interactive tasks' running status files say whether they wait for input. */
      interactive: (taskId: string) => boolean;
      ledger: Ledger;
      journal: TaskJournal;
      status: StatusFiles;
      redactor: Redactor;
      listeners: TaskListeners;
      now: () => number;
      socket: string;
    },
    tasks: Iterable<TaskRun>,
  ) {
    for (const t of tasks) this.tasks.set(t.id, t);
    this.socket = { name: o.socket, path: "" };
  }

  get(taskId: string): Readonly<TaskRun> {
    const t = this.tasks.get(taskId);
    if (!t) throw new Error(`no task ${taskId} in this run`);
    return t;
  }

  all(): readonly Readonly<TaskRun>[] {
    return [...this.tasks.values()];
  }

  get size(): number {
    return this.tasks.size;
  }

  /** Conflicts between a task's dependencies, found before it was launched (the report lists them). */
  get conflicts(): readonly Conflict[] {
    return this.found;
  }

  /** Where this run's sessions live, once its tmux server is known (status files name it). */
  placeSessions(path: string): void {
    this.socket = { ...this.socket, path };
  }

  get socketPath(): string {
    return this.socket.path;
  }

  /** Tells the listeners that something they show may have changed (an adopted attempt's logs). */
  announce(): void {
    this.o.listeners.changed();
  }

  /** Facts about the task kept in memory; the journal has them with the next checkpoint or change of state. */
  note(taskId: string, facts: TaskFacts): void {
    apply(this.mutable(taskId), facts);
  }

  /** Facts a resume must find (a prepared worktree, an attempt about to launch): into the journal now. */
  checkpoint(taskId: string, facts: TaskFacts = {}): void {
    const t = this.mutable(taskId);
    apply(t, facts);
    this.o.journal.write(t);
  }

  /**
   * An ended attempt's account of what it spent, kept like `note` (a resume adopts the attempt and
   * reads it again), and the budget watchers told.
   */
  spent(taskId: string, facts: TaskFacts): void {
    this.note(taskId, facts);
    this.spendChanged();
  }

  /**
   * What the running attempt of a task has spent so far, as its CLI streams it: the budget
   * watchers told at once, and into the journal at most once a second a task (status shows it
   * that late at most; a resume reads the stream again anyway).
   */
  streamed(taskId: string, usage: Usage): void {
    const now = this.o.now();
    if (now - (this.journaledSpend.get(taskId) ?? 0) >= 1000) {
      this.journaledSpend.set(taskId, now);
      this.checkpoint(taskId, { current: { usage } });
    } else this.note(taskId, { current: { usage } });
    this.spendChanged();
  }

  private spendChanged(): void {
    for (const listener of [...this.spendListeners]) listener();
    this.o.listeners.changed();
  }

  /** Calls `listener` at every change of what the run's agents spent; returns the unsubscribe. */
  onSpend(listener: () => void): () => void {
    this.spendListeners.add(listener);
    return () => this.spendListeners.delete(listener);
  }

  foundConflict(conflict: Conflict): void {
    this.found.push(conflict);
  }

  /** The one way a task changes state. */
  async transition(taskId: string, change: TaskTransition, facts: TaskFacts = {}): Promise<void> {
    const t = this.mutable(taskId);
    apply(t, facts);
    t.state = change.to;
    // Running again (a redo of a finished task): its earlier end is no longer its end.
    if (change.to === "running") {
      t.finishedAt = null;
      t.result.exitCode = null;
    } else {
      t.finishedAt = this.o.now();
      t.reason = change.to === "success" ? null : change.reason;
      t.detail = change.to === "success" ? null : change.detail;
    }
    t.needsHuman = change.to === "failed" && change.needsHuman === true;
    const status = this.statusOf(t, change.to);
    await this.o.ledger.append(
      `task.${status.state}`,
      {
        ...status,
        gates: change.to === "running" ? [] : t.result.gates,
        branch: t.git.branch,
        commit: t.git.commit,
      },
      t.id,
    );
    this.o.journal.write(t);
    this.o.status.set(status);
    if (change.to === "failed") this.o.listeners.taskFailed(t);
    this.o.listeners.changed();
  }

  /**
   * An interactive task's agent started or stopped waiting for input (since: when its screen went
   * still; null: it changed again), what it asks and the keys that answer it. Not a change of
   * state: the running status file is rewritten with it, the ledger records it, and a wait is
   * notified.
   */
  async markWaiting(
    taskId: string,
    since: number | null,
    asks: string | null = null,
    by: StateSource | null = null,
    answers: readonly KeyAnswer[] = [],
  ): Promise<void> {
    const t = this.mutable(taskId);
    t.waiting = {
      ...t.waiting,
      since,
      for: since === null ? null : asks,
      answers: since === null ? [] : [...answers],
    };
    await this.o.ledger.append(
      since === null ? "task.input_resumed" : "task.waiting_input",
      {
        attempt: t.attempts,
        ...(since === null ? {} : { since: new Date(since).toISOString(), asks }),
        ...(since !== null && answers.length > 0 ? { answers } : {}),
        ...(by ? { by } : {}),
      },
      t.id,
    );
    this.o.journal.write(t);
    if (t.state === "running") this.o.status.set(this.statusOf(t, "running"));
    if (since !== null) this.o.listeners.taskWaitingInput(t.id, since, asks);
    this.o.listeners.changed();
  }

  /**
   * A task waits for a rate limit or a usage cap its agent's CLI met to lift before its next
   * attempt (`until`, epoch ms), or (null) no longer does. Not a change of state: its status
   * file says it, the ledger records it, and a wait is notified.
   */
  async markWaitingQuota(taskId: string, until: number | null): Promise<void> {
    const t = this.mutable(taskId);
    t.waiting = { ...t.waiting, quotaUntil: until };
    await this.o.ledger.append(
      until === null ? "task.quota_resumed" : "task.waiting_quota",
      { attempt: t.attempts, ...(until === null ? {} : { until: new Date(until).toISOString() }) },
      t.id,
    );
    this.o.journal.write(t);
    if (t.state === "running") this.o.status.set(this.statusOf(t, "running"));
    if (until !== null) this.o.listeners.taskWaitingQuota?.(t.id, until);
    this.o.listeners.changed();
  }

  /**
   * A task waits for a person's decision (its `approval`), or (null) no longer does. Not a change
   * of state: the journal keeps it (a resume waits on), its running status file says it, the
   * ledger records it, and a wait is notified.
   */
  async markWaitingApproval(taskId: string, wait: ApprovalWait | null): Promise<void> {
    const t = this.mutable(taskId);
    const was = t.waiting.approval;
    t.waiting = { ...t.waiting, approval: wait };
    const waits = wait !== null && !wait.approved;
    if (waits && (was?.at !== wait.at || was.attempt !== wait.attempt || was.since !== wait.since))
      await this.o.ledger.append(
        "task.waiting_approval",
        {
          at: wait.at,
          attempt: wait.attempt,
          until: wait.until === null ? null : new Date(wait.until).toISOString(),
        },
        t.id,
      );
    this.o.journal.write(t);
    if (t.state === "running") this.o.status.set(this.statusOf(t, "running"));
    if (waits) this.o.listeners.taskWaitingApproval?.(t.id, wait);
    this.o.listeners.changed();
  }

  /** Where an interactive task's agent's state comes from (kept in memory, like `note`). */
  stateFrom(taskId: string, by: StateSource): void {
    const t = this.mutable(taskId);
    t.waiting = { ...t.waiting, stateFrom: by };
  }

  /** An attempt ended: whatever it waited for is over (no ledger event: its exit says so). */
  stopWaiting(taskId: string): void {
    const t = this.mutable(taskId);
    t.waiting = { ...t.waiting, since: null, for: null, answers: [] };
  }

  /** A new run starts with no status files of an earlier run in the same folder (a raised budget: of the tasks it opens again). */
  async clearStatusFiles(taskIds: Iterable<string> = this.tasks.keys()): Promise<void> {
    await this.o.status.clear(taskIds);
  }

  /**
   * A resumed run's status files, rewritten from the task journal: a driver killed between
   * writing a status file's temp copy and renaming it leaves the task's previous file in place
   * (a finished task still `.running`).
   */
  rewriteStatusFiles(): void {
    for (const t of this.tasks.values())
      if (t.state !== "pending") this.o.status.set(this.statusOf(t, t.state));
  }

  private mutable(taskId: string): TaskRun {
    const t = this.tasks.get(taskId);
    if (!t) throw new Error(`no task ${taskId} in this run`);
    return t;
  }

  private statusOf(t: TaskRun, state: StatusFile["state"]): StatusFile {
    const redact = (s: string): string => this.o.redactor.redact(s);
    const waiting =
      state === "running" && this.o.interactive(t.id)
        ? {
            waiting_input: t.waiting.since !== null,
            waiting_since: t.waiting.since === null ? null : new Date(t.waiting.since).toISOString(),
            waiting_for: t.waiting.for === null ? null : redact(t.waiting.for),
            ...(t.waiting.since !== null && t.waiting.answers.length > 0
              ? { waiting_answers: t.waiting.answers }
              : {}),
          }
        : {};
    // A scale-out task's session is on its worker's tmux server, on that worker's host.
    const remote = t.hosts.at(-1);
    return {
      task_id: t.id,
      state,
      run_id: this.o.runId,
      session: t.current.session,
      socket: remote ? basename(remote.socket) : this.socket.name,
      socket_path: remote ? remote.socket : this.socket.path,
      ...(remote ? { host: remote.host, worker: remote.worker } : {}),
      attempt: t.attempts,
      started_at: t.startedAt === null ? null : new Date(t.startedAt).toISOString(),
      finished_at: t.finishedAt === null ? null : new Date(t.finishedAt).toISOString(),
      exit_code: t.result.exitCode,
      reason: t.reason,
      detail: t.detail === null ? null : redact(t.detail),
      ...(state === "failed" && t.needsHuman ? { needs_human: true } : {}),
      ...(state === "running" && t.waiting.quotaUntil !== null
        ? { waiting_quota_until: new Date(t.waiting.quotaUntil).toISOString() }
        : {}),
      ...(state === "running" && t.waiting.approval !== null && !t.waiting.approval.approved
        ? { waiting_approval: approvalView(t.waiting.approval) }
        : {}),
      ...waiting,
    };
  }
}
