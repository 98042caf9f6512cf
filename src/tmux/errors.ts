import { EnvironmentError, TermorchError } from "../errors.js";

/**
 * A tmux command failed in a way termorch did not expect. Exit 70: the server or the machine
 * misbehaved, not the input.
 */
export class TmuxError extends TermorchError {
  readonly kind = "tmux";
  constructor(
    message: string,
    /** The tmux arguments after `-L <socket> -f <conf>`. */
    readonly args: readonly string[],
    /** tmux's stderr, trimmed. */
    readonly stderr: string,
    /** tmux's exit status; null when it could not be started, timed out or was killed. */
    readonly status: number | null,
    /** What the command line printed before it failed (a spawned client's stdout). */
    readonly stdout = "",
  ) {
    super(message);
    this.name = "TmuxError";
  }

  /** The server is not running (or went away while the command ran). */
  get noServer(): boolean {
    return /no server running|error connecting to|server exited unexpectedly|lost server/i.test(this.stderr);
  }

  /** The target session, window or pane does not exist. */
  get noTarget(): boolean {
    return /can't find (session|window|pane)|no current target|no such session/i.test(this.stderr);
  }
}

/** Why a launch failed; `duplicate_session` means that attempt is already live. */
export type LaunchFailure = "duplicate_session" | "attempt_exists" | "invalid_spec" | "setup" | "tmux";

/** A task attempt could not be started. The runner reports it as reason `launch_error`. */
export class LaunchError extends TermorchError {
  readonly kind = "launch_error";
  constructor(
    message: string,
    readonly code: LaunchFailure,
    readonly session: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = "LaunchError";
  }
}

/** tmux or perl is missing: exit 2, like every environment problem. */
export class TmuxEnvironmentError extends EnvironmentError {
  constructor(message: string) {
    super(message);
    this.name = "TmuxEnvironmentError";
  }
}
