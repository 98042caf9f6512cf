import type { Io } from "./io.js";

/** What ended a command that runs until it is told to stop. */
export type StopCause = NodeJS.Signals | "reader-gone";

export interface Stop {
  signal: AbortSignal;
  /** What aborted `signal`; null while it has not. */
  cause: () => StopCause | null;
  /** Removes the handlers; call it when the command ends. */
  dispose: () => void;
}

/**
 * The stop of a command that follows something (a log, the runs, a server) until the operator
 * ends it: SIGINT, SIGTERM or SIGHUP, and with `readerGone`, stdout's reader going away (`| head`): a
 * command whose output is its point has no reason to go on then, one that only prints a URL does.
 */
export function stopSignal(io: Io, o: { readerGone: boolean }): Stop {
  const controller = new AbortController();
  let cause: StopCause | null = null;
  const stopBy = (by: StopCause) => (): void => {
    cause ??= by;
    controller.abort();
  };
  const onInt = stopBy("SIGINT");
  const onTerm = stopBy("SIGTERM");
  const onHup = stopBy("SIGHUP");
  const onGone = stopBy("reader-gone");
  process.on("SIGINT", onInt);
  process.on("SIGTERM", onTerm);
  // The terminal closed (an SSH connection dropped): end as cleanly as on Ctrl-C.
  process.on("SIGHUP", onHup);
  if (o.readerGone) {
    if (io.readerGone?.aborted) onGone();
    io.readerGone?.addEventListener("abort", onGone, { once: true });
  }
  return {
    signal: controller.signal,
    cause: () => cause,
    dispose: () => {
      process.off("SIGINT", onInt);
      process.off("SIGTERM", onTerm);
      process.off("SIGHUP", onHup);
      io.readerGone?.removeEventListener("abort", onGone);
    },
  };
}
