import { isIP } from "node:net";
import { InvalidArgumentError } from "commander";
import { ExitCode, InputError } from "../errors.js";
import type { Stop } from "./stop-signal.js";

/** `--port`: a port number, 0 for a free one. */
export const port = (value: string): number => {
  const n = Number(value);
  if (!/^\d+$/.test(value) || n > 65535)
    throw new InvalidArgumentError("must be a port number (0: a free one)");
  return n;
};

/** `--host`: an IP address to listen on (no names: a name may resolve to anything). */
export const address = (value: string): string => {
  const bare = value.replace(/^\[(.*)\]$/, "$1");
  if (isIP(bare) === 0) throw new InvalidArgumentError("must be an IP address, e.g. 127.0.0.1 or 0.0.0.0");
  return bare;
};

/** A listener's failure to bind, as the operator can fix it (exit 2); anything else as it is. */
export function listenFailure(error: unknown, host: string, port: number): unknown {
  const code = (error as NodeJS.ErrnoException).code;
  if (code !== "EADDRINUSE" && code !== "EACCES" && code !== "EADDRNOTAVAIL") return error;
  return new InputError(
    [{ message: `cannot listen on ${host} port ${port}: ${code}` }],
    code === "EADDRNOTAVAIL"
      ? "Pass an address of this machine with --host (or leave it out: 127.0.0.1)."
      : "Pass another --port, or --port 0 for a free one.",
  );
}

/**
 * Waits until a listening command is stopped. SIGTERM is a service manager's normal stop (exit 0);
 * SIGINT and SIGHUP are an operator's (exit 130).
 */
export async function untilStopped(stop: Stop): Promise<number> {
  if (!stop.signal.aborted)
    await new Promise((done) => stop.signal.addEventListener("abort", done, { once: true }));
  return stop.cause() === "SIGTERM" ? ExitCode.ok : ExitCode.interrupted;
}
