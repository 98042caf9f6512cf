import { isObject, type Json, jsonLines, lastErrorObject, lastObject, parse, str } from "./json-text.js";
import type { OutputFormat } from "./results.js";

/**
 * Whether a failed attempt's CLI gave up on a rate limit or a usage cap, and when it lifts, from
 * what it printed (its logs, already redacted). Pure: text in, values out. Each CLI's words,
 * codes and exit codes at the pinned versions are in docs/agents.md ("Rate limits and usage caps").
 */
export interface LimitSeen {
  /** rate: the provider turns requests away for now (429, overloaded); cap: the account's allowance is spent until it resets. */
  kind: "rate" | "cap";
  /** The HTTP status the CLI named; null when it named none. */
  status: number | null;
  /** When it lifts (epoch ms), when the CLI said; null: not said. */
  resetsAt: number | null;
  /** What the CLI said of it (cut at 500 characters). */
  said: string;
}

/** What a CLI printed when its attempt ended. */
export interface LimitOutput {
  stdout: string;
  stderr: string;
  exitCode: number | null;
}

/** A usage cap in any CLI's words (claude, codex, gemini, qwen, opencode's Zen/Go, copilot). */
const CAP =
  /(?:you['’]ve|you have) hit your [\w ]*?limit|usage limit (?:reached|has been reached)|you have exhausted your daily quota|quota exhausted:|quota exceeded|out of usage credits|free usage exceeded|you['’]ve reached your weekly rate limit|you['’]ve used all your copilot free/i;
/** A rate limit or an overload, in any CLI's or provider's words. */
const RATE =
  /\b(?:429|529|503)\b|rate.?limit|too many requests|overloaded|resource.?exhausted|temporarily limiting requests/i;
/** Statuses that mean "not now" rather than "never". */
const LIMIT_STATUS = new Set([429, 503, 529]);

/** What a CLI that failed said of its last error: its words, the HTTP status and reset it gave. */
interface ErrorSaid {
  message: string;
  status: number | null;
  /** Seconds or an HTTP date (a `retry-after` header the CLI passed on). */
  retryAfter?: string | null;
}

/** The limit the CLI gave up on, when its last error was one; null otherwise. */
export function limitOf(format: OutputFormat, out: LimitOutput, now: number): LimitSeen | null {
  const error = lastError(format, out);
  if (error === null) return null;
  const { message } = error;
  const status = error.status ?? statusIn(message);
  const cap = CAP.test(message);
  if (!cap && !RATE.test(message) && !(status !== null && LIMIT_STATUS.has(status))) return null;
  return {
    kind: cap ? "cap" : "rate",
    status,
    resetsAt: resetOf(error.retryAfter ?? null, message, now),
    said: message.length > 500 ? `${message.slice(0, 500)}…` : message,
  };
}

function lastError(format: OutputFormat, out: LimitOutput): ErrorSaid | null {
  switch (format) {
    case "claude-json":
    case "qwen-json":
      return claudeError(out);
    case "codex-jsonl":
      return codexError(out.stdout);
    case "gemini-json":
      return geminiError(out);
    case "opencode-jsonl":
      return opencodeError(out.stdout);
    case "pi-jsonl":
      return piError(out.stdout);
    case "copilot-jsonl":
      return copilotError(out.stdout);
    case "cn-json":
      return cnError(out.stderr);
    case "text":
      return null;
  }
}

/**
 * claude's (and qwen's) result with `is_error`: its text and `api_error_status`. qwen says a spent
 * quota or its long retrying on stderr only (`Quota exhausted: …`, `Retrying in 60s … [API Error: 429 …]`).
 */
function claudeError(out: LimitOutput): ErrorSaid | null {
  const r = lastObject(out.stdout);
  if (r?.type === "result" && (r.is_error === true || String(r.subtype ?? "").startsWith("error"))) {
    const message =
      str(r.result) ??
      (Array.isArray(r.errors) ? r.errors.filter((e) => typeof e === "string").join("\n") : null) ??
      (isObject(r.error) ? str(r.error.message) : null) ??
      "";
    return { message, status: typeof r.api_error_status === "number" ? r.api_error_status : null };
  }
  const line = out.stderr
    .split("\n")
    .reverse()
    .find((l) => /Quota exhausted:|\[API Error: \d{3}/.test(l));
  return line ? { message: line.trim(), status: null } : null;
}

/** codex's `turn.failed` (or its last `error` event): "exceeded retry limit, last status: 429 …", "You’ve hit your usage limit. …". */
function codexError(stdout: string): ErrorSaid | null {
  let said: string | null = null;
  for (const e of jsonLines(stdout)) {
    if (e.type === "turn.failed" && isObject(e.error)) said = str(e.error.message) ?? said;
    else if (e.type === "error") said = str(e.message) ?? said;
  }
  return said === null ? null : { message: said, status: null };
}

/** gemini's error object (stdout, else stderr after its stack trace), with its `code`: the HTTP status. */
function geminiError(out: LimitOutput): ErrorSaid | null {
  const r = lastObject(out.stdout) ?? lastErrorObject(out.stderr);
  const error = r && isObject(r.error) ? r.error : null;
  if (error) {
    const code = typeof error.code === "number" ? error.code : null;
    return { message: str(error.message) ?? "", status: code };
  }
  // It exits with the status modulo 256 when it printed nothing else: 429 → 173, 503 → 247.
  const status = out.exitCode === 173 ? 429 : out.exitCode === 247 ? 503 : null;
  return status === null ? null : { message: `exit ${out.exitCode}`, status };
}

/** opencode's (and kilo's) `error` event: the provider's status, message and response headers. */
function opencodeError(stdout: string): ErrorSaid | null {
  const e = jsonLines(stdout)
    .filter((x) => x.type === "error")
    .at(-1);
  if (!e) return null;
  const error = isObject(e.error) ? e.error : {};
  const data = isObject(error.data) ? error.data : {};
  const headers = isObject(data.responseHeaders) ? data.responseHeaders : {};
  const ms = str(headers["retry-after-ms"]);
  return {
    message: str(data.message) ?? str(error.name) ?? "error",
    status: typeof data.statusCode === "number" ? data.statusCode : null,
    retryAfter:
      ms !== null && Number.isFinite(Number(ms)) ? String(Number(ms) / 1000) : str(headers["retry-after"]),
  };
}

/** pi's last assistant message that ended in an error ("429 Rate limit reached …"; it exits 0 then). */
function piError(stdout: string): ErrorSaid | null {
  const last = jsonLines(stdout)
    .filter((e) => e.type === "message_end" && isObject(e.message) && e.message.role === "assistant")
    .at(-1);
  const m = last && isObject(last.message) ? last.message : null;
  if (m?.stopReason !== "error") return null;
  return { message: str(m.errorMessage) ?? "error", status: null };
}

/** copilot's `session.error`: its `errorType` (rate_limit), status and message. */
function copilotError(stdout: string): ErrorSaid | null {
  const e = jsonLines(stdout)
    .filter((x) => x.type === "session.error")
    .at(-1);
  const data: Json = e && isObject(e.data) ? e.data : {};
  if (!e) return null;
  const message = str(data.message) ?? "error";
  return {
    message: data.errorType === "rate_limit" ? `rate_limit: ${message}` : message,
    status: typeof data.statusCode === "number" ? data.statusCode : null,
  };
}

/** cn's closing `{"status":"error","message":"429 …"}` on stderr. */
function cnError(stderr: string): ErrorSaid | null {
  const e = jsonLines(stderr)
    .filter((x) => x.status === "error")
    .at(-1);
  return e ? { message: str(e.message) ?? "error", status: null } : null;
}

/** A status a message names: "429 Rate limit …", "last status: 429", "Request rejected (429)", "[API Error: 429 …". */
function statusIn(message: string): number | null {
  const m = /(?:^|status:? |\(|Error: )(\d{3})\b/.exec(message);
  return m ? Number(m[1]) : null;
}

const MONTHS = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"];

/**
 * When the limit lifts, from what the CLI passed on or said: a `retry-after` (seconds or an HTTP
 * date), "try again in 3s" / "Please retry in 2.5s", "Try again in ~120 min", "It will reset in 2
 * hours 5 minutes", codex's "try again at 5:05 PM" or "at Dec 7th, 2026 5:05 PM" (the local time of
 * the agent's host: this one's); null when it said none.
 */
export function resetOf(retryAfter: string | null, message: string, now: number): number | null {
  if (retryAfter !== null) {
    const seconds = Number(retryAfter);
    if (Number.isFinite(seconds) && seconds >= 0) return now + seconds * 1000;
    const date = Date.parse(retryAfter);
    if (Number.isFinite(date)) return date;
  }
  const short = /(?:try again|retry) in ~?([\d.]+)\s*(ms|s|sec|seconds?|min|minutes?)\b/i.exec(message);
  if (short) {
    const n = Number(short[1]);
    const unit = short[2]!.toLowerCase();
    return now + n * (unit === "ms" ? 1 : unit.startsWith("m") ? 60_000 : 1000);
  }
  const reset = /reset in (?:(\d+) days? ?)?(?:(\d+) hours? ?)?(?:(\d+) minutes?)?/i.exec(message);
  if (reset && (reset[1] || reset[2] || reset[3]))
    return now + ((Number(reset[1] ?? 0) * 24 + Number(reset[2] ?? 0)) * 60 + Number(reset[3] ?? 0)) * 60_000;
  const at =
    /try again at (?:([A-Z][a-z]{2})[a-z]* (\d{1,2})(?:st|nd|rd|th)?, (\d{4}) )?(\d{1,2}):(\d{2}) ?([AP]M)/i.exec(
      message,
    );
  if (at) {
    const d = new Date(now);
    let hour = Number(at[4]) % 12;
    if (at[6]!.toUpperCase() === "PM") hour += 12;
    if (at[1]) {
      const month = MONTHS.indexOf(at[1].toLowerCase());
      if (month >= 0) d.setFullYear(Number(at[3]), month, Number(at[2]));
    }
    d.setHours(hour, Number(at[5]), 0, 0);
    // A time of day alone that has passed today is tomorrow's.
    if (!at[1] && d.getTime() <= now) d.setDate(d.getDate() + 1);
    return d.getTime();
  }
  return null;
}

/**
 * Where a CLI says it is retrying a rate limit by itself while it runs (it may go on for many
 * minutes: qwen's own loop lasts about 40): its stdout's events (codex, pi, copilot) or its
 * stderr's lines (qwen, gemini); null for the CLIs that retry silently (claude's json, opencode,
 * kilo, cn), which give up by themselves within a few minutes.
 */
export const RETRYING_ON: Readonly<Record<OutputFormat, "stdout" | "stderr" | null>> = {
  "claude-json": null,
  "qwen-json": "stderr",
  "codex-jsonl": "stdout",
  "gemini-json": "stderr",
  "opencode-jsonl": null,
  "pi-jsonl": "stdout",
  "copilot-jsonl": "stdout",
  "cn-json": null,
  text: null,
};

/** What the retry event of each JSONL CLI that has one always contains. */
const RETRY_EVENT: Partial<Record<OutputFormat, string>> = {
  "codex-jsonl": '"Reconnecting...',
  "pi-jsonl": '"auto_retry_start"',
  "copilot-jsonl": '"assistant.turn_retry"',
};

/** A line in which a CLI says it retries a rate limit, and the seconds until its next try when it says. */
export interface RetryingSeen {
  line: string;
  nextInS: number | null;
}

/**
 * Whether `line` (one of its stream's, RETRYING_ON) says the CLI retries a rate limit or an
 * overload: qwen's "Retrying in 60s (attempt 1/10): [API Error: 429 …]", gemini's "Attempt 2
 * failed with status 429. Retrying with backoff…", codex's "Reconnecting... 2/5 (… 429 …)", pi's
 * auto_retry_start, copilot's assistant.turn_retry with reason rate_limit. Pure.
 */
export function retryingIn(format: OutputFormat, line: string): RetryingSeen | null {
  const said = line.trim().slice(0, 500);
  // Every event of a JSONL CLI passes here: only one that names its retry event is parsed.
  const event = RETRY_EVENT[format];
  if (event !== undefined && !line.includes(event)) return null;
  switch (format) {
    case "qwen-json": {
      const m = /^Retrying in (\d+)s \(attempt \d+\/\d+\)/.exec(said);
      return m ? { line: said, nextInS: Number(m[1]) } : null;
    }
    case "gemini-json":
      return /^Attempt \d+ failed with status (?:429|503|529)\b/.test(said)
        ? { line: said, nextInS: null }
        : null;
    case "codex-jsonl":
    case "pi-jsonl":
    case "copilot-jsonl": {
      // Whole: an event longer than what is quoted of it still parses.
      const e = parse(line.trim());
      if (!isObject(e)) return null;
      if (format === "codex-jsonl" && e.type === "error" && /^Reconnecting\.\.\./.test(str(e.message) ?? ""))
        return RATE.test(str(e.message) ?? "") ? { line: str(e.message)!, nextInS: null } : null;
      if (format === "pi-jsonl" && e.type === "auto_retry_start" && RATE.test(str(e.errorMessage) ?? ""))
        return {
          line: str(e.errorMessage)!,
          nextInS: typeof e.delayMs === "number" ? e.delayMs / 1000 : null,
        };
      if (
        format === "copilot-jsonl" &&
        e.type === "assistant.turn_retry" &&
        isObject(e.data) &&
        e.data.reason === "rate_limit"
      )
        return { line: "assistant.turn_retry: rate_limit", nextInS: null };
      return null;
    }
    default:
      return null;
  }
}
