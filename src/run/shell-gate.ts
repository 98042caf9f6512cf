import { writeFile } from "node:fs/promises";
import { execa } from "execa";
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
 * exactly the environment given, and its redacted output goes to the two log files.
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
  const child = execa("sh", ["-c", opts.command], {
    cwd: opts.cwd,
    env: opts.env,
    extendEnv: false,
    reject: false,
    stdin: "ignore",
    detached: true,
    maxBuffer: opts.maxLogBytes,
    stripFinalNewline: false,
  });
  let timedOut = false;
  const killTree = (): void => {
    if (child.pid === undefined) return;
    try {
      process.kill(-child.pid, "SIGTERM");
    } catch {}
    setTimeout(() => {
      try {
        process.kill(-child.pid!, "SIGKILL");
      } catch {}
    }, opts.killGraceMs).unref();
  };
  const timer =
    opts.timeoutMs === null
      ? null
      : setTimeout(() => {
          timedOut = true;
          killTree();
        }, opts.timeoutMs);
  const onAbort = (): void => killTree();
  opts.signal?.addEventListener("abort", onAbort, { once: true });
  const result = await child;
  if (timer) clearTimeout(timer);
  opts.signal?.removeEventListener("abort", onAbort);
  const cap = (text: string): string =>
    Buffer.byteLength(text) > opts.maxLogBytes
      ? `${text.slice(0, opts.maxLogBytes)}\n[termorch: log truncated at ${opts.maxLogBytes} bytes]\n`
      : text;
  await Promise.all([
    writeFile(opts.stdoutLog, cap(opts.redactor.redact(String(result.stdout ?? ""))), { mode: 0o600 }),
    writeFile(opts.stderrLog, cap(opts.redactor.redact(String(result.stderr ?? ""))), { mode: 0o600 }),
  ]);
  return {
    exitCode: result.exitCode ?? null,
    signal: result.signal ?? null,
    timedOut,
    durationMs: Date.now() - started,
  };
}
