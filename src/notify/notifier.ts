import { spawn } from "node:child_process";
import { type ApprovalWait, approvalView } from "../contract/approval.js";
import type { BudgetStanding } from "../contract/budget.js";
import type { NotifyConfig, NotifyEvent, NotifyEventName } from "../contract/notify.js";
import type { Reason } from "../contract/reason.js";
import type { Report } from "../contract/report.js";
import type { Redactor } from "../redact/redactor.js";
import { redoSteps } from "../shell/redo-command.js";

/** Why one event did not reach the notification command. */
export interface NotifyFailure {
  event: NotifyEventName;
  task_id: string | null;
  kind: "not_started" | "failed" | "timeout";
  /** Redacted, with the end of what the command wrote to stderr. */
  detail: string;
}

/**
 * Hands one event to whoever is notified; answers why that failed, or null. Never rejects.
 * `line` is the event as one line of JSON, already redacted.
 */
export type NotifyDelivery = (
  event: NotifyEvent,
  line: string,
) => Promise<Pick<NotifyFailure, "kind" | "detail"> | null>;

/** The event as the caller gives it: the notifier adds what every event has. */
type EventBody = NotifyEvent extends infer E
  ? E extends NotifyEvent
    ? Omit<E, "schema_version" | "run_id" | "run_dir" | "time">
    : never
  : never;

/**
 * Tells the config's `notify` command about a run's events, one at a time and in order, without
 * holding up the run: `taskFailed` and `taskWaitingInput` only queue; `runFinished` waits for
 * the queue, so a run (a cron job) returns only once its last event was delivered or given up.
 * Every delivery is bounded by the config's timeout. A failure is reported to `onFailure`, never
 * thrown: a notification never changes a run's outcome.
 */
export class Notifier {
  private queue: Promise<void> = Promise.resolve();
  private readonly events: ReadonlySet<NotifyEventName>;

  constructor(
    private readonly o: {
      /** No config: nothing is sent. */
      config: NotifyConfig | undefined;
      runId: string;
      runDir: string;
      redactor: Redactor;
      now: () => number;
      deliver: NotifyDelivery;
      onFailure: (failure: NotifyFailure) => void;
    },
  ) {
    this.events = new Set(o.config?.events ?? []);
  }

  taskFailed(t: {
    id: string;
    reason: Reason | null;
    detail: string | null;
    attempts: number;
    needsHuman?: boolean;
  }): void {
    this.send({
      event: "task.failed",
      task_id: t.id,
      reason: t.reason ?? "exit_code",
      detail: t.detail,
      attempts: t.attempts,
    });
    if (t.needsHuman)
      this.send({ event: "task.needs_human", task_id: t.id, reason: t.detail, attempts: t.attempts });
  }

  taskWaitingInput(taskId: string, since: number, asks: string | null): void {
    this.send({ event: "task.waiting_input", task_id: taskId, since: new Date(since).toISOString(), asks });
  }

  taskWaitingQuota(taskId: string, until: number): void {
    this.send({ event: "task.waiting_quota", task_id: taskId, until: new Date(until).toISOString() });
  }

  /** A task (or, without one, the run's merge) waits for a person's decision. */
  waitingApproval(taskId: string | null, wait: ApprovalWait): void {
    const approval = approvalView(wait);
    this.send(
      taskId === null
        ? { event: "run.waiting_approval", approval }
        : { event: "task.waiting_approval", task_id: taskId, approval },
    );
  }

  /** The run's budget reached a mark: 80 % of it (`warning`), or all of it (`exhausted`). */
  budgetReached(mark: "warning" | "exhausted", budget: BudgetStanding): void {
    this.send({ event: mark === "warning" ? "run.budget_warning" : "run.budget_exhausted", budget });
  }

  /** Queues the run's last event and waits until it and everything before it went out. */
  async runFinished(
    report: Pick<Report, "exit_code" | "summary" | "error" | "merge">,
    reportPath: string | null,
  ): Promise<void> {
    this.send({
      event: "run.finished",
      exit_code: report.exit_code,
      summary: report.summary,
      error: report.error,
      report: reportPath,
      redo: redoSteps(this.o.runDir, report.merge.redo_assignments),
    });
    await this.drained();
  }

  /** Resolves once every event queued so far was delivered or given up. */
  drained(): Promise<void> {
    return this.queue;
  }

  private send(body: EventBody): void {
    if (!this.events.has(body.event)) return;
    const event = this.o.redactor.redactDeep({
      schema_version: 1,
      run_id: this.o.runId,
      run_dir: this.o.runDir,
      time: new Date(this.o.now()).toISOString(),
      ...body,
    } as NotifyEvent);
    const line = JSON.stringify(event);
    this.queue = this.queue.then(async () => {
      const failure = await this.o.deliver(event, line).catch((error: unknown) => ({
        kind: "failed" as const,
        detail: error instanceof Error ? error.message : String(error),
      }));
      if (failure === null) return;
      try {
        this.o.onFailure({
          event: event.event,
          task_id: "task_id" in event ? event.task_id : null,
          kind: failure.kind,
          detail: this.o.redactor.redact(failure.detail),
        });
      } catch {
        // Reporting the failure failed too (e.g. the ledger's disk): the run goes on regardless.
      }
    });
  }
}

/** How much of the command's stderr a failure quotes: its end, where the error usually is. */
const STDERR_TAIL_BYTES = 2048;
/** How long a failed command's stderr may still take to arrive after its exit. */
const STDERR_SETTLE_MS = 200;

/**
 * Delivers each event by running `command` (argv, no shell) with the event as one line of JSON
 * on its stdin and `TERMORCH_EVENT` naming it. The command leads a process group of its own,
 * killed (SIGKILL: a notification has nothing to save) once `timeoutMs` have passed; what it
 * leaves running after it exits is its own business.
 */
export function commandDelivery(o: {
  command: readonly string[];
  env: Readonly<Record<string, string>>;
  cwd: string;
  timeoutMs: number;
}): NotifyDelivery {
  return (event, line) =>
    new Promise((resolve) => {
      let stderr = Buffer.alloc(0);
      const tail = (): string => {
        const text = stderr.toString("utf8").trim();
        return text === "" ? "" : `; its stderr ends: ${text}`;
      };
      let child: ReturnType<typeof spawn>;
      try {
        child = spawn(o.command[0]!, o.command.slice(1), {
          cwd: o.cwd,
          env: { ...o.env, TERMORCH_EVENT: event.event },
          stdio: ["pipe", "ignore", "pipe"],
          detached: true,
        });
      } catch (error) {
        resolve({ kind: "not_started", detail: startError(o.command[0]!, error) });
        return;
      }
      let timedOut = false;
      const timer = setTimeout(() => {
        timedOut = true;
        try {
          if (child.pid !== undefined) process.kill(-child.pid, "SIGKILL");
        } catch {}
      }, o.timeoutMs);
      let done = false;
      const finish = (result: Pick<NotifyFailure, "kind" | "detail"> | null): void => {
        if (done) return;
        done = true;
        clearTimeout(timer);
        child.stderr?.destroy();
        resolve(result);
      };
      child.stderr?.on("data", (chunk: Buffer) => {
        stderr = Buffer.concat([stderr, chunk]);
        if (stderr.length > STDERR_TAIL_BYTES) stderr = stderr.subarray(stderr.length - STDERR_TAIL_BYTES);
      });
      // A command that does not read its stdin is fine: what it does with the event is its choice.
      child.stdin?.on("error", () => {});
      child.stdin?.end(`${line}\n`);
      child.once("error", (error) =>
        finish({ kind: "not_started", detail: startError(o.command[0]!, error) }),
      );
      // Its last stderr may come after the exit; something it left running may hold the pipe, so briefly.
      const stderrEnded = new Promise<void>((done) => {
        if (!child.stderr) return done();
        child.stderr.once("end", () => done());
        child.stderr.once("error", () => done());
      });
      child.once("exit", async (code, signal) => {
        if (code !== 0)
          await Promise.race([stderrEnded, new Promise((done) => setTimeout(done, STDERR_SETTLE_MS))]);
        if (timedOut)
          finish({
            kind: "timeout",
            detail: `${o.command[0]} did not finish within ${o.timeoutMs / 1000} s and was killed${tail()}`,
          });
        else if (code === 0) finish(null);
        else
          finish({
            kind: "failed",
            detail: `${o.command[0]} ${signal ? `was killed by ${signal}` : `exited with code ${code}`}${tail()}`,
          });
      });
    });
}

function startError(program: string, error: unknown): string {
  const code = (error as NodeJS.ErrnoException).code;
  const what = code === "ENOENT" ? "not found" : error instanceof Error ? error.message : String(error);
  return `could not start ${program}: ${what}; check the config's notify.command`;
}
