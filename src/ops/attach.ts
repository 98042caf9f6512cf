import { spawn } from "node:child_process";
import { realpathSync } from "node:fs";
import { constants } from "node:os";
import { execa } from "execa";
import { TmuxEnvironmentError } from "../tmux/errors.js";

type Env = Readonly<Record<string, string | undefined>>;

/** How to put the operator's terminal on a task's session. */
export interface AttachPlan {
  /**
   * attach: a new tmux client in the operator's terminal. switch: the operator already sits in a
   * client of termorch's own server, which is moved to the session (nesting a client of a server
   * inside one of its own panes would only confuse the prefix key).
   */
  mode: "attach" | "switch";
  /** tmux arguments (after `tmux`). */
  args: string[];
  /** The tmux client's whole environment. */
  env: Record<string, string>;
}

/** The socket path in `$TMUX` (`<socket_path>,<server_pid>,<session>`), or null outside tmux. */
function tmuxSocketOf(tmuxVar: string | undefined): string | null {
  if (!tmuxVar) return null;
  const path = tmuxVar.split(",")[0];
  return path ? path : null;
}

function samePath(a: string, b: string): boolean {
  const real = (p: string): string => {
    try {
      return realpathSync(p);
    } catch {
      return p;
    }
  };
  return a === b || real(a) === real(b);
}

/**
 * Decides between attaching and switching. Inside the operator's own tmux (another server), the
 * client is started with TMUX unset: tmux refuses to nest otherwise, and the operator reaches the
 * inner client's prefix with the prefix typed twice (C-b C-b d detaches it).
 */
export function attachPlan(o: {
  socket: string;
  socketPath: string;
  session: string;
  readOnly: boolean;
  env: Env;
}): AttachPlan {
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(o.env)) if (v !== undefined) env[k] = v;
  const current = tmuxSocketOf(o.env.TMUX);
  // The recorded path names the run's server exactly; -L would look under the operator's
  // TMUX_TMPDIR, which need not be the one the run had.
  const server = o.socketPath ? ["-S", o.socketPath] : ["-L", o.socket];
  // -E: the operator's DISPLAY, SSH_AUTH_SOCK... stay out of the session's environment.
  if (current && o.socketPath && samePath(current, o.socketPath)) {
    return { mode: "switch", args: [...server, "switch-client", "-E", "-t", `=${o.session}`], env };
  }
  delete env.TMUX;
  return {
    mode: "attach",
    args: [...server, "attach-session", "-E", ...(o.readOnly ? ["-r"] : []), "-t", `=${o.session}`],
    env,
  };
}

/**
 * Runs the plan with the operator's terminal (inherited stdio: the one place termorch hands a
 * child its terminal) and resolves with tmux's exit code once the client detaches or exits.
 * `switch` also sets the client's read-only flag as asked; tmux only offers a toggle for it
 * (`switch-client -r`), so the client's flag is read first and toggled in the same switch (a
 * separate `switch-client -r` would also move the client back to the session it is called from).
 */
export async function runAttach(plan: AttachPlan, readOnly: boolean): Promise<number> {
  if (plan.mode === "attach") return inherit(plan.args, plan.env);
  // tmux resolves "this client" from the pane we run in ($TMUX, $TMUX_PANE), as switch-client will.
  const flag = await execa(
    "tmux",
    [...plan.args.slice(0, 2), "display-message", "-p", "#{client_readonly}"],
    {
      env: plan.env,
      extendEnv: false,
      reject: false,
    },
  );
  const isReadOnly = flag.exitCode === 0 && String(flag.stdout).trim() === "1";
  const args =
    isReadOnly === readOnly ? plan.args : [...plan.args.slice(0, -2), "-r", ...plan.args.slice(-2)];
  return inherit(args, plan.env);
}

function inherit(args: string[], env: Record<string, string>): Promise<number> {
  return new Promise((resolve, reject) => {
    const child = spawn("tmux", args, { stdio: "inherit", env });
    child.once("error", (error: NodeJS.ErrnoException) =>
      reject(
        error.code === "ENOENT"
          ? new TmuxEnvironmentError("tmux was not found in PATH; install tmux >= 3.2")
          : error,
      ),
    );
    child.once("exit", (code, signal) =>
      resolve(code ?? 128 + (signal ? (constants.signals[signal] ?? 0) : 0)),
    );
  });
}
