/** Where the CLI talks to; injectable so it can be driven in-process. */
export interface Io {
  stdout: NodeJS.WritableStream & { isTTY?: boolean };
  stderr: NodeJS.WritableStream & { isTTY?: boolean };
  env: Readonly<Record<string, string | undefined>>;
  cwd: string;
  /** Aborted once stdout's reader went away (`| head -1`): a command that follows output may stop. */
  readerGone?: AbortSignal;
  /**
   * A crash-test fault for `run`/`resume` (run/faults.ts lists the points). Only tests inject
   * one (test/fixtures/cli-with-fault.mjs); bin/termorch.js never does.
   */
  fault?: string | null;
}
