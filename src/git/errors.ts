import { EnvironmentError, TermorchError } from "../errors.js";

/** Where a failed git command ran and what it said, for the error message and the debug log. */
export interface GitFailure {
  cwd?: string;
  args?: readonly string[];
  /** git's exit status; null when git could not be started or was killed. */
  status?: number | null;
  stderr?: string;
}

/**
 * git did something termorch did not expect (a command failed, a ref was not where it had to be).
 * Exit 70: it is termorch's or the repository's problem, not the input's.
 */
export class GitError extends TermorchError {
  readonly kind = "git";
  constructor(
    message: string,
    readonly failure: GitFailure = {},
  ) {
    super(message);
    this.name = "GitError";
  }
}

/** git is missing or older than termorch needs: exit 2, like every environment problem. */
export class GitVersionError extends EnvironmentError {
  constructor(
    message: string,
    /** The version found, null when git could not be run at all. */
    readonly found: string | null,
    readonly required: string,
  ) {
    super(message);
    this.name = "GitVersionError";
  }
}
