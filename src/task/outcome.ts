import type { Reason } from "../contract/reason.js";
import type { Gate } from "../contract/report.js";
import type { ExitRecord } from "../runner/task-runner.js";

/** How an attempt's end was brought about by termorch itself, if it was. */
export interface EndedBy {
  /** The task's timeout fired (seconds). */
  timeoutS: number | null;
  /** The run was cancelled or stopped (--fail-fast) while it ran. */
  stopped: boolean;
}

/** What one attempt's end means for the task: null reason = the agent exited 0 (its gates come next). */
export interface AttemptOutcome {
  reason: Reason | null;
  /** For the status file and the report; never names a log (the report's `output_log` does). */
  detail: string | null;
  /** Reason rate_limited: when the limit lifts (epoch ms), as its CLI said; null or absent: not said. */
  resetsAt?: number | null;
}

/**
 * Classifies an attempt's end. Pure: the caller redacts `record.detail` beforehand (it may quote
 * the agent's command). Termorch's own doing comes first: a timed-out agent that died of the
 * TERM it was sent timed out, whatever its exit record says.
 */
export function classifyExit(record: ExitRecord, by: EndedBy): AttemptOutcome {
  if (by.timeoutS !== null)
    return {
      reason: "timeout",
      detail: `timed out after ${by.timeoutS} s; its process group was terminated`,
    };
  if (by.stopped) return { reason: "cancelled", detail: "the run was cancelled while it ran" };
  if (record.launch_failed)
    return {
      reason: "launch_error",
      detail: `its command could not be started (exit ${record.exit_code})${record.detail ? `: ${record.detail}` : ""}`,
    };
  if (record.lost)
    return {
      reason: "lost",
      detail: `its session ended without an exit record${record.detail ? ` (${record.detail})` : ""}`,
    };
  if (record.signal) return { reason: "signal", detail: `killed by ${record.signal}` };
  if (record.exit_code !== 0)
    return {
      reason: "exit_code",
      detail:
        record.exit_code === 127
          ? "exited with code 127 (command not found?)"
          : `exited with code ${record.exit_code}`,
    };
  return { reason: null, detail: null };
}

/** The `core` gate of an attempt that did not pass it (or, with reason null, did). */
export function coreGate(record: ExitRecord | null, reason: Reason | null): Gate {
  if (reason === "setup")
    return { name: "core", required: true, passed: null, detail: "not run: the setup failed" };
  const detail =
    reason === "timeout"
      ? "timed out"
      : record === null
        ? "never started"
        : record.lost
          ? "session lost"
          : record.signal
            ? `killed by ${record.signal}`
            : `exit code ${record.exit_code}`;
  return { name: "core", required: true, passed: reason === null, detail };
}
