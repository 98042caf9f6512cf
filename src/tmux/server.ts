import { type ExecFileException, execFile } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { mkdtemp, readFile, realpath, rename, rm, writeFile } from "node:fs/promises";
import { setPriority, tmpdir } from "node:os";
import { join } from "node:path";
import { SOCKET_NAME_PATTERN, SOCKET_NAME_RULE } from "../contract/config.js";
import { tmuxKeyOf } from "../contract/keys.js";
import { ensureUserDir } from "../fs/names.js";
import { TmuxEnvironmentError, TmuxError } from "./errors.js";

/** How to reach (and, on first use, start) termorch's private tmux server. */
export interface TmuxServerOptions {
  /** Socket name, as for `tmux -L`. */
  socket: string;
  /** Scrollback lines per pane; fixed when a pane is created. Default 10000. */
  historyLimit?: number;
  /** Size of detached sessions, `WIDTHxHEIGHT`. Default 200x50. */
  size?: `${number}x${number}`;
  /** Where PATH, HOME, LANG… for tmux come from. Default `process.env`. */
  baseEnv?: NodeJS.ProcessEnv;
  /** The tmux executable. Default `tmux` (looked up in PATH). */
  tmuxBin?: string;
}

interface BatchItem {
  commands: (readonly string[])[];
  resolve: () => void;
  reject: (error: unknown) => void;
}

/** After a paste, how long the screen must hold still before Enter, how often it is looked at, and the longest wait. */
const PASTE_SETTLE_MS = 150;
const PASTE_POLL_MS = 30;
const PASTE_DRAWN_MS = 3000;
/**
 * Between two keys: how long the screen must hold still after a change, how long an unchanged
 * screen is given (a key that draws nothing, Down on a menu's last line), and the longest wait.
 */
const KEY_SETTLE_MS = 100;
const KEY_QUIET_MS = 300;
const KEY_DRAWN_MS = 2000;

/**
 * Text as it may be pasted: without control characters other than tab and line breaks. An ESC
 * would let the text end the bracketed paste itself (`ESC[201~`) and type the rest as keys, into
 * an agent's session; C1 controls (U+0080-U+009F) are 8-bit escapes to some terminals.
 */
export function pastable(text: string): string {
  // biome-ignore lint/suspicious/noControlCharactersInRegex: removing them is the point.
  return text.replace(/[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f-\u009f]/g, "");
}

/** One pane of the server, as `list-panes -a` shows it. */
export interface PaneRow {
  session: string;
  /** Session options set at launch; null for sessions termorch did not create. */
  run: string | null;
  task: string | null;
  attempt: number | null;
  paneId: string;
  panePid: number | null;
  /** The pane's program (the supervisor) has exited; the pane stays because of remain-on-exit. */
  dead: boolean;
  deadStatus: number | null;
  deadSignal: number | null;
}

const PANE_FORMAT = [
  "#{session_name}",
  "#{pane_id}",
  "#{pane_pid}",
  "#{pane_dead}",
  "#{pane_dead_status}",
  "#{pane_dead_signal}",
  "#{@termorch_run}",
  "#{@termorch_task}",
  "#{@termorch_attempt}",
].join("\t");

/** Bytes of arguments per batched command line (commandInBatch); tmux's own limit is ~16 KB. */
const BATCH_BYTES = 8 * 1024;

/** A tmux client round trip is a few ms; this only stops a wedged server from hanging us. */
const COMMAND_TIMEOUT_MS = 30_000;

/**
 * tmux parses its arguments even in argv form: an argument ending in `;` ends the command.
 * `x\;` stands for a literal `x;` (tmux turns the backslash into the semicolon).
 */
function tmuxArg(value: string): string {
  return value.endsWith(";") ? `${value.slice(0, -1)}\\;` : value;
}

/**
 * Escapes `#` for arguments tmux expands as formats (`new-session -c`, `pipe-pane`'s command),
 * without the argv-form escaping: for raw arguments of {@link TmuxServer.command}.
 */
export function formatEscape(value: string): string {
  return value.replaceAll("#", "##");
}

/** termorch's own tmux server (`tmux -L <socket>`), never the operator's default one. */
export class TmuxServer {
  readonly socket: string;
  readonly historyLimit: number;
  readonly width: number;
  readonly height: number;
  private readonly env: Record<string, string>;
  private readonly baseEnv: NodeJS.ProcessEnv;
  private readonly bin: string;
  private confPath: Promise<string> | null = null;
  /** Command lines waiting for the next batch client; null when no flush is scheduled or running. */
  private batch: BatchItem[] | null = null;
  /** Whether a batch's clients are running: command lines asked for meanwhile wait for them. */
  private batchRunning = false;

  constructor(options: TmuxServerOptions) {
    if (!SOCKET_NAME_PATTERN.test(options.socket)) {
      throw new TmuxEnvironmentError(`invalid tmux socket name "${options.socket}": it ${SOCKET_NAME_RULE}`);
    }
    this.socket = options.socket;
    this.historyLimit = options.historyLimit ?? 10_000;
    const size = /^(\d+)x(\d+)$/.exec(options.size ?? "200x50");
    if (!size)
      throw new TmuxEnvironmentError(`invalid tmux session size "${options.size}": use WIDTHxHEIGHT`);
    this.width = Number(size[1]);
    this.height = Number(size[2]);
    this.bin = options.tmuxBin ?? "tmux";
    this.baseEnv = options.baseEnv ?? process.env;
    this.env = minimalEnv(this.baseEnv);
  }

  /**
   * Runs one tmux command line (argv, never a shell); returns stdout (without its final
   * newline) or throws a TmuxError. node:child_process rather than execa here: this is the
   * per-task hot path, and execa's machinery cost 2.3 ms of CPU per call against 0.9 ms
   * (200 calls, measured); the other subprocesses keep execa.
   */
  async run(args: readonly string[]): Promise<string> {
    const conf = await this.config();
    const r = await new Promise<{ error: ExecFileException | null; stdout: string; stderr: string }>(
      (resolve) => {
        const child = execFile(
          this.bin,
          ["-L", this.socket, "-f", conf, ...args],
          {
            // No TMUX from our caller (it would point at the operator's server), no secrets.
            env: this.env,
            timeout: COMMAND_TIMEOUT_MS,
            maxBuffer: 256 * 1024 * 1024,
            encoding: "utf8",
          },
          (error, stdout, stderr) => resolve({ error, stdout, stderr }),
        );
        child.stdin?.end();
        // A client only hands its command to the server: on a busy machine the supervisors that
        // record agents' exits, and we who announce them, go first (exit → status p50 at P8 on
        // 2 cores: 50 ms at the same priority, 12 ms at nice 10; throughput unchanged).
        if (child.pid) {
          try {
            setPriority(child.pid, 10);
          } catch {
            // Gone already, or not allowed: it runs at our priority.
          }
        }
      },
    );
    if (!r.error) return r.stdout.endsWith("\n") ? r.stdout.slice(0, -1) : r.stdout;
    const stderr = r.stderr.trim();
    if (r.error.code === "ENOENT") {
      throw new TmuxEnvironmentError(`tmux was not found (tried "${this.bin}" in PATH); install tmux >= 3.2`);
    }
    const status = typeof r.error.code === "number" ? r.error.code : null;
    const why = r.error.killed
      ? `timed out after ${COMMAND_TIMEOUT_MS} ms`
      : stderr || `exited with ${status ?? r.error.signal ?? "an error"}`;
    throw new TmuxError(`tmux ${args[0] ?? ""} failed: ${why}`, args, stderr, status, r.stdout);
  }

  /**
   * Runs independent command lines together: those asked for in one turn of the event loop
   * share one spawned tmux client (a client costs ~4 ms of CPU; a wave of launches asks for
   * several at once), and so do those asked for while a batch's clients run: they go in the
   * next batch once it is back. A lone launch is not delayed; under load, launches share
   * clients (200 trivial tasks at P8: 130 clients → ~60, Node's CPU −2 ms a task: spawning a
   * client blocks Node for ~3.5 ms and ~1.5 ms of CPU while it forks). Each settles on its
   * own: tmux stops a command line at its first failing command, so a marker printed after
   * each line tells which ran; the failing one gets the error and those after it run again.
   */
  commandInBatch(...commands: (readonly string[])[]): Promise<void> {
    return new Promise((resolve, reject) => {
      if (!this.batch) {
        this.batch = [];
        if (!this.batchRunning) setImmediate(() => void this.flushBatch());
      }
      this.batch.push({ commands, resolve, reject });
    });
  }

  private async flushBatch(): Promise<void> {
    const items = this.batch ?? [];
    this.batch = null;
    this.batchRunning = true;
    try {
      await this.runChunks(items);
    } finally {
      this.batchRunning = false;
      if (this.batch) setImmediate(() => void this.flushBatch());
    }
  }

  private async runChunks(items: BatchItem[]): Promise<void> {
    // tmux refuses a command line over ~16 KB ("command too long"): chunks stay well under.
    const chunks: BatchItem[][] = [];
    let size = Number.POSITIVE_INFINITY;
    for (const item of items) {
      const bytes = item.commands.reduce(
        (n, c) => n + c.reduce((m, a) => m + Buffer.byteLength(a) + 1, 2),
        64,
      );
      if (size + bytes > BATCH_BYTES) {
        chunks.push([]);
        size = 0;
      }
      chunks.at(-1)!.push(item);
      size += bytes;
    }
    await Promise.all(chunks.map((chunk) => this.runBatch(chunk)));
  }

  private async runBatch(items: BatchItem[]): Promise<void> {
    if (items.length === 1) {
      const [only] = items as [BatchItem];
      await this.command(...only.commands).then(() => only.resolve(), only.reject);
      return;
    }
    const marker = (k: number): string => `termorch-batch-${k}`;
    const line = items.flatMap((item, k) => [...item.commands, ["display-message", "-p", marker(k)]]);
    try {
      await this.command(...line);
      for (const item of items) item.resolve();
    } catch (error) {
      const printed = error instanceof TmuxError ? new Set(error.stdout.split("\n")) : new Set<string>();
      let k = 0;
      while (k < items.length && printed.has(marker(k))) items[k++]!.resolve();
      items[k]?.reject(error);
      for (const item of items.slice(k + 1))
        this.commandInBatch(...item.commands).then(item.resolve, item.reject);
    }
  }

  /**
   * Runs a command line of one or more tmux commands, each given as raw arguments (no
   * argv-form escaping: {@link tmuxArg} is applied here when needed), through one spawned client.
   */
  command(...commands: (readonly string[])[]): Promise<string> {
    return this.run(commands.flatMap((c, i) => [...(i === 0 ? [] : [";"]), ...c.map(tmuxArg)]));
  }

  /** Absolute path of the server's socket (for `tmux -S`), whether or not the server runs. */
  async socketPath(): Promise<string> {
    try {
      const path = (await this.command(["display-message", "-p", "#{socket_path}"])).trim();
      if (path) return path;
    } catch (error) {
      if (!(error instanceof TmuxError)) throw error;
    }
    return this.defaultSocketPath();
  }

  /** What tmux itself computes for -L: $TMUX_TMPDIR (or /tmp), resolved, + tmux-UID/NAME. */
  private async defaultSocketPath(): Promise<string> {
    const base = this.env.TMUX_TMPDIR || "/tmp";
    const resolved = await realpath(base).catch(() => base);
    return join(resolved, `tmux-${process.getuid?.() ?? 0}`, this.socket);
  }

  /** The server's pid; throws a TmuxError (noServer) when it is not running. */
  async serverPid(): Promise<number> {
    const out = (await this.command(["display-message", "-p", "#{pid}"])).trim();
    const pid = Number(out);
    if (!Number.isInteger(pid) || pid <= 0) throw new TmuxError(`tmux reported pid "${out}"`, [], "", 0);
    return pid;
  }

  /** Every pane of the server; empty when the server is not running. */
  async listPanes(): Promise<PaneRow[]> {
    let out: string;
    try {
      out = await this.command(["list-panes", "-a", "-F", PANE_FORMAT]);
    } catch (error) {
      // No sessions at all answers "no current target" (tmux 3.3).
      if (error instanceof TmuxError && (error.noServer || error.noTarget)) return [];
      throw error;
    }
    const rows: PaneRow[] = [];
    for (const line of out.split("\n")) {
      if (!line) continue;
      const [session = "", paneId = "", pid, dead, status, signal, run, task, attempt] = line.split("\t");
      rows.push({
        session,
        run: run || null,
        task: task || null,
        attempt: intOrNull(attempt),
        paneId,
        panePid: intOrNull(pid),
        dead: dead === "1",
        deadStatus: intOrNull(status),
        deadSignal: intOrNull(signal),
      });
    }
    return rows;
  }

  /** Whether a session of exactly this name exists. */
  async hasSession(name: string): Promise<boolean> {
    try {
      await this.command(["has-session", "-t", `=${name}`]);
      return true;
    } catch (error) {
      if (error instanceof TmuxError && (error.noServer || error.noTarget)) return false;
      throw error;
    }
  }

  /** Kills the session of exactly this name; false when there was none. */
  async killSession(name: string): Promise<boolean> {
    try {
      await this.command(["kill-session", "-t", `=${name}`]);
      return true;
    } catch (error) {
      if (error instanceof TmuxError && (error.noServer || error.noTarget)) return false;
      throw error;
    }
  }

  /**
   * Kills many sessions, sharing spawned clients as {@link commandInBatch} does. A failing
   * command ends its line there, so only names that exist are sent (one that went meanwhile
   * costs one more client).
   */
  async killSessions(names: readonly string[]): Promise<void> {
    if (names.length === 0) return;
    let listed: string;
    try {
      listed = await this.command(["list-sessions", "-F", "#{session_name}"]);
    } catch (error) {
      if (error instanceof TmuxError && (error.noServer || error.noTarget)) return;
      throw error;
    }
    const existing = new Set(listed.split("\n"));
    await Promise.all(
      names
        .filter((n) => existing.has(n))
        .map((n) => this.commandInBatch(["kill-session", "-t", `=${n}`]).catch(() => {})),
    );
  }

  /** What the session's active pane shows, with its scrollback; trailing blank lines removed. */
  async capturePane(name: string): Promise<string> {
    const out = await this.command(["capture-pane", "-p", "-J", "-S", "-", "-E", "-", "-t", `=${name}:`]);
    return out.replace(/\n+$/, "");
  }

  /**
   * The visible screens of many sessions through one spawned client (a sampler asks every
   * second for every interactive task). A session that is gone answers null: tmux stops a
   * command line at its first failing command, so then each is asked on its own.
   */
  async captureScreens(names: readonly string[]): Promise<Map<string, string | null>> {
    const out = new Map<string, string | null>();
    if (names.length === 0) return out;
    const marker = `termorch-screen-${randomBytes(8).toString("hex")}`;
    try {
      const text = await this.command(
        ...names.flatMap((n) => [
          ["capture-pane", "-p", "-t", `=${n}:`],
          ["display-message", "-p", marker],
        ]),
      );
      const parts = `${text}\n`.split(`${marker}\n`);
      for (const [i, n] of names.entries()) out.set(n, (parts[i] ?? "").replace(/\n+$/, ""));
      return out;
    } catch (error) {
      if (!(error instanceof TmuxError)) throw error;
      if (names.length === 1) {
        out.set(names[0]!, null);
        return out;
      }
    }
    for (const n of names) out.set(n, (await this.captureScreens([n])).get(n) ?? null);
    return out;
  }

  /**
   * Types a file into the session's pane as one bracketed paste, then Enter: the application
   * sees the whole text at once (line breaks do not submit it) and Enter submits it. Through a
   * named buffer, deleted after the paste, so nothing is left in the server's paste buffers.
   */
  async pasteFile(name: string, file: string): Promise<void> {
    const text = pastable(await readFile(file, "utf8"));
    // Empty: Enter alone (accepting a default is an answer too); tmux refuses an empty buffer.
    if (text !== "") {
      const before = await this.screenOf(name);
      const dir = await mkdtemp(join(tmpdir(), "termorch-paste-"));
      try {
        const clean = join(dir, "text");
        await writeFile(clean, text, { mode: 0o600 });
        const buffer = `termorch-${randomBytes(6).toString("hex")}`;
        await this.command(
          ["load-buffer", "-b", buffer, clean],
          ["paste-buffer", "-p", "-d", "-b", buffer, "-t", `=${name}:`],
        );
      } finally {
        await rm(dir, { recursive: true, force: true });
      }
      await this.drawn(name, before);
    }
    await this.command(["send-keys", "-t", `=${name}:`, "Enter"]);
  }

  /**
   * Presses keys in the session's pane, one `send-keys` each, in order: a named key as tmux's key,
   * a character typed as it is (`-l`). Each waits until the screen took the one before: a TUI
   * reads an Escape that arrives with the next key's bytes as one sequence (Escape then Enter
   * would be Alt+Enter), and a menu's next screen must be drawn before a key meant for it.
   */
  async sendKeys(name: string, keys: readonly string[]): Promise<void> {
    // All checked before the first is pressed.
    const presses = keys.map((key) => {
      const how = tmuxKeyOf(key);
      return "name" in how ? [how.name] : ["-l", "--", how.literal];
    });
    for (const [i, press] of presses.entries()) {
      const last = i === presses.length - 1;
      const before = last ? null : await this.screenOf(name);
      await this.command(["send-keys", "-t", `=${name}:`, ...press]);
      if (!last)
        await this.drawn(name, before, {
          settleMs: KEY_SETTLE_MS,
          quietMs: KEY_QUIET_MS,
          maxMs: KEY_DRAWN_MS,
        });
    }
  }

  private async screenOf(name: string): Promise<string | null> {
    return (await this.captureScreens([name])).get(name) ?? null;
  }

  /**
   * Waits until the application has drawn what was sent (its screen changed, then held still
   * for `settleMs`), or the screen stayed as it was for `quietMs`, at most `maxMs`. TUIs that
   * tell a paste from typing by timing take an Enter that arrives with the paste's last bytes as
   * a line break (Gemini CLI 0.61 does, within about 40 ms): it must come once the paste has been
   * taken.
   */
  private async drawn(
    name: string,
    before: string | null,
    o: { settleMs: number; quietMs: number; maxMs: number } = {
      settleMs: PASTE_SETTLE_MS,
      quietMs: Number.POSITIVE_INFINITY,
      maxMs: PASTE_DRAWN_MS,
    },
  ): Promise<void> {
    const start = Date.now();
    let last = before;
    let stillSince = start;
    while (Date.now() - start < o.maxMs) {
      await new Promise((r) => setTimeout(r, PASTE_POLL_MS));
      const now = await this.screenOf(name);
      if (now === null) return;
      if (now !== last) {
        last = now;
        stillSince = Date.now();
      } else if (now !== before && Date.now() - stillSince >= o.settleMs) return;
      else if (now === before && Date.now() - start >= o.quietMs) return;
    }
  }

  /**
   * tmux <= 3.5 built with libutempter can lose SIGCHLD, leaving a dead pane without its status;
   * a fresh SIGCHLD makes the server reap it.
   */
  async kickChld(): Promise<void> {
    let pid: number;
    try {
      pid = await this.serverPid();
    } catch (error) {
      if (error instanceof TmuxError && error.noServer) return;
      throw error;
    }
    try {
      process.kill(pid, "SIGCHLD");
    } catch {
      // The server exited in between: nothing to repair.
    }
  }

  /**
   * Lets the server exit once it has no sessions, so a finished run leaves nothing running.
   * exit-empty (not kill-server) so that a session another run creates meanwhile survives.
   * Returns true when no session was left.
   */
  async closeIfIdle(): Promise<boolean> {
    let sessions: string;
    try {
      sessions = await this.run(["list-sessions", "-F", "#{session_name}"]);
    } catch (error) {
      if (error instanceof TmuxError && (error.noServer || error.noTarget)) return true;
      throw error;
    }
    if (sessions.split("\n").some((s) => s !== "")) return false;
    try {
      await this.run(["set-option", "-s", "exit-empty", "on"]);
    } catch (error) {
      // The server may exit before it answers; that is the point.
      if (!(error instanceof TmuxError && error.noServer)) throw error;
    }
    return true;
  }

  /** Kills this server (its socket only) and every session on it. For tests and `termorch clean`. */
  async kill(): Promise<void> {
    const path = await this.socketPath();
    try {
      await this.run(["kill-server"]);
    } catch (error) {
      if (!(error instanceof TmuxError && error.noServer)) throw error;
    }
    // tmux 3.3 leaves its socket file behind; nothing listens on it any more.
    await rm(path, { force: true });
  }

  /** The config file every call passes with -f; whichever call starts the server loads it. */
  private config(): Promise<string> {
    this.confPath ??= writeConfig(this.historyLimit, this.width, this.height).catch((error: unknown) => {
      this.confPath = null;
      throw error;
    });
    return this.confPath;
  }
}

function intOrNull(value: string | undefined): number | null {
  if (value === undefined || value === "") return null;
  const n = Number(value);
  return Number.isInteger(n) ? n : null;
}

/**
 * The environment of our tmux clients, and so of a server one of them starts (sessions
 * inherit it). TMUX_TMPDIR is kept because it decides where `-L` sockets live: operators who
 * run `tmux -L <socket> attach` must land on the same server.
 */
function minimalEnv(base: NodeJS.ProcessEnv): Record<string, string> {
  const env: Record<string, string> = {};
  for (const name of ["PATH", "HOME", "USER", "SHELL", "TERM", "TMUX_TMPDIR"]) {
    const value = base[name];
    if (value) env[name] = value;
  }
  env.PATH ??= "/usr/local/bin:/usr/bin:/bin";
  // tmux falls back to a non-UTF-8 locale without one and then mangles non-ASCII pane output.
  env.LANG = base.LANG || "C.UTF-8";
  return env;
}

async function writeConfig(historyLimit: number, width: number, height: number): Promise<string> {
  const text = [
    "# Written by termorch for its private tmux server (docs/ARCHITECTURE.md: the seams).",
    // With exit-empty on, clients racing a server whose last session just ended fail with
    // "server exited unexpectedly"; closeIfIdle turns it back on at the end of a run.
    "set -s exit-empty off",
    "set -s exit-unattached off",
    // Dead panes keep #{pane_dead_status}/#{pane_dead_signal} and their output for inspection.
    "set -g remain-on-exit on",
    `set -g history-limit ${historyLimit}`,
    // Detached sessions are 80x24 otherwise; agents' TUIs lay out for the size they start with.
    `set -g default-size ${width}x${height}`,
    "",
  ].join("\n");
  const hash = createHash("sha256").update(text).digest("hex").slice(0, 16);
  // The per-user folder, checked: only this user can read the config or swap it.
  const dir = await ensureUserDir();
  const path = join(dir, `tmux-${hash}.conf`);
  // Content-addressed: concurrent writers of the same settings cannot corrupt each other.
  if ((await readFile(path, "utf8").catch(() => null)) === text) return path;
  // Unique per writer: several runs of one process (the daemon) may write it in the same millisecond.
  const tmp = `${path}.${process.pid}.${randomBytes(6).toString("hex")}.tmp`;
  try {
    await writeFile(tmp, text, { mode: 0o600 });
    await rename(tmp, path);
  } catch (error) {
    await rm(tmp, { force: true });
    throw error;
  }
  return path;
}
