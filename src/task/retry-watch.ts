import { RETRYING_ON, type RetryingSeen, retryingIn } from "../agent/rate-limits.js";
import type { OutputFormat } from "../agent/results.js";
import { type Following, tailFile } from "../fs/follow-file.js";

/** How often the bound is checked while the CLI sleeps between its tries. */
const CHECK_MS = 1000;

/** What a CLI kept retrying by itself, once termorch stopped waiting for it. */
export interface RetriedTooLong {
  /** Its last line that said so. */
  said: string;
  /** For how long it had been retrying (ms). */
  forMs: number;
  /** When its next try was due, when it said (epoch ms). */
  nextAt: number | null;
}

/**
 * Watches a running attempt's CLI retrying a rate limit by itself (RETRYING_ON): once it has
 * been at it for the task's rate_limit.max_retrying_s with no progress in between, `giveUp` is
 * called (once), so the limit is dealt with as termorch's own (a wait, a failure) rather than by
 * waiting out the task's timeout. Progress (stdout output that is not a retry, or a quiet
 * well past its next try) starts the count again.
 */
export function watchRetrying(
  format: OutputFormat | null,
  maxRetryingS: number,
  logs: { stdout: string; stderr: string },
  now: () => number,
  giveUp: (seen: RetriedTooLong) => void,
): Following {
  const on = format === null ? null : RETRYING_ON[format];
  if (format === null || on === null) return { dispose: () => {} };
  const bound = maxRetryingS * 1000;
  let since: number | null = null;
  let last: RetryingSeen | null = null;
  let lastAt = 0;
  let done = false;
  const check = (): void => {
    if (done || since === null || last === null) return;
    // Quiet for well past its next try: it got through (gemini and qwen say so nowhere but in
    // their final output).
    if (now() - lastAt > Math.max(2 * (last.nextInS ?? 30), 60) * 1000) {
      since = null;
      return;
    }
    if (now() - since < bound) return;
    done = true;
    giveUp({
      said: last.line,
      forMs: now() - since,
      nextAt: last.nextInS === null ? null : lastAt + last.nextInS * 1000,
    });
  };
  const rest = { stdout: "", stderr: "" };
  const lines = (text: string, stream: "stdout" | "stderr"): void => {
    // Whole lines only: a part may end within one.
    const all = rest[stream] + text;
    const cut = all.lastIndexOf("\n");
    rest[stream] = all.slice(cut + 1);
    for (const line of all.slice(0, cut + 1).split("\n")) {
      if (line.trim() === "") continue;
      const seen = stream === on ? retryingIn(format, line) : null;
      if (seen) {
        since ??= now();
        last = seen;
        lastAt = now();
      } else if (stream === "stdout") since = null;
    }
    check();
  };
  // Polled: its bound is tens of seconds, and every attempt of these CLIs is followed.
  const followers = [tailFile(logs.stdout, (text) => lines(text, "stdout"), { events: false })];
  if (on === "stderr")
    followers.push(tailFile(logs.stderr, (text) => lines(text, "stderr"), { events: false }));
  const timer = setInterval(check, CHECK_MS);
  timer.unref();
  return {
    dispose() {
      clearInterval(timer);
      for (const f of followers) f.dispose();
    },
  };
}
