/** Where the CLI talks to; injectable so it can be driven in-process. */
export interface Io {
  stdout: NodeJS.WritableStream & { isTTY?: boolean };
  stderr: NodeJS.WritableStream & { isTTY?: boolean };
  env: Readonly<Record<string, string | undefined>>;
  cwd: string;
  /** Aborted once stdout's reader went away (`| head -1`): a command that follows output may stop. */
  readerGone?: AbortSignal;
}
