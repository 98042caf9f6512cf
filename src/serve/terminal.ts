import { createRequire } from "node:module";
import { execa } from "execa";
import type { IPty } from "node-pty";

type Env = Readonly<Record<string, string | undefined>>;

/** Where a task's session is: a run's tmux server (its socket path, or its -L name) and the session. */
export interface SessionTarget {
  socket: string;
  socketPath: string;
  session: string;
}

/** A pty running a read-only tmux client on a session, until it ends or is closed. */
export interface Terminal {
  readonly cols: number;
  readonly rows: number;
  onData(listener: (chunk: string) => void): void;
  onEnd(listener: () => void): void;
  /** Stops reading (the browser is behind); `resume` reads again. */
  pause(): void;
  resume(): void;
  close(): void;
}

/** Ptys open at once, for every browser together: each is a tmux client and a process. */
export const MAX_TERMINALS = 8;

export class TooManyTerminals extends Error {}
export class SessionGone extends Error {}
/** node-pty's native module did not load: an install that did not build it. */
export class PtyUnavailable extends Error {}

/**
 * The live terminals of `termorch serve`: each a node-pty running
 * `tmux attach-session -f read-only,ignore-size` on a task's session, sized to its pane. A
 * read-only client sends no keys to the pane (only detach and switch bindings act), and
 * `ignore-size` keeps the agent's window at its own size whatever the browser's. At most
 * MAX_TERMINALS at once; `closeAll` ends them (the server shutting down).
 */
export class TerminalPool {
  private readonly open = new Set<IPty>();

  constructor(
    private readonly env: Env,
    private readonly max = MAX_TERMINALS,
  ) {}

  get size(): number {
    return this.open.size;
  }

  async attach(target: SessionTarget): Promise<Terminal> {
    if (this.open.size >= this.max)
      throw new TooManyTerminals(`${this.max} terminals are open; close one first`);
    const env = clientEnv(this.env);
    const server = target.socketPath ? ["-S", target.socketPath] : ["-L", target.socket];
    const size = await paneSize(server, target.session, env);
    if (!size) throw new SessionGone(`session ${target.session} is gone`);
    // Counted again: another attach may have opened one while this one asked tmux.
    if (this.open.size >= this.max)
      throw new TooManyTerminals(`${this.max} terminals are open; close one first`);
    const pty = loadPty().spawn(
      "tmux",
      // -u: UTF-8 whatever the locale of serve's environment; -E: serve's environment stays out of the session's.
      ["-u", ...server, "attach-session", "-E", "-f", "read-only,ignore-size", "-t", `=${target.session}`],
      { name: "xterm-256color", cols: size.cols, rows: size.rows, cwd: "/", env },
    );
    this.open.add(pty);
    let ended = false;
    const endListeners: Array<() => void> = [];
    const end = (): void => {
      if (ended) return;
      ended = true;
      this.open.delete(pty);
      for (const l of endListeners) l();
    };
    pty.onExit(end);
    return {
      cols: size.cols,
      rows: size.rows,
      onData: (listener) => {
        pty.onData(listener);
      },
      onEnd: (listener) => {
        if (ended) listener();
        else endListeners.push(listener);
      },
      pause: () => pty.pause(),
      resume: () => pty.resume(),
      close: () => {
        if (ended) return;
        try {
          pty.kill();
        } catch {
          // Already exited: its exit event ends it.
        }
        end();
      },
    };
  }

  closeAll(): void {
    for (const pty of this.open) {
      try {
        pty.kill();
      } catch {}
    }
    this.open.clear();
  }
}

/** The client's environment: serve's own, without TMUX (tmux refuses to nest a client otherwise). */
function clientEnv(base: Env): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(base))
    if (v !== undefined && k !== "TMUX" && k !== "TMUX_PANE") env[k] = v;
  env.TERM = "xterm-256color";
  return env;
}

/**
 * The size a client needs to show the session's pane whole: the pane, plus the status line(s)
 * when the session shows any (tmux's default: one, at the bottom).
 */
async function paneSize(
  server: string[],
  session: string,
  env: Record<string, string>,
): Promise<{ cols: number; rows: number } | null> {
  const r = await execa(
    "tmux",
    [...server, "display-message", "-p", "-t", `=${session}:`, "#{pane_width} #{pane_height} #{status}"],
    { env, extendEnv: false, reject: false },
  );
  const m = /^(\d+) (\d+) (\S+)$/.exec(String(r.stdout).trim());
  if (r.exitCode !== 0 || !m) return null;
  const status = m[3] === "off" ? 0 : m[3] === "on" ? 1 : Number(m[3]) || 0;
  return { cols: Number(m[1]), rows: Number(m[2]) + status };
}

let pty: typeof import("node-pty") | null = null;

/**
 * node-pty (a native module) is loaded the first time a terminal opens, by Node's own require:
 * the CLI's bundle leaves it out (scripts/bundle.js), as its addon is found relative to its files.
 */
function loadPty(): typeof import("node-pty") {
  try {
    pty ??= createRequire(import.meta.url)("node-pty") as typeof import("node-pty");
  } catch (error) {
    throw new PtyUnavailable(
      `node-pty, which serve's terminals run on, is not built (${error instanceof Error ? error.message.split("\n")[0] : String(error)}): install termorch with npm install -g --allow-scripts=node-pty, or run npm rebuild node-pty in its folder`,
    );
  }
  return pty;
}
