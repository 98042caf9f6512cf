import { type ChildProcess, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { TmuxError } from "./errors.js";

/**
 * One persistent tmux control-mode client (`tmux -C`) over plain pipes: a command costs the
 * server ~0.1 ms instead of a spawned client's ~4 ms plus Node's spawn (TMUX-NOTES: cost).
 *
 * A control client must be attached to a session, so it creates a placeholder session
 * (`termorch-control-…`) whose program waits for this process to exit: close() kills it, and
 * should this process die instead, it ends within a second and the placeholder with it.
 *
 * Commands are written one line each, every argument single-quoted for tmux's parser (so no
 * argv-form escaping applies here). tmux answers every command of a line with a
 * `%begin … %end|%error` block, in order; after a failing command the rest of its line is
 * skipped without a block, so a line is done after as many blocks as it has commands or at its
 * first `%error`.
 */
export class ControlClient {
  /** Resolves true once the placeholder session exists and commands are accepted; false if that failed. */
  readonly ready: Promise<boolean>;
  readonly session: string;
  private readonly child: ChildProcess;
  private readonly pending: Pending[] = [];
  private buffer = "";
  private block: { lines: string[]; ours: boolean } | null = null;
  private initBlocks = 0;
  private initError: string | null = null;
  private starting = true;
  private stderr = "";
  private exited = false;
  private readonly exitPromise: Promise<void>;
  private setReady!: (ok: boolean) => void;

  constructor(
    bin: string,
    baseArgs: readonly string[],
    env: Record<string, string>,
    size: { width: number; height: number },
    private readonly timeoutMs: number,
  ) {
    this.session = `termorch-control-${process.pid}-${randomBytes(3).toString("hex")}`;
    this.ready = new Promise((resolve) => {
      this.setReady = resolve;
    });
    const args = [
      ...baseArgs,
      "-C",
      "new-session",
      "-s",
      this.session,
      "-E",
      "-x",
      String(size.width),
      "-y",
      String(size.height),
      "--",
      // Lives as long as this process: with remain-on-exit off for its window, the placeholder
      // closes by itself within a second of our exit, the way any session whose program ends
      // does. Not destroy-unattached: tmux 3.3a's server crashed when it collected a session
      // that way (control-pool.ts).
      "perl",
      "-e",
      "sleep 1 while kill 0, $ARGV[0]",
      String(process.pid),
      ";",
      "set-option",
      "-w",
      "-t",
      `=${this.session}:`,
      "remain-on-exit",
      "off",
    ];
    this.child = spawn(bin, args, { env, stdio: ["pipe", "pipe", "pipe"] });
    this.exitPromise = new Promise((resolve) => {
      this.child.once("close", () => resolve());
    });
    this.child.once("error", (error) => this.onExit(error.message));
    this.child.once("exit", () => this.onExit(null));
    this.child.stdout!.setEncoding("utf8");
    this.child.stdout!.on("data", (chunk: string) => this.onData(chunk));
    this.child.stderr!.setEncoding("utf8");
    this.child.stderr!.on("data", (chunk: string) => {
      this.stderr += chunk;
    });
    this.child.stdin!.on("error", () => {});
    this.refresh();
  }

  /** Whether commands can be sent. */
  get alive(): boolean {
    return !this.exited;
  }

  /**
   * Runs one tmux command line made of several commands (each an array of raw arguments).
   * Resolves with the output of all of them; rejects with a TmuxError naming tmux's message.
   */
  run(commands: readonly (readonly string[])[]): Promise<string> {
    const flat = commands.flatMap((c, i) => (i === 0 ? [...c] : [";", ...c]));
    if (this.exited) return Promise.reject(this.lostError(flat));
    const line = commands.map((c) => c.map(quote).join(" ")).join(" ; ");
    return new Promise<string>((resolve, reject) => {
      const p: Pending = {
        commands: commands.length,
        done: 0,
        out: [],
        args: flat,
        resolve,
        reject,
        timer: null,
      };
      p.timer = setTimeout(() => {
        // A wedged server (or client): give up on this client; the caller's next command spawns one.
        reject(
          new TmuxError(`tmux ${flat[0] ?? ""} failed: timed out after ${this.timeoutMs} ms`, flat, "", null),
        );
        p.reject = () => {};
        p.resolve = () => {};
        this.destroy();
      }, this.timeoutMs);
      this.pending.push(p);
      this.refresh();
      this.child.stdin!.write(`${line}\n`);
    });
  }

  /**
   * Ends the client and its placeholder session, after the commands already sent. Resolves once
   * the client process is gone (bounded: a stuck client is killed).
   */
  async close(): Promise<void> {
    if (!this.exited) {
      // Killing the session we are attached to makes tmux end this client. Its stdin stays open
      // until then: a client that leaves first would leave the placeholder for its program to
      // end (within a second), the other way it goes.
      this.child.stdin!.write(`kill-session -t ${quote(`=${this.session}`)}\n`);
      this.child.ref();
      (this.child.stdout as unknown as { ref?: () => void }).ref?.();
      const timer = setTimeout(() => this.child.stdin!.end(), 2000);
      const kill = setTimeout(() => this.child.kill("SIGTERM"), 4000);
      await this.exitPromise;
      clearTimeout(timer);
      clearTimeout(kill);
    }
  }

  /** Kills the client process (its placeholder then ends with this process). */
  destroy(): void {
    if (!this.exited) this.child.kill("SIGTERM");
  }

  private onData(chunk: string): void {
    this.buffer += chunk;
    let nl = this.buffer.indexOf("\n");
    while (nl >= 0) {
      const line = this.buffer.slice(0, nl);
      this.buffer = this.buffer.slice(nl + 1);
      this.onLine(line);
      nl = this.buffer.indexOf("\n");
    }
  }

  private onLine(line: string): void {
    if (this.block) {
      const end = /^%(end|error) \d+ \d+ (\d+)$/.exec(line);
      if (!end) {
        this.block.lines.push(line);
        return;
      }
      const { lines, ours } = this.block;
      this.block = null;
      const failed = end[1] === "error";
      if (!ours) {
        // Blocks of the initial command line (flags 0): new-session, then set-option.
        this.initBlocks += 1;
        if (failed) this.initError = lines.join("\n");
        if (failed || this.initBlocks === 2) {
          this.starting = false;
          this.setReady(!failed);
          this.refresh();
        }
        return;
      }
      const p = this.pending[0];
      if (!p) return;
      if (failed) {
        this.settle(
          p,
          new TmuxError(`tmux ${p.args[0] ?? ""} failed: ${lines.join("\n")}`, p.args, lines.join("\n"), 1),
        );
        return;
      }
      p.out.push(...lines);
      p.done += 1;
      if (p.done === p.commands) this.settle(p, null);
      return;
    }
    const begin = /^%begin \d+ \d+ (\d+)$/.exec(line);
    if (begin) this.block = { lines: [], ours: begin[1] === "1" };
    // Everything else is a notification (%sessions-changed, %exit, …): nothing to do.
  }

  private settle(p: Pending, error: TmuxError | null): void {
    this.pending.shift();
    if (p.timer) clearTimeout(p.timer);
    if (error) p.reject(error);
    else p.resolve(p.out.join("\n"));
    this.refresh();
  }

  private onExit(spawnError: string | null): void {
    if (this.exited) return;
    this.exited = true;
    if (spawnError !== null) this.stderr += spawnError;
    this.setReady(false);
    for (const p of this.pending.splice(0)) {
      if (p.timer) clearTimeout(p.timer);
      p.reject(this.lostError(p.args));
    }
  }

  private lostError(args: readonly string[]): TmuxError {
    // "lost server" is what a spawned client says when the server goes mid-command: callers
    // treat both the same (TmuxError.noServer).
    const why = [this.initError, this.stderr.trim()].filter(Boolean).join("; ");
    return new TmuxError(
      `tmux ${args[0] ?? ""} failed: lost server (control client ended${why ? `: ${why}` : ""})`,
      args,
      `lost server${why ? `: ${why}` : ""}`,
      null,
    );
  }

  /** Keeps this process alive exactly while commands are waiting for their answer. */
  private refresh(): void {
    if (this.exited) return;
    const busy = this.starting || this.pending.length > 0;
    for (const s of [this.child.stdout, this.child.stderr, this.child.stdin] as const) {
      const h = s as unknown as { ref?: () => void; unref?: () => void };
      if (busy) h.ref?.();
      else h.unref?.();
    }
    if (busy) this.child.ref();
    else this.child.unref();
  }
}

interface Pending {
  commands: number;
  done: number;
  out: string[];
  args: string[];
  resolve: (out: string) => void;
  reject: (error: TmuxError) => void;
  timer: NodeJS.Timeout | null;
}

/** Single-quotes one argument for tmux's command parser (no escapes exist inside '…'). */
export function quote(arg: string): string {
  return `'${arg.replaceAll("'", `'"'"'`)}'`;
}

/** Whether an argument can travel on one control-mode line. */
export function lineSafe(arg: string): boolean {
  return !/[\n\r\0]/.test(arg);
}
