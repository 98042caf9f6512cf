import type { BoundaryWhy } from "../contract/session-handoff.js";

/**
 * Why a run stops early.
 * - cancel: the caller's signal or `termorch cancel`. Running agents are ended, nothing new
 *   starts, the report is written (exit 130).
 * - fail-fast: a task failed under --fail-fast. The same as a cancel, but the run's exit code is
 *   the failure's (unless a cancel comes too).
 * - detach: the driver leaves the run to a later resume (daemon shutdown). Agents keep running,
 *   nothing new starts, pending tasks stay pending, no report. It wins over the other two: a
 *   daemon that is told to stop leaves at once, and the resumed run takes up the cancel again
 *   (`termorch cancel` leaves its file behind).
 * - boundary: `termorch stop --at-boundary`, or an approval's timeout (on_timeout "stop"). Nothing
 *   new starts, running tasks finish, nothing is merged; the run ends with a session handoff and
 *   its report says it stopped (exit 5), for `termorch resume` to go on. Nothing is aborted.
 */
export type StopReason = "cancel" | "fail-fast" | "detach" | "boundary";

/**
 * The one stop of a run. Its AbortController is aborted at the first request (but a stop at a
 * boundary, which aborts nothing), with that reason
 * (shell gates and other plain AbortSignal users need no more); later requests are kept too, so
 * a cancel during a fail-fast stop still reports exit 130 and a detach during a cancel still
 * leaves at once. `onChange` hears every request.
 */
export class RunStop {
  private readonly controller = new AbortController();
  private readonly requested = new Set<StopReason>();
  private readonly listeners = new Set<() => void>();

  /** Aborted at the first request; its reason is that request's. */
  get signal(): AbortSignal {
    return this.controller.signal;
  }

  private why: BoundaryWhy | null = null;

  request(reason: StopReason, why: BoundaryWhy = "wave_complete"): void {
    if (this.requested.has(reason)) return;
    this.requested.add(reason);
    if (reason === "boundary") this.why = why;
    // What runs goes on to its end at a boundary: nothing of it is aborted.
    else this.controller.abort(reason);
    for (const listener of [...this.listeners]) listener();
  }

  /** Nothing new starts, what runs finishes, nothing is merged: a stop at a boundary (and nothing harder). */
  get atBoundary(): boolean {
    return this.requested.has("boundary") && !this.detaching && !this.ending;
  }

  /** Why it stops at a boundary; null: it does not. */
  get boundaryWhy(): BoundaryWhy | null {
    return this.atBoundary ? this.why : null;
  }

  /** Whether anything stopped the run. */
  get stopping(): boolean {
    return this.requested.size > 0;
  }

  /** The run is left to a later resume: agents keep running. */
  get detaching(): boolean {
    return this.requested.has("detach");
  }

  /** Agents are to be ended and nothing new starts: a cancel or fail-fast, and no detach. */
  get ending(): boolean {
    return !this.detaching && (this.requested.has("cancel") || this.requested.has("fail-fast"));
  }

  /** A cancel was asked for (the report says cancelled, exit 130). */
  get cancelled(): boolean {
    return this.requested.has("cancel");
  }

  /** Calls `listener` at every new request (at once when one came already); returns the unsubscribe. */
  onChange(listener: () => void): () => void {
    this.listeners.add(listener);
    if (this.stopping) listener();
    return () => this.listeners.delete(listener);
  }
}
