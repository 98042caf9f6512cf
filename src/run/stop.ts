/**
 * Why a run stops early. Each run has one AbortController whose reason is one of these; the
 * first one wins.
 * - cancel: the caller's signal or `termorch cancel`. Running agents are ended, nothing new
 *   starts, the report is written (exit 130).
 * - fail-fast: a task failed under --fail-fast. The same as a cancel, but the run's exit code is
 *   the failure's.
 * - detach: the driver leaves the run to a later resume (daemon shutdown). Agents keep running,
 *   nothing new starts, pending tasks stay pending, no report.
 */
export type StopReason = "cancel" | "fail-fast" | "detach";

/** The reason a run's stop signal was aborted with, or null while it runs on. */
export function stopReasonOf(signal: AbortSignal): StopReason | null {
  if (!signal.aborted) return null;
  const reason: unknown = signal.reason;
  return reason === "cancel" || reason === "fail-fast" || reason === "detach" ? reason : "cancel";
}

/** Whether the run is stopping in a way that ends its agents (cancel, fail-fast), not leaving them (detach). */
export function ending(signal: AbortSignal): boolean {
  const reason = stopReasonOf(signal);
  return reason === "cancel" || reason === "fail-fast";
}

/** Whether the run is being left to a later resume. */
export function detaching(signal: AbortSignal): boolean {
  return stopReasonOf(signal) === "detach";
}
