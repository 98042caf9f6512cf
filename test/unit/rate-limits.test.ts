// Each CLI's words for a rate limit and a usage cap, as the pinned versions print them when they
// give up (docs/agents.md, "Rate limits and usage caps"; the texts are those observed against a
// server answering 429/503 with retry-after 3, docs/research/rate-limits.md).
import { describe, expect, it } from "vitest";
import { limitOf, RETRYING_ON, resetOf, retryingIn } from "../../src/agent/rate-limits.js";

const NOW = Date.parse("2026-12-06T12:00:00Z");
const out = (stdout: string, stderr = "", exitCode: number | null = 1) => ({ stdout, stderr, exitCode });
const line = (o: object) => `${JSON.stringify(o)}\n`;
const OPENAI_429 =
  "Rate limit reached for test-model in organization org-x on requests per min (RPM): Limit 3, Used 3, Requested 1. Please try again in 3s.";

describe("rate limits and usage caps, per CLI", () => {
  it("claude: its result's api_error_status; the cap in its words", () => {
    const rate = line({
      type: "result",
      subtype: "success",
      is_error: true,
      api_error_status: 429,
      result:
        "API Error: Request rejected (429) · This request would exceed the rate limit for your organization of 50 requests per minute.",
    });
    expect(limitOf("claude-json", out(rate), NOW)).toMatchObject({
      kind: "rate",
      status: 429,
      resetsAt: null,
    });
    const overloaded = line({
      type: "result",
      is_error: true,
      api_error_status: 529,
      result: "API Error: 529 Overloaded.",
    });
    expect(limitOf("claude-json", out(overloaded), NOW)).toMatchObject({ kind: "rate", status: 529 });
    const cap = line({
      type: "result",
      is_error: true,
      result: "You've hit your session limit · resets 3pm (Europe/Berlin)",
    });
    expect(limitOf("claude-json", out(cap), NOW)).toMatchObject({ kind: "cap" });
    // An error that is neither: not a limit.
    const other = line({ type: "result", is_error: true, result: "API Error: 400 invalid request" });
    expect(limitOf("claude-json", out(other), NOW)).toBeNull();
    // Success whose text speaks of 429s is the agent's work, not a limit.
    const work = line({
      type: "result",
      is_error: false,
      result: "Handled HTTP 429 rate limits in the client",
    });
    expect(limitOf("claude-json", out(work, "", 0), NOW)).toBeNull();
  });

  it("codex: turn.failed after its retries; its usage cap (curly apostrophe) with the local time it lifts", () => {
    const rate =
      line({
        type: "error",
        message: "Reconnecting... 5/5 (exceeded retry limit, last status: 429 Too Many Requests)",
      }) +
      line({
        type: "turn.failed",
        error: { message: "exceeded retry limit, last status: 429 Too Many Requests" },
      });
    expect(limitOf("codex-jsonl", out(rate), NOW)).toMatchObject({ kind: "rate", status: 429 });
    const cap = line({
      type: "turn.failed",
      error: { message: "You’ve hit your usage limit. Upgrade to Pro, or try again at 5:05 PM." },
    });
    const seen = limitOf("codex-jsonl", out(cap), NOW)!;
    expect(seen.kind).toBe("cap");
    const at = new Date(seen.resetsAt!);
    expect([at.getHours(), at.getMinutes()]).toEqual([17, 5]);
    expect(seen.resetsAt!).toBeGreaterThan(NOW);
  });

  it("gemini: its error object's code (and exit 173 = 429 mod 256); its daily quota", () => {
    const stderr = `Error when talking to Gemini API\n{"session_id":"s","error":{"type":"Error","message":"Resource has been exhausted (e.g. check quota).","code":429}}\n`;
    expect(limitOf("gemini-json", out("", stderr, 173), NOW)).toMatchObject({ kind: "rate", status: 429 });
    expect(limitOf("gemini-json", out("", "", 247), NOW)).toMatchObject({ kind: "rate", status: 503 });
    const quota = `{"session_id":"s","error":{"type":"Error","message":"You have exhausted your daily quota on this model.","code":429}}\n`;
    expect(limitOf("gemini-json", out("", quota, 173), NOW)).toMatchObject({ kind: "cap" });
    expect(limitOf("gemini-json", out("", "", 1), NOW)).toBeNull();
  });

  it("opencode: its error event's status and the provider's retry-after", () => {
    const e = line({
      type: "error",
      sessionID: "ses_1",
      error: {
        name: "APIError",
        data: {
          message: OPENAI_429,
          statusCode: 429,
          isRetryable: true,
          responseHeaders: { "retry-after": "3" },
        },
      },
    });
    expect(limitOf("opencode-jsonl", out(e), NOW)).toMatchObject({
      kind: "rate",
      status: 429,
      resetsAt: NOW + 3000,
    });
    const go = line({
      type: "error",
      error: {
        name: "APIError",
        data: { message: "Go usage limit reached. It will reset in 2 hours 5 minutes.", statusCode: 429 },
      },
    });
    expect(limitOf("opencode-jsonl", out(go), NOW)).toMatchObject({
      kind: "cap",
      resetsAt: NOW + 125 * 60_000,
    });
  });

  it("pi: a turn that ended in an error, though it exits 0", () => {
    const s =
      line({
        type: "auto_retry_start",
        attempt: 1,
        maxAttempts: 3,
        delayMs: 2000,
        errorMessage: `429 ${OPENAI_429}`,
      }) +
      line({
        type: "message_end",
        message: { role: "assistant", stopReason: "error", errorMessage: `429 ${OPENAI_429}` },
      });
    expect(limitOf("pi-jsonl", out(s, "", 0), NOW)).toMatchObject({
      kind: "rate",
      status: 429,
      resetsAt: NOW + 3000,
    });
    const cap = line({
      type: "message_end",
      message: {
        role: "assistant",
        stopReason: "error",
        errorMessage: "You have hit your ChatGPT usage limit (plus plan). Try again in ~120 min.",
      },
    });
    expect(limitOf("pi-jsonl", out(cap, "", 0), NOW)).toMatchObject({
      kind: "cap",
      resetsAt: NOW + 120 * 60_000,
    });
  });

  it("copilot, cn, qwen: their closing error", () => {
    const copilot = line({
      type: "session.error",
      data: {
        errorType: "rate_limit",
        message: `Failed to get response from the AI model; retried 5 times (total retry wait time: 16.65 seconds) Last error: 429 ${OPENAI_429}`,
        statusCode: 429,
      },
    });
    expect(limitOf("copilot-jsonl", out(copilot), NOW)).toMatchObject({ kind: "rate", status: 429 });
    expect(
      limitOf("cn-json", out("", line({ status: "error", message: `429 ${OPENAI_429}` })), NOW),
    ).toMatchObject({
      kind: "rate",
      status: 429,
    });
    const qwen = `Retrying in 60s (attempt 1/10): [API Error: 429 ${OPENAI_429}]\n`;
    expect(limitOf("qwen-json", out("", qwen, 1), NOW)).toMatchObject({ kind: "rate", status: 429 });
    expect(
      limitOf("qwen-json", out("", "Quota exhausted: free tier. Will reset at midnight\n"), NOW),
    ).toMatchObject({
      kind: "cap",
    });
  });
});

describe("when a limit lifts", () => {
  it("reads a retry-after in seconds or as a date, and the CLIs' own words", () => {
    expect(resetOf("3", "", NOW)).toBe(NOW + 3000);
    expect(resetOf("Sun, 06 Dec 2026 12:01:00 GMT", "", NOW)).toBe(NOW + 60_000);
    expect(resetOf(null, "Please retry in 2.5s.", NOW)).toBe(NOW + 2500);
    expect(resetOf(null, "nothing said", NOW)).toBeNull();
    const dated = new Date(resetOf(null, "Try again at Dec 7th, 2026 5:05 PM.", NOW)!);
    expect([
      dated.getFullYear(),
      dated.getMonth(),
      dated.getDate(),
      dated.getHours(),
      dated.getMinutes(),
    ]).toEqual([2026, 11, 7, 17, 5]);
  });
});

describe("a CLI retrying a rate limit by itself, as it goes", () => {
  it("knows each CLI's words for it on its stream, and nothing else", () => {
    expect(
      retryingIn("qwen-json", `Retrying in 60s (attempt 1/10): [API Error: 429 ${OPENAI_429}]`),
    ).toMatchObject({
      nextInS: 60,
    });
    expect(
      retryingIn("gemini-json", "Attempt 2 failed with status 429. Retrying with backoff... _ApiError: {}"),
    ).toMatchObject({ nextInS: null });
    expect(
      retryingIn(
        "codex-jsonl",
        JSON.stringify({
          type: "error",
          message: "Reconnecting... 2/5 (exceeded retry limit, last status: 429 Too Many Requests)",
        }),
      ),
    ).not.toBeNull();
    // A reconnect for another reason is no rate limit.
    expect(
      retryingIn(
        "codex-jsonl",
        JSON.stringify({ type: "error", message: "Reconnecting... 1/5 (stream disconnected)" }),
      ),
    ).toBeNull();
    expect(
      retryingIn(
        "pi-jsonl",
        JSON.stringify({
          type: "auto_retry_start",
          attempt: 1,
          delayMs: 2000,
          errorMessage: `429 ${OPENAI_429}`,
        }),
      ),
    ).toMatchObject({ nextInS: 2 });
    expect(
      retryingIn(
        "copilot-jsonl",
        JSON.stringify({ type: "assistant.turn_retry", data: { reason: "rate_limit" } }),
      ),
    ).not.toBeNull();
    expect(retryingIn("claude-json", "Retrying in 60s (attempt 1/10)")).toBeNull();
    expect(RETRYING_ON["opencode-jsonl"]).toBeNull();
    expect(RETRYING_ON["qwen-json"]).toBe("stderr");
  });
});
