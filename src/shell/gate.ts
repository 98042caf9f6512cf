import { spawn } from "node:child_process";
import { readFileSync, rmSync } from "node:fs";
import { constants } from "node:os";
import type { Readable } from "node:stream";
import { fileURLToPath } from "node:url";
import { pollUntil } from "../concurrency/poll-until.js";
import { GateRecord } from "../contract/gate-record.js";
import { CappedLog } from "../fs/capped-log.js";
import { findPerl } from "../fs/executable.js";
import { processStartMs } from "../fs/proc.js";
import type { Redactor } from "../redact/redactor.js";

export interface ShellGateResult {
  exitCode: number | null;
  signal: string | null;
  timedOut: boolean;
  durationMs: number;
  /**
   * Set when the command's wait status never reached us (the watchdog died, or could not reap
   * it): what is known instead. The gate's result is unknown, so it must not pass.
   */
  statusLost: string | null;
}

/** Next to this module, also from the CLI bundle in dist/cli/ (see scripts/bundle.js). */
const WATCHDOG_PATH = fileURLToPath(new URL("../shell/gate-watchdog.pl", import.meta.url));

/** How long the output of a finished gate may take to reach its logs. */
const OUTPUT_DRAIN_MS = 2000;

/**
 * Runs a `tests_cmd`: a command line the assignment gave explicitly, so it goes through
 * `sh -c`. It runs in its own process group so a timeout ends the whole tree, with exactly the
 * environment given; its output streams, redacted and capped, to the two logs. Whatever it left
 * running is ended when it exits: its group, and (Linux) every process it started, even one that
 * left the group (the watchdog is the subreaper of the gate's tree).
 *
 * It never outlives this process unattended: it runs under a watchdog (gate-watchdog.pl) that
 * ends its group once our end of a pipe closes, however we died. And never two at once: while it
 * runs, `record` holds its process group, and the next gate with the same record (a resumed
 * run's) first ends whatever of the earlier one is still there.
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
  /** File (in a private folder that exists) recording the running gate's process group. */
  record?: string;
  /** A command line `sh -c` is appended to and run by: the sandbox of the task the gate is for. */
  wrap?: readonly string[];
  signal?: AbortSignal;
}): Promise<ShellGateResult> {
  if (opts.record) await endRecordedGate(opts.record, opts.killGraceMs);
  const started = Date.now();
  const out = new CappedLog(opts.stdoutLog, opts.redactor, opts.maxLogBytes);
  const err = new CappedLog(opts.stderrLog, opts.redactor, opts.maxLogBytes);
  // A missing locale must not put perl's warning into the gate's log; the command itself gets
  // the environment as given (the watchdog removes the variable again).
  const badlang = opts.env.PERL_BADLANG === undefined;
  const child = spawn(
    findPerl(),
    [
      WATCHDOG_PATH,
      String(opts.killGraceMs),
      badlang ? "1" : "0",
      opts.record ?? "",
      ...(opts.wrap ?? []),
      "sh",
      "-c",
      opts.command,
    ],
    {
      cwd: opts.cwd,
      env: badlang ? { ...opts.env, PERL_BADLANG: "0" } : opts.env,
      // fd 0: never written, its EOF tells the watchdog we are gone; fd 3: its reports.
      stdio: ["pipe", "pipe", "pipe", "pipe"],
      detached: true,
    },
  );
  child.stdin?.on("error", () => {});
  child.stdout?.on("data", (chunk: Buffer) => out.write(chunk));
  child.stderr?.on("data", (chunk: Buffer) => err.write(chunk));
  let group: number | null = null;
  let status: number | null = null;
  let ending = false;
  let pending = "";
  const reports = child.stdio[3] as Readable | null;
  reports?.on("data", (chunk: Buffer) => {
    pending += chunk.toString("utf8");
    for (let nl = pending.indexOf("\n"); nl >= 0; nl = pending.indexOf("\n")) {
      const line = pending.slice(0, nl);
      pending = pending.slice(nl + 1);
      const pid = /^pid (\d+)$/.exec(line)?.[1];
      const st = /^status (\d+)$/.exec(line)?.[1];
      if (pid) {
        // The watchdog recorded the group (opts.record) before the command started.
        group = Number(pid);
        if (ending) signalGroup("SIGTERM");
      } else if (st) status = Number(st);
    }
  });
  const signalGroup = (signal: NodeJS.Signals): void => {
    if (group === null) return;
    try {
      process.kill(-group, signal);
    } catch {}
  };
  let escalation: NodeJS.Timeout | null = null;
  const killTree = (): void => {
    ending = true;
    signalGroup("SIGTERM");
    escalation ??= setTimeout(() => signalGroup("SIGKILL"), opts.killGraceMs);
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
  const closed = new Promise((done) => child.once("close", done));
  // The watchdog exits once the command has and its group is ended. Its output may still be
  // held by a process that left the group (setsid): waited for a moment only.
  const exit = await new Promise<{ code: number | null; signal: NodeJS.Signals | null; error?: Error }>(
    (done) => {
      child.once("error", (error) => done({ code: null, signal: null, error }));
      child.once("exit", (code, signal) => done({ code, signal }));
    },
  );
  let drain: NodeJS.Timeout | undefined;
  await Promise.race([closed, new Promise((done) => (drain = setTimeout(done, OUTPUT_DRAIN_MS)))]);
  clearTimeout(drain);
  for (const stream of [child.stdout, child.stderr, reports]) stream?.destroy();
  if (timer) clearTimeout(timer);
  if (escalation) clearTimeout(escalation);
  opts.signal?.removeEventListener("abort", killTree);
  child.stdin?.destroy();
  // The watchdog reports only once it has ended the group; killed itself, it could not.
  if (status === null) signalGroup("SIGKILL");
  if (exit.error) err.write(Buffer.from(`termorch: cannot run the gate: ${exit.error.message}\n`));
  await Promise.all([out.close(), err.close()]);
  if (opts.record) rmSync(opts.record, { force: true });
  const decoded = decodeStatus(status);
  const statusLost =
    decoded !== null
      ? null
      : exit.error
        ? `the gate watchdog could not start: ${exit.error.message}`
        : `the gate watchdog ${exit.signal ? `was killed by ${exit.signal}` : `exited with code ${exit.code}`} without reporting it`;
  const result = decoded ?? { exitCode: null, signal: null };
  return { ...result, timedOut, durationMs: Date.now() - started, statusLost };
}

/** A wait status as the watchdog reports it: low 7 bits the signal, high byte the exit code. */
function decodeStatus(status: number | null): { exitCode: number | null; signal: string | null } | null {
  if (status === null) return null;
  const sig = status & 127;
  if (sig === 0) return { exitCode: (status >> 8) & 255, signal: null };
  const name = Object.entries(constants.signals).find(([, n]) => n === sig)?.[0];
  return { exitCode: null, signal: name ?? `SIG${sig}` };
}

/**
 * Ends the gate an earlier process left running (it died, and its watchdog may still be ending
 * the group, or was killed too), and waits until it is gone. Only a group that is provably the
 * recorded one: its leader still runs with the recorded start time, or the leader is gone and
 * the group still exists (a pid is not reused while it names a live process group).
 */
async function endRecordedGate(path: string, graceMs: number): Promise<void> {
  let record: GateRecord;
  try {
    record = GateRecord.parse(JSON.parse(readFileSync(path, "utf8")));
  } catch {
    // Missing or damaged: there is no group we could end safely.
    return;
  }
  const pgid = record.pgid;
  const exists = (): boolean => {
    try {
      process.kill(-pgid, 0);
      return true;
    } catch (error) {
      return (error as NodeJS.ErrnoException).code === "EPERM";
    }
  };
  if (Number.isInteger(pgid) && pgid > 1 && exists()) {
    const start = processStartMs(pgid);
    // Two processes' reads of a start time may differ by a second: btime has a one-second resolution.
    const ours = start === null || record.start === null || Math.abs(start - record.start) < 2000;
    if (ours) {
      const kill = (signal: NodeJS.Signals): void => {
        try {
          process.kill(-pgid, signal);
        } catch {}
      };
      kill("SIGTERM");
      if (!(await pollUntil(() => !exists(), graceMs))) {
        kill("SIGKILL");
        await pollUntil(() => !exists(), 5000);
      }
    }
  }
  rmSync(path, { force: true });
}
