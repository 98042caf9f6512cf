/**
 * Errors that stop a command. Expected task outcomes are values (see contract/reason.ts);
 * these are for conditions where termorch itself cannot go on. The CLI turns them into a
 * message and an exit code in one place (cli/main.ts).
 */

/** Exit codes of `run` and `resume` (README: Exit codes). */
export const ExitCode = {
  ok: 0,
  failed: 1,
  invalid: 2,
  conflict: 3,
  locked: 4,
  /** Stopped at a wave boundary (`termorch stop --at-boundary`, an approval's timeout): `termorch resume` goes on. */
  stopped: 5,
  internal: 70,
  interrupted: 130,
} as const;
export type ExitCode = (typeof ExitCode)[keyof typeof ExitCode];

/** What stops a command, as the report's `error.kind` names it. */
export type ErrorKind =
  /** The input files or flags are wrong: nothing was started. */
  | "invalid_input"
  /** The command line could not be parsed (commander's own errors). */
  | "usage"
  /** tmux, git or perl is missing or too old. */
  | "environment"
  /** Another run holds the workspace. */
  | "locked"
  | "git"
  | "tmux"
  | "launch_error"
  /** `termorch plan`: no try of the planner wrote a plan that validates. */
  | "plan_failed"
  /** SIGINT or SIGTERM stopped a command that writes no report (`termorch plan`). */
  | "interrupted"
  /** Anything termorch did not expect. */
  | "internal";

/**
 * The one table from error kind to exit code: the CLI (an error it catches) and the report
 * (its `exit_code`) both read it, so the two never disagree.
 */
export const exitCodeOfKind: { readonly [K in ErrorKind]: ExitCode } = {
  invalid_input: ExitCode.invalid,
  usage: ExitCode.invalid,
  environment: ExitCode.invalid,
  locked: ExitCode.locked,
  git: ExitCode.internal,
  tmux: ExitCode.internal,
  launch_error: ExitCode.internal,
  plan_failed: ExitCode.failed,
  interrupted: ExitCode.interrupted,
  internal: ExitCode.internal,
};

export abstract class TermorchError extends Error {
  /** Short machine-readable kind, written into the report's `error` object. */
  abstract readonly kind: ErrorKind;
  get exitCode(): ExitCode {
    return exitCodeOfKind[this.kind];
  }
}

/** Ends an exhaustive switch: the compiler rejects a case left out, and a value from outside the types throws. */
/** An error's message, or the thrown value as text. */
export function errorText(error: unknown): string {
  if (error instanceof Error) return error.message;
  return String(error);
}

export function unreachable(x: never): never {
  throw new Error(`unexpected value ${JSON.stringify(x)}`);
}

/** One problem found in the user's input, located as precisely as we can. */
export interface InputProblem {
  /** The file the problem is in. */
  file?: string;
  /** Dotted JSON path of the offending field, e.g. `tasks[2].dependencies[0]`. */
  field?: string;
  /** The task concerned, when there is one. */
  task?: string;
  message: string;
}

export function formatProblem(p: InputProblem): string {
  const where = [p.file, p.field && `field ${p.field}`, p.task && `task ${p.task}`]
    .filter(Boolean)
    .join(", ");
  return where ? `${where}: ${p.message}` : p.message;
}

/** Invalid input or usage: exit 2, nothing launched. */
export class InputError extends TermorchError {
  readonly kind = "invalid_input";
  constructor(
    readonly problems: InputProblem[],
    readonly hint = "Fix the input and run again; nothing was started.",
    /** The run id the input gave, when it could be read: the error report carries it. */
    readonly runId: string | null = null,
  ) {
    super(problems.map(formatProblem).join("\n"));
  }
}

/** The workspace is locked by another run: exit 4. */
export class LockedError extends TermorchError {
  readonly kind = "locked";
}

/**
 * A termorch command run as a child process (`termorch mcp`'s detached driver) that stopped before
 * it could answer: its own message, and the kind its exit code stands for.
 */
export class ChildCommandError extends TermorchError {
  readonly kind: ErrorKind;
  constructor(message: string, exitCode: number) {
    super(message);
    this.kind =
      exitCode === ExitCode.invalid ? "invalid_input" : exitCode === ExitCode.locked ? "locked" : "internal";
  }
}

/** `termorch plan`: the planner wrote no valid plan in all its tries (exit 1); nothing is left in the workspace. */
export class PlanFailed extends TermorchError {
  readonly kind = "plan_failed";
}

/** SIGINT or SIGTERM ended a command that writes no report (exit 130); what it started is ended. */
export class Interrupted extends TermorchError {
  readonly kind = "interrupted";
}

/** The environment cannot run termorch (tmux or git missing or too old): exit 2. */
export class EnvironmentError extends TermorchError {
  readonly kind = "environment";
}
