/**
 * Errors that stop a command. Expected task outcomes are values (see contract/reason.ts);
 * these are for conditions where termorch itself cannot go on. The CLI turns them into a
 * message and an exit code in one place (cli/main.ts).
 */

/** Exit codes of `run` and `resume` (DESIGN section 9). */
export const ExitCode = {
  ok: 0,
  failed: 1,
  invalid: 2,
  conflict: 3,
  locked: 4,
  internal: 70,
  interrupted: 130,
} as const;
export type ExitCode = (typeof ExitCode)[keyof typeof ExitCode];

export abstract class TermorchError extends Error {
  abstract readonly exitCode: ExitCode;
  /** Short machine-readable kind, written into the report's `error` object. */
  abstract readonly kind: string;
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
  readonly exitCode = ExitCode.invalid;
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
  readonly exitCode = ExitCode.locked;
  readonly kind = "locked";
}

/** The environment cannot run termorch (tmux or git missing or too old): exit 2. */
export class EnvironmentError extends TermorchError {
  readonly exitCode = ExitCode.invalid;
  readonly kind = "environment";
}
