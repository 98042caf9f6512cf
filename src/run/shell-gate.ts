import { execa } from "execa";
import { CappedLog } from "../fs/capped-log.js";
import type { Redactor } from "../redact/redactor.js";

export interface ShellGateResult {
  exitCode: number | null;
  signal: string | null;
  timedOut: boolean;
  durationMs: number;
}

/**
 * Runs a `tests_cmd`: a command line the assignment gave explicitly, so it goes through
 * `sh -c`. It runs in its own process group (detached) so a timeout ends the whole tree, with
 * exactly the environment given; its output streams, redacted and capped, to the two logs.
 * Whatever it left running in its group is ended when it exits.
 */
export async function runShellGate(opts: {
  command: string;
  cwd: string;
  env: Record<string, string>;
  timeoutMs: number | null;
  killGraceMs: number;
  stdoutLog: string;
  stderrLog: string;
  redactor: Redactor;
  maxLogBytes: number;
  signal?: AbortSignal;
}): Promise<ShellGateResult> {
  const started = Date.now();
  const out = new CappedLog(opts.stdoutLog, opts.redactor, opts.maxLogBytes);
  const err = new CappedLog(opts.stderrLog, opts.redactor, opts.maxLogBytes);
  const child = execa("sh", ["-c", opts.command], {
    cwd: opts.cwd,
    env: opts.env,
    extendEnv: false,
    reject: false,
    stdin: "ignore",
    detached: true,
    buffer: false,
  });
  child.stdout?.on("data", (chunk: Buffer) => out.write(chunk));
  child.stderr?.on("data", (chunk: Buffer) => err.write(chunk));
  const group = child.pid;
  const signalGroup = (signal: NodeJS.Signals): void => {
    if (group === undefined) return;
    try {
      process.kill(-group, signal);
    } catch {}
  };
  const killTree = (): void => {
    signalGroup("SIGTERM");
    setTimeout(() => signalGroup("SIGKILL"), opts.killGraceMs).unref();
  };
  let timedOut = false;
  const timer =
    opts.timeoutMs === null
      ? null
      : setTimeout(() => {
          timedOut = true;
          killTree();
        }, opts.timeoutMs);
  opts.signal?.addEventListener("abort", killTree, { once: true });
  if (opts.signal?.aborted) killTree();
  // The shell's own exit, not the end of its output: a background process of the gate may hold
  // the pipes open. It must not outlive the gate, so the whole group is ended then.
  await new Promise<void>((done) => {
    if (child.exitCode !== null || child.signalCode !== null) done();
    else child.once("exit", () => done());
  });
  if (timer) clearTimeout(timer);
  opts.signal?.removeEventListener("abort", killTree);
  killTree();
  const result = await child;
  await Promise.all([out.close(), err.close()]);
  return {
    exitCode: result.exitCode ?? null,
    signal: result.signal ?? null,
    timedOut,
    durationMs: Date.now() - started,
  };
}
