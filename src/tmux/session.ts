import { randomBytes } from "node:crypto";
import { existsSync, type FSWatcher, mkdirSync, readFileSync, rmSync, watch, writeFileSync } from "node:fs";
import { access, chmod, readFile, rm } from "node:fs/promises";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { z } from "zod";
import { findPerl } from "../fs/executable.js";
import type { AttemptRef, AttemptSpec, ExitRecord, RunningAttempt } from "../runner/task-runner.js";
import { LaunchError, TmuxError } from "./errors.js";
import { formatEscape, type PaneRow, type TmuxServer } from "./server.js";

/** One attempt in its own tmux session, as the task-runner seam describes it. */
export type LaunchSpec = AttemptSpec;

/**
 * What is needed to watch an attempt started by an earlier process. When given, a live session
 * only counts as this attempt if its @termorch_* options match.
 */
export type AdoptSpec = Pick<AttemptRef, "session" | "attemptDir"> &
  Partial<Pick<AttemptRef, "runId" | "taskId" | "attempt">>;

/** Period of the reconcile pass that catches what fs.watch cannot see (a vanished session). */
const RECONCILE_MS = 1000;
/** After SIGKILL, how long to wait before closing the session as a last resort. */
const KILL_SESSION_AFTER_MS = 5000;
/** How long kill() waits for a starting supervisor to record the agent's pid. */
const PID_WAIT_MS = 2000;
const SESSION_NAME = /^[A-Za-z0-9_-]{1,200}$/;
const ENV_NAME = /^[^=\0]+$/;

/** exit.json as the supervisor writes it. */
const ExitFile = z.object({
  exit_code: z.number().int().nullable(),
  signal: z.string().nullable(),
  started_at: z.string().nullable(),
  finished_at: z.string(),
  pid: z.number().int().nullable(),
  stdout_bytes: z.number().int().nonnegative(),
  stderr_bytes: z.number().int().nonnegative(),
  truncated: z.boolean(),
  hangup: z.boolean().default(false),
  launch_failed: z.boolean().default(false),
  error: z.string().nullable().default(null),
});
type ExitFile = z.infer<typeof ExitFile>;

/**
 * Starts one attempt: writes its private files, then ONE tmux invocation creates the session,
 * tags it and (tty) attaches the pane logger, so nothing the agent prints comes before the
 * logger. Throws LaunchError (code `duplicate_session` when that session is already live).
 */
export async function launch(
  server: TmuxServer,
  reconciler: Reconciler,
  spec: LaunchSpec,
): Promise<RunningAttempt> {
  checkSpec(spec);
  const perl = findPerl();
  const dir = spec.attemptDir;
  const launchFile = join(dir, "launch");
  const filterFile = join(dir, "filter");
  let fresh: boolean;
  try {
    // mkdir tells whether it created the folder: a fresh one needs no checks for leftovers.
    // Synchronous like the launch file below: microseconds each, cheaper than the promise API.
    fresh = mkdirSync(dir, { recursive: true, mode: 0o700 }) !== undefined;
    if (spec.cgroupRecord !== undefined)
      mkdirSync(dirname(spec.cgroupRecord), { recursive: true, mode: 0o700 });
  } catch (error) {
    throw new LaunchError(`cannot prepare ${dir}: ${messageOf(error)}`, "setup", spec.session, {
      cause: error,
    });
  }
  // The session name is the idempotency lock of an attempt: new-session refuses a duplicate.
  // A folder used before may belong to a live attempt whose files must not be touched; only
  // then is the extra tmux round trip worth it.
  if (!fresh && (await server.hasSession(spec.session))) {
    throw new LaunchError(
      `tmux session ${spec.session} already exists: that attempt is live`,
      "duplicate_session",
      spec.session,
    );
  }
  const secrets = [launchFile, filterFile];
  try {
    if (!fresh) {
      await chmod(dir, 0o700);
      if (await exists(join(dir, "exit.json"))) {
        throw new LaunchError(
          `${dir} already holds a finished attempt; adopt it or use a new attempt`,
          "attempt_exists",
          spec.session,
        );
      }
      // A pid left by an earlier, lost launch must not be mistaken for this one's by kill().
      await Promise.all(["pid", "filter.done"].map((f) => rm(join(dir, f), { force: true })));
    }
    // One file for the supervisor (argv, environment, patterns: it deletes it once read, as it may
    // hold secrets) and, for tty, one for the pane logger. Fewer files, fewer syscalls per task.
    const token = randomBytes(12).toString("hex");
    writePrivate(launchFile, launchText(spec, token), fresh);
    if (spec.tty) writePrivate(filterFile, filterText(spec, token), fresh);
  } catch (error) {
    await removeAll(secrets);
    if (error instanceof LaunchError) throw error;
    throw new LaunchError(`cannot prepare ${dir}: ${messageOf(error)}`, "setup", spec.session, {
      cause: error,
    });
  }

  // set-option and pipe-pane take a pane target: "=NAME:" is the exact session's current pane.
  // Raw arguments: TmuxServer.command escapes them for the transport it uses.
  const target = `=${spec.session}:`;
  const commands: string[][] = [
    [
      "new-session",
      "-d",
      "-s",
      spec.session,
      // Named after the task: tmux then turns automatic-rename off for the window, which
      // would otherwise show the running program (`perl`, the supervisor).
      "-n",
      spec.taskId,
      "-E",
      "-c",
      formatEscape(spec.cwd),
      "-x",
      String(server.width),
      "-y",
      String(server.height),
      "--",
      perl,
      SUPERVISOR_PATH,
      dir,
    ],
    ["set-option", "-t", target, "@termorch_run", spec.runId],
    ["set-option", "-t", target, "@termorch_task", spec.taskId],
    ["set-option", "-t", target, "@termorch_attempt", String(spec.attempt)],
  ];
  if (spec.tty) {
    const filter = ["exec", perl, PANE_LOGGER_PATH, dir].map(shQuote).join(" ");
    commands.push(["pipe-pane", "-O", "-t", target, formatEscape(filter)]);
  }
  try {
    // Launches asked for in one turn share a spawned client (commandInBatch).
    await runLaunch(server, commands);
  } catch (error) {
    await removeAll(secrets);
    if (error instanceof TmuxError && /duplicate session/i.test(error.stderr)) {
      throw new LaunchError(
        `tmux session ${spec.session} already exists: that attempt is live`,
        "duplicate_session",
        spec.session,
        { cause: error },
      );
    }
    throw new LaunchError(
      `tmux could not start session ${spec.session}: ${messageOf(error)}`,
      "tmux",
      spec.session,
      { cause: error },
    );
  }
  return watchAttempt(server, reconciler, {
    session: spec.session,
    attemptDir: dir,
    runId: spec.runId,
    taskId: spec.taskId,
    attempt: spec.attempt,
  });
}

/** Re-attaches to an attempt launched by an earlier process: its exit.json if present, else the live session. */
export async function adopt(
  server: TmuxServer,
  reconciler: Reconciler,
  spec: AdoptSpec,
): Promise<RunningAttempt> {
  if (!SESSION_NAME.test(spec.session))
    throw new LaunchError(`invalid session name "${spec.session}"`, "invalid_spec", spec.session);
  return watchAttempt(server, reconciler, spec);
}

/**
 * closeIfIdle at the end of another run can make the server exit just as we launch; the
 * client then reports "server exited unexpectedly" and nothing was created, so one retry
 * starts a fresh server.
 */
async function runLaunch(server: TmuxServer, commands: string[][]): Promise<void> {
  try {
    await server.commandInBatch(...commands);
  } catch (error) {
    if (!(error instanceof TmuxError && /server exited unexpectedly|lost server/i.test(error.stderr)))
      throw error;
    await server.command(...commands);
  }
}

function checkSpec(spec: LaunchSpec): void {
  const bad = (message: string): never => {
    throw new LaunchError(`invalid launch of ${spec.session}: ${message}`, "invalid_spec", spec.session);
  };
  if (!SESSION_NAME.test(spec.session)) bad("the session name must match [A-Za-z0-9_-]");
  if (!Number.isInteger(spec.attempt) || spec.attempt < 1) bad("attempt must be an integer >= 1");
  if (spec.argv.length === 0 || spec.argv[0] === "") bad("empty command");
  if (spec.argv.some((a) => a.includes("\0"))) bad("a command argument contains a NUL byte");
  if (spec.wrap?.some((a) => a.includes("\0")) || (spec.wrap && !spec.wrap[0]?.startsWith("/")))
    bad("wrap must start with an absolute path and hold no NUL byte");
  for (const [name, value] of Object.entries(spec.env)) {
    if (!ENV_NAME.test(name) || value.includes("\0"))
      bad(`environment variable ${JSON.stringify(name)} cannot be passed`);
  }
  for (const [what, path] of [
    ["attemptDir", spec.attemptDir],
    ["stdoutLog", spec.stdoutLog],
    ["stderrLog", spec.stderrLog],
    ["cwd", spec.cwd],
    ...(spec.cgroupRecord !== undefined ? [["cgroupRecord", spec.cgroupRecord] as const] : []),
    ...(spec.stdin !== undefined ? [["stdin", spec.stdin] as const] : []),
  ] as const) {
    if (!path.startsWith("/") || path.includes("\0")) bad(`${what} must be an absolute path`);
  }
  if (!Number.isInteger(spec.maxLogBytes) || spec.maxLogBytes < 0) bad("maxLogBytes must be an integer >= 0");
  if (spec.memoryMb !== undefined && !(Number.isInteger(spec.memoryMb) && spec.memoryMb > 0))
    bad("memoryMb must be a positive integer");
  if (
    spec.owner !== undefined &&
    !(Number.isInteger(spec.owner.pid) && spec.owner.pid > 0 && spec.owner.afterMs >= 0)
  )
    bad("owner needs a pid and afterMs >= 0");
}

/** %-encodes what would break a `key=value` line (the supervisor decodes %XX). */
function enc(v: string): string {
  return v.replace(/[%\n\r\0]/g, (c) => `%${c.charCodeAt(0).toString(16).padStart(2, "0")}`);
}

/** The settings both the supervisor and the pane logger need. */
function commonLines(spec: LaunchSpec, token: string): string[] {
  return [
    "version=2",
    `stdout_log=${enc(spec.stdoutLog)}`,
    `stderr_log=${enc(spec.stderrLog)}`,
    `tty=${spec.tty ? 1 : 0}`,
    `max_log_bytes=${spec.maxLogBytes}`,
    // Marks the end of the pane output for the tty logger; random so output cannot fake it by accident.
    `token=${token}`,
  ];
}

function launchText(spec: LaunchSpec, token: string): string {
  const lines = [...commonLines(spec, token), `cwd=${enc(spec.cwd)}`];
  if (spec.killGraceMs !== undefined) lines.push(`kill_grace_ms=${Math.round(spec.killGraceMs)}`);
  if (spec.owner !== undefined)
    lines.push(`owner_pid=${spec.owner.pid}`, `owner_after_ms=${Math.round(spec.owner.afterMs)}`);
  if (spec.memoryMb !== undefined) lines.push(`memory_mb=${spec.memoryMb}`);
  if (spec.cgroup === false) lines.push("cgroup=0");
  if (spec.cgroupRecord !== undefined) lines.push(`cgroup_record=${enc(spec.cgroupRecord)}`);
  if (spec.stdin !== undefined) lines.push(`stdin=${enc(spec.stdin)}`);
  for (const arg of spec.wrap ?? []) lines.push(`wrap=${enc(arg)}`);
  for (const arg of spec.argv) lines.push(`arg=${enc(arg)}`);
  for (const [k, v] of Object.entries(spec.env)) lines.push(`env=${enc(`${k}=${v}`)}`);
  for (const p of spec.redact) lines.push(`redact=${enc(p)}`);
  return `${lines.join("\n")}\n`;
}

function filterText(spec: LaunchSpec, token: string): string {
  return `${[...commonLines(spec, token), ...spec.redact.map((p) => `redact=${enc(p)}`)].join("\n")}\n`;
}

/** Quotes one word for sh: pipe-pane runs its command with `sh -c`. */
function shQuote(word: string): string {
  return `'${word.replaceAll("'", `'\\''`)}'`;
}

function writePrivate(path: string, data: string | Buffer, fresh: boolean): void {
  // A stale file would keep its old mode: start from nothing (nothing is there in a fresh folder).
  if (!fresh) rmSync(path, { force: true });
  writeFileSync(path, data, { mode: 0o600, flag: "wx" });
}

async function removeAll(paths: readonly string[]): Promise<void> {
  await Promise.all(paths.map((p) => rm(p, { force: true }).catch(() => {})));
}

async function exists(path: string): Promise<boolean> {
  return access(path).then(
    () => true,
    () => false,
  );
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/**
 * The supervisor runs from where termorch is installed: next to this module in src/ and, via
 * scripts/copy-assets.js, in dist/. perl reads it once when the pane starts. The path goes
 * through ../tmux/ so that it also holds from the CLI bundle in dist/cli/ (scripts/bundle.js).
 */
const SUPERVISOR_PATH = fileURLToPath(new URL("../tmux/supervisor.pl", import.meta.url));
/** tty agents' pane logger, started by pipe-pane (it loads the supervisor's log engine). */
const PANE_LOGGER_PATH = fileURLToPath(new URL("../tmux/pane-logger.pl", import.meta.url));

// ---------------------------------------------------------------------------------------------
// Watching an attempt

function watchAttempt(server: TmuxServer, reconciler: Reconciler, spec: AdoptSpec): RunningAttempt {
  const w = new AttemptWatch(server, reconciler, spec);
  w.start();
  return {
    session: spec.session,
    exited: w.exited,
    stop: (graceMs) => w.stop(graceMs),
    release: () => w.release(),
  };
}

class AttemptWatch {
  readonly exited: Promise<ExitRecord>;
  private resolve!: (record: ExitRecord) => void;
  private done = false;
  private watcher: FSWatcher | null = null;
  private goneTicks = 0;
  private deadTicks = 0;
  private killing: Promise<ExitRecord> | null = null;
  private readonly timers: NodeJS.Timeout[] = [];
  private readonly exitPath: string;

  constructor(
    private readonly server: TmuxServer,
    private readonly reconciler: Reconciler,
    readonly spec: AdoptSpec,
  ) {
    this.exited = new Promise((resolve) => {
      this.resolve = resolve;
    });
    this.exitPath = join(spec.attemptDir, "exit.json");
  }

  /** Whether this watch still needs the process kept alive by the reconcile timer. */
  get needsTimerRef(): boolean {
    return !this.done && this.watcher === null;
  }

  start(): void {
    try {
      // Persistent on purpose: it keeps the process alive exactly while someone waits for the attempt.
      this.watcher = watch(this.spec.attemptDir, (_event, name) => {
        if (name === null || name === "exit.json") void this.checkFile();
      });
      this.watcher.on("error", () => {
        this.watcher?.close();
        this.watcher = null;
        this.reconciler.refresh();
      });
    } catch {
      // Missing folder (adopting a vanished attempt) or no inotify watches left: the
      // reconcile pass, then kept referenced, does the job.
      this.watcher = null;
    }
    this.reconciler.add(this);
    // The file may have appeared before the watcher was armed.
    void this.checkFile();
  }

  /** Resolves from exit.json when it is there and complete. */
  async checkFile(): Promise<boolean> {
    if (this.done) return true;
    let text: string;
    try {
      // A few hundred bytes, read at most a few times per attempt: synchronously is cheapest,
      // and asking first spares the usual miss an exception.
      if (!existsSync(this.exitPath)) return false;
      text = readFileSync(this.exitPath, "utf8");
    } catch {
      return false;
    }
    const parsed = ExitFile.safeParse(safeJson(text));
    if (!parsed.success) return false;
    this.finish(fromFile(parsed.data));
    return true;
  }

  /** One reconcile step, given the server's panes by session name. Returns "kick" for a dead pane without status. */
  async reconcile(panes: ReadonlyMap<string, PaneRow>): Promise<"kick" | null> {
    if (await this.checkFile()) return null;
    const row = panes.get(this.spec.session);
    if (!row || !this.isOurs(row)) {
      // Re-check once a tick later: the supervisor may be writing exit.json right after a hangup.
      this.goneTicks += 1;
      if (this.goneTicks >= 2) {
        await this.finishLost(
          row ? "its tmux session now belongs to another attempt" : "its tmux session is gone",
        );
      }
      return null;
    }
    this.goneTicks = 0;
    if (!row.dead) {
      this.deadTicks = 0;
      return null;
    }
    if (row.deadStatus === null && row.deadSignal === null) return "kick";
    // The supervisor writes exit.json before it exits, so a dead pane without one means the
    // supervisor itself failed (perl missing, killed by SIGKILL...). Confirm on the next tick.
    this.deadTicks += 1;
    if (this.deadTicks >= 2) {
      const how = row.deadSignal !== null ? `signal ${row.deadSignal}` : `status ${row.deadStatus}`;
      await this.finishLost(`the supervisor in its pane ended (${how}) without recording the agent's exit`);
    }
    return null;
  }

  stop(graceMs: number): Promise<ExitRecord> {
    this.killing ??= this.doKill(graceMs);
    return this.killing;
  }

  /** Stops watching; the attempt runs on. */
  release(): void {
    if (this.done) return;
    this.done = true;
    this.unwatch();
  }

  private async doKill(graceMs: number): Promise<ExitRecord> {
    if (this.done || (await this.checkFile())) return this.exited;
    // Right after launch the supervisor may not have forked yet; it writes the pid within
    // milliseconds, and a TERM to the group is a cleaner end than closing the pane.
    const pgid = await this.waitForPid(Math.min(graceMs, PID_WAIT_MS));
    if (pgid !== null) signalGroup(pgid, "SIGTERM");
    // No pid yet: the supervisor is still starting. Closing the session hangs it up, and a
    // supervisor that has not forked yet then never starts the agent.
    else await this.server.killSession(this.spec.session).catch(() => false);
    this.later(graceMs, async () => {
      const pid = pgid ?? (await readPid(this.spec.attemptDir));
      if (pid !== null) signalGroup(pid, "SIGKILL");
      else await this.server.killSession(this.spec.session).catch(() => false);
      // Should the supervisor itself be wedged, closing the pane ends it (and the watch, as lost).
      this.later(KILL_SESSION_AFTER_MS, () => this.server.killSession(this.spec.session).catch(() => false));
    });
    return this.exited;
  }

  private async waitForPid(ms: number): Promise<number | null> {
    const end = Date.now() + ms;
    for (;;) {
      const pid = await readPid(this.spec.attemptDir);
      if (pid !== null || this.done || Date.now() >= end) return pid;
      await new Promise((r) => setTimeout(r, 20));
    }
  }

  private later(ms: number, fn: () => Promise<unknown>): void {
    const timer = setTimeout(() => {
      if (!this.done) void fn();
    }, ms);
    timer.unref();
    this.timers.push(timer);
  }

  private isOurs(row: PaneRow): boolean {
    const { runId, taskId, attempt } = this.spec;
    return (
      (runId === undefined || row.run === runId) &&
      (taskId === undefined || row.task === taskId) &&
      (attempt === undefined || row.attempt === attempt)
    );
  }

  private async finishLost(detail: string): Promise<void> {
    if (await this.checkFile()) return;
    this.finish({
      exit_code: null,
      signal: null,
      started_at: null,
      finished_at: new Date().toISOString(),
      pid: await readPid(this.spec.attemptDir),
      stdout_bytes: 0,
      stderr_bytes: 0,
      truncated: false,
      launch_failed: false,
      lost: true,
      detail,
    });
  }

  private finish(record: ExitRecord): void {
    if (this.done) return;
    this.done = true;
    this.unwatch();
    this.resolve(record);
  }

  private unwatch(): void {
    this.watcher?.close();
    this.watcher = null;
    for (const t of this.timers) clearTimeout(t);
    this.reconciler.remove(this);
  }
}

function fromFile(f: ExitFile): ExitRecord {
  const record: ExitRecord = {
    exit_code: f.exit_code,
    signal: f.signal,
    started_at: f.started_at,
    finished_at: f.finished_at,
    pid: f.pid,
    stdout_bytes: f.stdout_bytes,
    stderr_bytes: f.stderr_bytes,
    truncated: f.truncated,
    launch_failed: f.launch_failed,
    // The pane was closed under the agent (kill-session, server death): the supervisor passed the
    // hangup on and recorded how the agent ended, but the attempt did not end on its own.
    lost: f.hangup,
  };
  const details = [f.error, f.hangup ? "its tmux session was closed while the agent ran" : null].filter(
    Boolean,
  );
  if (details.length > 0) record.detail = details.join("; ");
  return record;
}

function safeJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return null;
  }
}

async function readPid(attemptDir: string): Promise<number | null> {
  const text = await readFile(join(attemptDir, "pid"), "utf8").catch(() => "");
  const pid = Number(text.trim());
  return Number.isInteger(pid) && pid > 1 ? pid : null;
}

/** The agent leads its own process group (pid = pgid); a negative pid signals all of it. */
function signalGroup(pgid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-pgid, signal);
  } catch {
    // ESRCH: the group is already gone.
  }
}

/**
 * One reconcile pass for all attempts a runner watches on its server: a single `list-panes -a`
 * per tick, however many tasks run (each tmux client costs a few ms of a 2-core machine). Owned
 * by the runner (src/tmux/runner.ts).
 */
export class Reconciler {
  private readonly watches = new Set<AttemptWatch>();
  private timer: NodeJS.Timeout | null = null;
  private busy = false;

  constructor(private readonly server: TmuxServer) {}

  add(w: AttemptWatch): void {
    this.watches.add(w);
    this.timer ??= setInterval(() => void this.tick(), RECONCILE_MS);
    this.refresh();
  }

  remove(w: AttemptWatch): void {
    this.watches.delete(w);
    if (this.watches.size === 0 && this.timer) {
      clearInterval(this.timer);
      this.timer = null;
    }
  }

  /** The timer stays unref'd unless some watch has no fs watcher to keep the process alive. */
  refresh(): void {
    if (!this.timer) return;
    if ([...this.watches].some((w) => w.needsTimerRef)) this.timer.ref();
    else this.timer.unref();
  }

  private async tick(): Promise<void> {
    if (this.busy) return;
    this.busy = true;
    try {
      let panes: Map<string, PaneRow>;
      try {
        panes = new Map();
        for (const row of await this.server.listPanes())
          if (!panes.has(row.session)) panes.set(row.session, row);
      } catch {
        // A transient failure (fork, timeout) proves nothing about the sessions: next tick.
        return;
      }
      const results = await Promise.all([...this.watches].map((w) => w.reconcile(panes).catch(() => null)));
      if (results.includes("kick")) await this.server.kickChld().catch(() => {});
    } finally {
      this.busy = false;
    }
  }
}
