// A TaskRunner whose attempts run nowhere: each one exits when the test says so. With vitest's
// fake timers it lets the middle tier drive the real pipeline (dispatch, retries, timeouts,
// stop, detach, resume) in milliseconds, without a process.
import { readFileSync } from "node:fs";
import type {
  AdoptedAttempt,
  AttemptRef,
  AttemptSpec,
  ExitRecord,
  RunningAttempt,
  TaskRunner,
} from "../../src/runner/task-runner.js";

/** What a fake agent does when it is sent TERM. */
export type OnTerm = "exit" | "ignore";

/** One attempt of a fake agent. */
export class FakeAttempt {
  readonly exited: Promise<ExitRecord>;
  /** Every stop() the pipeline asked for, with the fake clock's time. */
  readonly stops: { at: number; graceMs: number }[] = [];
  /** Resolves at the first stop() (the pipeline's TERM). */
  readonly stopped: Promise<void>;
  private resolve!: (record: ExitRecord) => void;
  private onStop!: () => void;
  private ended = false;
  released = false;
  onTerm: OnTerm = "exit";
  /** What its terminal shows (tty attempts); the test draws on it. */
  screen = "";
  /** Every text pasted into its terminal, in order (read from the file at paste time). */
  readonly pasted: string[] = [];
  /** Enters pressed again after a paste (runner.submit). */
  submits = 0;

  constructor(readonly spec: AttemptSpec) {
    this.exited = new Promise((resolve) => {
      this.resolve = resolve;
    });
    this.stopped = new Promise((resolve) => {
      this.onStop = resolve;
    });
  }

  get done(): boolean {
    return this.ended;
  }

  /** The agent exits with this code. */
  exit(code: number): void {
    this.end({ exit_code: code, signal: null });
  }

  /** The agent ends some other way (a signal, a lost session, a launch failure). */
  end(record: Partial<ExitRecord>): void {
    if (this.ended) return;
    this.ended = true;
    this.resolve({
      exit_code: null,
      signal: null,
      started_at: null,
      finished_at: new Date().toISOString(),
      pid: 4242,
      stdout_bytes: 0,
      stderr_bytes: 0,
      truncated: false,
      launch_failed: false,
      lost: false,
      ...record,
    });
  }

  /** The runner's side of stop(): TERM now, KILL after the grace unless the agent died of TERM. */
  stop(graceMs: number): Promise<ExitRecord> {
    this.stops.push({ at: Date.now(), graceMs });
    this.onStop();
    if (this.onTerm === "exit") this.end({ signal: "SIGTERM" });
    else setTimeout(() => this.end({ signal: "SIGKILL" }), graceMs);
    return this.exited;
  }

  handle(): RunningAttempt {
    return {
      session: this.spec.session,
      exited: this.exited,
      stop: (graceMs) => this.stop(graceMs),
      release: () => {
        this.released = true;
      },
    };
  }
}

/**
 * Where fake attempts live, across runners: what a tmux server is to the TmuxRunners of a run
 * and of its resume.
 */
export class FakeHost {
  readonly attempts: FakeAttempt[] = [];
  readonly closed: string[] = [];
  private readonly waiting = new Map<string, ((a: FakeAttempt) => void)[]>();
  /** Decides how each new attempt behaves (e.g. exits at once); default: it waits for the test. */
  onLaunch: (attempt: FakeAttempt) => void = () => {};

  /** Attempts of one task, in launch order. */
  of(taskId: string): FakeAttempt[] {
    return this.attempts.filter((a) => a.spec.taskId === taskId);
  }

  /** Resolves with the task's attempt number `n` (1-based) once it is launched. */
  launched(taskId: string, n = 1): Promise<FakeAttempt> {
    const known = this.of(taskId)[n - 1];
    if (known) return Promise.resolve(known);
    const key = `${taskId}#${n}`;
    return new Promise((resolve) => this.waiting.set(key, [...(this.waiting.get(key) ?? []), resolve]));
  }

  add(spec: AttemptSpec): FakeAttempt {
    const attempt = new FakeAttempt(spec);
    this.attempts.push(attempt);
    this.onLaunch(attempt);
    const key = `${spec.taskId}#${this.of(spec.taskId).length}`;
    for (const resolve of this.waiting.get(key) ?? []) resolve(attempt);
    this.waiting.delete(key);
    return attempt;
  }

  find(ref: AttemptRef): FakeAttempt | undefined {
    return this.attempts.find((a) => a.spec.attemptDir === ref.attemptDir && a.spec.session === ref.session);
  }
}

export class FakeRunner implements TaskRunner {
  readonly socket = "fake";
  readonly adopted: FakeAttempt[] = [];

  constructor(readonly host: FakeHost = new FakeHost()) {}

  async socketPath(): Promise<string> {
    return "/nonexistent/fake-socket";
  }

  async launch(spec: AttemptSpec): Promise<RunningAttempt> {
    return this.host.add(spec).handle();
  }

  async adopt(ref: AttemptRef): Promise<AdoptedAttempt | null> {
    const attempt = this.host.find(ref);
    if (attempt) {
      this.adopted.push(attempt);
      attempt.released = false;
      return { attempt: attempt.handle(), finished: attempt.done, live: !attempt.done };
    }
    if (!ref.running) return null;
    const lost = new FakeAttempt({ ...ref } as unknown as AttemptSpec);
    lost.end({ lost: true, detail: "its tmux session is gone" });
    return { attempt: lost.handle(), finished: false, live: false };
  }

  async close(sessions: readonly string[]): Promise<void> {
    this.host.closed.push(...sessions);
  }

  async openSessions(): Promise<Set<string>> {
    return new Set(
      this.host.attempts.filter((a) => !this.host.closed.includes(a.spec.session)).map((a) => a.spec.session),
    );
  }

  async runsWithSessions(): Promise<Set<string>> {
    return new Set(this.host.attempts.map((a) => a.spec.runId));
  }

  async paste(session: string, file: string): Promise<void> {
    const attempt = this.live(session);
    if (!attempt) throw new Error(`no live session ${session}`);
    attempt.pasted.push(readFileSync(file, "utf8"));
  }

  async submit(session: string): Promise<void> {
    const attempt = this.live(session);
    if (!attempt) throw new Error(`no live session ${session}`);
    attempt.submits += 1;
  }

  async capture(sessions: readonly string[]): Promise<Map<string, string | null>> {
    return new Map(sessions.map((s) => [s, this.live(s)?.screen ?? null]));
  }

  private live(session: string): FakeAttempt | undefined {
    return this.host.attempts.findLast((a) => a.spec.session === session && !a.done);
  }

  async closeIfIdle(): Promise<void> {}
}
