/**
 * The task-runner seam: where an attempt of a task runs. The pipeline (src/run/) launches,
 * adopts, stops and closes attempts only through this interface; the local tmux runner
 * (src/tmux/runner.ts) is its first implementation, a fake one drives the middle test tier
 * (test/middle/), and a runner for other hosts can be a third. docs/ARCHITECTURE.md: the seams.
 */

/** Everything needed to start one attempt of a task. */
export interface AttemptSpec {
  runId: string;
  taskId: string;
  /** Starts at 1. */
  attempt: number;
  /** Session name, e.g. `termorch-<run>-<task>`; `[A-Za-z0-9_-]` only. */
  session: string;
  /** The agent's exact argv, placeholders already substituted. */
  argv: string[];
  /** The agent's whole environment: it sees these variables and nothing else. */
  env: Record<string, string>;
  cwd: string;
  /** true: the agent owns a terminal, and what the terminal shows is its stdout log. */
  tty: boolean;
  /** Absolute file the agent reads as its standard input (its prompt); default: nothing (/dev/null). Not with tty. */
  stdin?: string;
  /** Absolute log paths; the runner creates the files (their folders exist). */
  stdoutLog: string;
  stderrLog: string;
  /** Absolute private folder of this attempt (created 0700): the attempt's own files and exit record. */
  attemptDir: string;
  /** Regex sources in the dialect both redaction engines share (src/redact/RULES.md); every match in the logs becomes `[REDACTED]`. */
  redact: string[];
  /** Cap of each log file in bytes; 0 means no cap. */
  maxLogBytes: number;
  /** Address-space limit per agent process (RLIMIT_AS), in MiB. */
  memoryMb?: number;
  /**
   * A command line the agent's argv is appended to and run by (its sandbox: src/task/sandbox.ts);
   * the runner's own supervision stays outside it. Its first element is an absolute path.
   */
  wrap?: string[];
  /** Between TERM and KILL whenever the runner ends the agent or its leftovers (the run's kill_grace_s). */
  killGraceMs?: number;
  /**
   * The process the attempt belongs to when nothing else would end it (a scale-out worker): once
   * that process has been gone `afterMs`, the pane supervisor ends the agent as a cancel would
   * (another worker runs the task by then). A local run's driver is not watched: a resume adopts
   * what it left.
   */
  owner?: { pid: number; afterMs: number };
  /** false: never put the agent in a cgroup of its own (default: where the machine allows it). */
  cgroup?: boolean;
  /**
   * Absolute file where the runner records the agent's cgroup while it exists (default: `cgroup`
   * in attemptDir). Outside attemptDir, the record can outlive the attempt's folder.
   */
  cgroupRecord?: string;
}

/** An attempt an earlier process started (resume): enough to find it again and to check it is that one. */
export interface AttemptRef {
  session: string;
  attemptDir: string;
  runId: string;
  taskId: string;
  attempt: number;
  /** The attempt was recorded as running: adopt never answers null then (a vanished one is lost). */
  running: boolean;
}

/** How an attempt ended: the supervisor's exit record, or what the runner could tell without it. */
export interface ExitRecord {
  exit_code: number | null;
  /** e.g. "SIGTERM", from the real wait status. */
  signal: string | null;
  started_at: string | null;
  finished_at: string;
  /** The agent's pid, which is also its process group id. */
  pid: number | null;
  /** Raw bytes the agent wrote (tty: bytes the terminal showed). */
  stdout_bytes: number;
  stderr_bytes: number;
  /** A log reached its cap. */
  truncated: boolean;
  /** The agent never ran: its command could not be executed (127 not found, 126 other) or the supervisor could not set it up (125). */
  launch_failed: boolean;
  /** true when the attempt vanished without an exit record (operator killed it, server died), or was closed under a running agent. */
  lost: boolean;
  detail?: string;
}

/** A launched or adopted attempt. */
export interface RunningAttempt {
  session: string;
  /** Resolves exactly once when the attempt ended. Never rejects. */
  exited: Promise<ExitRecord>;
  /** TERM the agent's whole process group, KILL after graceMs; resolves when `exited` resolved. */
  stop(graceMs: number): Promise<ExitRecord>;
  /**
   * Stops watching without touching the attempt (it keeps running; adopt it later): releases
   * whatever keeps this process alive for it. `exited` then stays pending.
   */
  release(): void;
}

/** An adopted attempt, and what the runner found of it (for the ledger). */
export interface AdoptedAttempt {
  attempt: RunningAttempt;
  /** Its exit record was there: it ended while nobody watched. */
  finished: boolean;
  /** Its session was still there. */
  live: boolean;
}

/** Where a run's attempts run. */
export interface TaskRunner {
  /** What status files and the report name as the place attempts run (tmux: the socket's name and path). */
  readonly socket: string;
  socketPath(): Promise<string>;
  /** Starts one attempt. Rejects when it could not be started (the task then fails with launch_error). */
  launch(spec: AttemptSpec): Promise<RunningAttempt>;
  /**
   * Picks up an attempt an earlier process started: its recorded end, or a watch of it while it
   * still runs. null: the attempt never started (recorded, not known to run, and nothing is
   * there: the earlier process died before the launch), so it may be launched now.
   */
  adopt(ref: AttemptRef): Promise<AdoptedAttempt | null>;
  /** Ends the given attempts' sessions for good (a retry's predecessor; the sessions closed after the report). */
  close(sessions: readonly string[]): Promise<void>;
  /** Sessions still open (kept for inspection), by name. */
  openSessions(): Promise<Set<string>>;
  /** Run ids that own an open session: a new run must not reuse one. */
  runsWithSessions(): Promise<Set<string>>;
  /**
   * Types a file into a tty attempt's terminal as one bracketed paste followed by Enter (an
   * interactive agent's prompt, an operator's answer). Rejects when the session is gone.
   */
  paste(session: string, file: string): Promise<void>;
  /** Presses Enter in a tty attempt's terminal: a pasted prompt its CLI took as text but did not send. */
  submit(session: string): Promise<void>;
  /** What the terminals of these tty attempts show now (the visible screen); null for one that is gone. */
  capture(sessions: readonly string[]): Promise<Map<string, string | null>>;
  /** Lets go of what the runner holds once nothing runs any more (tmux: the server, when idle). */
  closeIfIdle(): Promise<void>;
}
