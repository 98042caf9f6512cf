import { type AgentResult, addUsage, type Usage } from "../contract/agent-result.js";
import { isObject, type Json, jsonLines, lastErrorObject, lastObject, parse, str } from "./json-text.js";

/**
 * Reading a coding-agent CLI's own account of its work from what it printed on stdout (its log,
 * already redacted). Pure: text in, values out. Each format is the CLI's documented one; the
 * fields and the pages they come from are listed in docs/agents.md.
 */
export type OutputFormat =
  | "claude-json"
  | "qwen-json"
  | "codex-jsonl"
  | "gemini-json"
  | "opencode-jsonl"
  | "pi-jsonl"
  | "copilot-jsonl"
  | "cn-json"
  | "text";

export interface ParsedOutput {
  result: AgentResult | null;
  usage: Usage | null;
  /** The CLI stopped at the spending cap termorch gave it (the preset's budget_flag). */
  atBudgetCap?: true;
}

/** A summary longer than this is cut (the report is read by people and by orchestrators). */
export const SUMMARY_MAX = 4000;

const NONE: ParsedOutput = { result: null, usage: null };

/**
 * What an agent's CLI printed, and what it wrote beside it: `stderr` matters to gemini and cn,
 * which print their error object there; `usageFile` (the text of `{usage_file}`) to copilot, which
 * reports its tokens only in that file (docs/agents.md).
 */
export interface AgentOutput {
  stderr?: string;
  usageFile?: string;
}

/** Which of a CLI's side outputs its parser reads: the others need not be read at all. */
export const SIDE_OUTPUTS: Readonly<Record<OutputFormat, ReadonlyArray<keyof AgentOutput>>> = {
  "claude-json": [],
  "qwen-json": [],
  "codex-jsonl": [],
  "gemini-json": ["stderr"],
  "opencode-jsonl": [],
  "pi-jsonl": [],
  "copilot-jsonl": ["usageFile"],
  "cn-json": ["stderr"],
  text: [],
};

export function parseAgentOutput(format: OutputFormat, stdout: string, side: AgentOutput = {}): ParsedOutput {
  const stderr = side.stderr ?? "";
  switch (format) {
    case "claude-json":
      return claude(stdout, "uncached");
    case "qwen-json":
      return claude(stdout, "all");
    case "codex-jsonl":
      return codex(stdout);
    case "gemini-json":
      return gemini(stdout, stderr);
    case "opencode-jsonl":
      return opencode(stdout);
    case "pi-jsonl":
      return pi(stdout);
    case "copilot-jsonl":
      return copilot(stdout, side.usageFile ?? "");
    case "cn-json":
      return continueCli(stdout, stderr);
    case "text":
      return aider(stdout);
  }
}

const count = (v: unknown): number | null =>
  typeof v === "number" && Number.isFinite(v) && v >= 0 ? Math.round(v) : null;
const money = (v: unknown): number | null =>
  typeof v === "number" && Number.isFinite(v) && v >= 0 ? v : null;

function capped(summary: string | null): string | null {
  if (summary === null) return null;
  return summary.length > SUMMARY_MAX
    ? `${summary.slice(0, SUMMARY_MAX)}… [cut at ${SUMMARY_MAX} characters]`
    : summary;
}

/**
 * Input tokens with the cached ones counted in, as OpenAI and Gemini report them: Anthropic's API
 * (claude) and opencode count only the uncached part, and a run's total must not add unlike numbers.
 */
function allInput(
  uncached: number | null,
  cacheRead: number | null,
  cacheWrite: number | null,
): number | null {
  return uncached === null ? null : uncached + (cacheRead ?? 0) + (cacheWrite ?? 0);
}

/** null for a usage in which the CLI reported nothing. */
function usageOf(u: Usage | null): Usage | null {
  return u === null || Object.values(u).every((v) => v === null) ? null : u;
}

/**
 * The Anthropic API's usage object (Claude Code reports it as the API sent it: `input_tokens`
 * leave the cached ones out); Qwen Code copies its shape with OpenAI's count, cached ones in.
 */
function anthropicUsage(u: Json, cost: number | null, input: "uncached" | "all" = "uncached"): Usage {
  const cacheRead = count(u.cache_read_input_tokens);
  const cacheWrite = count(u.cache_creation_input_tokens);
  return {
    input_tokens:
      input === "all" ? count(u.input_tokens) : allInput(count(u.input_tokens), cacheRead, cacheWrite),
    output_tokens: count(u.output_tokens),
    cache_read_tokens: cacheRead,
    cache_write_tokens: cacheWrite,
    cost_usd: cost,
  };
}

/**
 * `claude -p --output-format json`: one result object (type "result"); Qwen Code's last event is
 * one of the same shape. Its text is `result`, or on an error subtype `errors` (claude) or
 * `error.message` (qwen).
 */
function claude(stdout: string, input: "uncached" | "all"): ParsedOutput {
  const r = lastObject(stdout);
  if (r?.type !== "result") return NONE;
  return {
    result: {
      summary: capped(
        str(r.result) ??
          (Array.isArray(r.errors)
            ? r.errors.filter((e) => typeof e === "string").join("\n") || null
            : null) ??
          (isObject(r.error) ? str(r.error.message) : null),
      ),
      session_id: str(r.session_id),
      is_error: r.is_error === true || (typeof r.subtype === "string" && r.subtype.startsWith("error")),
    },
    usage: usageOf(claudeUsage(r, input)),
    ...(r.subtype === "error_max_budget_usd" ? { atBudgetCap: true as const } : {}),
  };
}

/**
 * A Claude Code result's usage: `usage`, or, when that is all zeros (a run its own
 * --max-budget-usd stopped), the per-model `modelUsage` added up (each model's input leaves the
 * cached tokens out, as `usage` does).
 */
function claudeUsage(r: Json, input: "uncached" | "all"): Usage {
  const cost = money(r.total_cost_usd);
  const own = anthropicUsage(isObject(r.usage) ? r.usage : {}, cost, input);
  const models = isObject(r.modelUsage) ? Object.values(r.modelUsage).filter(isObject) : [];
  if (models.length === 0 || [own.input_tokens, own.output_tokens].some((n) => n !== null && n > 0))
    return own;
  const sum = (key: string): number => models.reduce((total, m) => total + (count(m[key]) ?? 0), 0);
  return anthropicUsage(
    {
      input_tokens: sum("inputTokens"),
      output_tokens: sum("outputTokens"),
      cache_read_input_tokens: sum("cacheReadInputTokens"),
      cache_creation_input_tokens: sum("cacheCreationInputTokens"),
    },
    cost,
    input,
  );
}

/** `codex exec --json`: JSONL events; usage per `turn.completed`, the answer in the last agent_message item. */
function codex(stdout: string): ParsedOutput {
  const events = jsonLines(stdout);
  if (events.length === 0) return NONE;
  let summary: string | null = null;
  let session: string | null = null;
  let error: string | null = null;
  const turns: Usage[] = [];
  for (const e of events) {
    if (e.type === "thread.started") session = str(e.thread_id) ?? session;
    else if (e.type === "item.completed" && isObject(e.item) && e.item.type === "agent_message")
      summary = str(e.item.text) ?? summary;
    else if (e.type === "turn.completed" && isObject(e.usage))
      turns.push({
        input_tokens: count(e.usage.input_tokens),
        output_tokens: count(e.usage.output_tokens),
        cache_read_tokens: count(e.usage.cached_input_tokens),
        cache_write_tokens: count(e.usage.cache_write_input_tokens),
        cost_usd: null,
      });
    else if (e.type === "turn.failed")
      error = (isObject(e.error) ? str(e.error.message) : null) ?? "the turn failed";
    else if (e.type === "error") error = str(e.message) ?? "error";
  }
  return {
    result: { summary: capped(summary ?? error), session_id: session, is_error: error !== null },
    usage: usageOf(addUsage(turns)),
  };
}

/**
 * `gemini -p --output-format json`: one object with `response`, `stats` and, on failure, `error`;
 * the CLI writes a failure to stderr instead (lastErrorObject).
 */
function gemini(stdout: string, stderr: string): ParsedOutput {
  const r = lastObject(stdout) ?? lastErrorObject(stderr);
  if (!r || !("response" in r || "error" in r || "stats" in r)) return NONE;
  const error = isObject(r.error) ? (str(r.error.message) ?? "error") : null;
  const models = isObject(r.stats) && isObject(r.stats.models) ? Object.values(r.stats.models) : [];
  const perModel: Usage[] = models.filter(isObject).map((m) => {
    const t = isObject(m.tokens) ? m.tokens : {};
    return {
      input_tokens: count(t.prompt),
      output_tokens: count(t.candidates),
      cache_read_tokens: count(t.cached),
      cache_write_tokens: null,
      cost_usd: null,
    };
  });
  return {
    result: {
      summary: capped(str(r.response) ?? error),
      session_id: str(r.session_id),
      is_error: error !== null,
    },
    usage: usageOf(addUsage(perModel)),
  };
}

/** `opencode run --format json`: JSONL events; text parts, one `step_finish` with tokens and cost per step. */
function opencode(stdout: string): ParsedOutput {
  const events = jsonLines(stdout);
  if (events.length === 0) return NONE;
  let summary: string | null = null;
  let session: string | null = null;
  let error: string | null = null;
  const steps: Usage[] = [];
  for (const e of events) {
    session = str(e.sessionID) ?? session;
    const part = isObject(e.part) ? e.part : {};
    if (e.type === "text") summary = str(part.text) ?? summary;
    else if (e.type === "step_finish") {
      const t = isObject(part.tokens) ? part.tokens : {};
      const cache = isObject(t.cache) ? t.cache : {};
      const cacheRead = count(cache.read);
      const cacheWrite = count(cache.write);
      steps.push({
        input_tokens: allInput(count(t.input), cacheRead, cacheWrite),
        output_tokens: count(t.output),
        cache_read_tokens: cacheRead,
        cache_write_tokens: cacheWrite,
        cost_usd: money(part.cost),
      });
    } else if (e.type === "error") {
      const err = isObject(e.error) ? e.error : {};
      error = (isObject(err.data) ? str(err.data.message) : null) ?? str(err.name) ?? "error";
    }
  }
  return {
    result: { summary: capped(summary ?? error), session_id: session, is_error: error !== null },
    usage: usageOf(addUsage(steps)),
  };
}

/**
 * `pi -p --mode json`: JSONL events; the session's id first, then each message's end. An
 * assistant message's end has its usage (input without the cached tokens) and, when the model
 * failed, `stopReason: "error"` with `errorMessage`: pi exits 0 then. Its session file
 * (`pi-session`) holds the same messages as `message` entries.
 */
function pi(stdout: string, entry: "message_end" | "message" = "message_end"): ParsedOutput {
  const events = jsonLines(stdout);
  if (events.length === 0) return NONE;
  let session: string | null = null;
  let summary: string | null = null;
  let error: string | null = null;
  const messages: Usage[] = [];
  for (const e of events) {
    if (e.type === "session") session = str(e.id) ?? session;
    if (e.type !== entry || !isObject(e.message) || e.message.role !== "assistant") continue;
    const m = e.message;
    const said = textOf(m.content);
    if (said) summary = said;
    error = m.stopReason === "error" ? (str(m.errorMessage) ?? "error") : null;
    const u = isObject(m.usage) ? m.usage : {};
    const cacheRead = count(u.cacheRead);
    const cacheWrite = count(u.cacheWrite);
    messages.push({
      input_tokens: allInput(count(u.input), cacheRead, cacheWrite),
      output_tokens: count(u.output),
      cache_read_tokens: cacheRead,
      cache_write_tokens: cacheWrite,
      cost_usd: isObject(u.cost) ? money(u.cost.total) : null,
    });
  }
  return {
    result: { summary: capped(error ?? summary), session_id: session, is_error: error !== null },
    usage: usageOf(addUsage(messages)),
  };
}

/**
 * `copilot --output-format json`: JSONL events; the answer in the last `assistant.message` with
 * content, a failure in `session.error`, the session's id and exit code in the closing `result`.
 * Its tokens are only in the `--usage-output-file` document: per model, input with the cached
 * tokens in (as the API counts them).
 */
function copilot(stdout: string, usageFile: string): ParsedOutput {
  const events = jsonLines(stdout);
  if (events.length === 0) return NONE;
  let summary: string | null = null;
  let session: string | null = null;
  let error: string | null = null;
  let exitCode: number | null = null;
  for (const e of events) {
    const data = isObject(e.data) ? e.data : {};
    if (e.type === "assistant.message") summary = str(data.content) || summary;
    else if (e.type === "session.error") error = str(data.message) ?? "error";
    else if (e.type === "result") {
      session = str(e.sessionId);
      exitCode = typeof e.exitCode === "number" ? e.exitCode : null;
    }
  }
  const file = parse(usageFile);
  const models = isObject(file) && isObject(file.modelMetrics) ? Object.values(file.modelMetrics) : [];
  const perModel: Usage[] = models.filter(isObject).map((m) => {
    const u = isObject(m.usage) ? m.usage : {};
    return {
      input_tokens: count(u.inputTokens),
      output_tokens: count(u.outputTokens),
      cache_read_tokens: count(u.cacheReadTokens),
      cache_write_tokens: count(u.cacheWriteTokens),
      cost_usd: null,
    };
  });
  const failed = error !== null || (exitCode !== null && exitCode !== 0);
  return {
    result: { summary: capped(error ?? summary), session_id: session, is_error: failed },
    usage: usageOf(addUsage(perModel)),
  };
}

/**
 * `cn -p --format json`: one object, `response` and `status`; a failure is an object with
 * `status: "error"` and `message` on stderr (exit 1). cn 1.5 reports no tokens and no session id.
 */
function continueCli(stdout: string, stderr: string): ParsedOutput {
  const r = lastObject(stdout);
  const failed = lastObject(stderr);
  if (r && "response" in r)
    return {
      result: { summary: capped(str(r.response)), session_id: null, is_error: r.status === "error" },
      usage: null,
    };
  if (failed?.status === "error")
    return {
      result: { summary: capped(str(failed.message) ?? "error"), session_id: null, is_error: true },
      usage: null,
    };
  return NONE;
}

const SCALE: Record<string, number> = { "": 1, k: 1e3, K: 1e3, m: 1e6, M: 1e6 };
const amount = (n: string, unit: string | undefined): number =>
  Math.round(Number(n) * (SCALE[unit ?? ""] ?? 1));

/**
 * aider prints no JSON; after each message it prints a line like
 * `Tokens: 4.7k sent, 1.1k received. Cost: $0.02 message, $0.05 session.` (rounded as shown).
 * The last such line gives the session's cost; tokens are added up over the messages.
 */
function aider(stdout: string): ParsedOutput {
  const line =
    /^Tokens: ([\d.]+)([kKmM]?) sent(?:, ([\d.]+)([kKmM]?) cache write)?(?:, ([\d.]+)([kKmM]?) cache hit)?, ([\d.]+)([kKmM]?) received\.(?: Cost: \$([\d.]+) message, \$([\d.]+) session\.)?/gm;
  const messages: Usage[] = [];
  let session: number | null = null;
  for (const m of stdout.matchAll(line)) {
    messages.push({
      input_tokens: amount(m[1]!, m[2]),
      output_tokens: amount(m[7]!, m[8]),
      cache_read_tokens: m[5] ? amount(m[5], m[6]) : null,
      cache_write_tokens: m[3] ? amount(m[3], m[4]) : null,
      cost_usd: null,
    });
    if (m[10] !== undefined) session = Number(m[10]);
  }
  const usage = addUsage(messages);
  if (usage === null) return NONE;
  return { result: null, usage: usageOf({ ...usage, cost_usd: session }) };
}

/** Where an interactive CLI keeps its session's transcript, and how to read it. */
export type TranscriptFormat =
  | "claude-transcript"
  | "codex-rollout"
  | "opencode-events"
  | "gemini-chat"
  | "qwen-chat"
  | "pi-session"
  | "copilot-session"
  | "cn-session";

/**
 * An interactive session's result and usage from the transcript its CLI writes for itself (the
 * file its hooks or notify name): Claude Code's session JSONL, codex's rollout JSONL; or from
 * what termorch's opencode plugin recorded of the session (src/agent/event-recorders.ts).
 */
export function parseTranscript(format: TranscriptFormat, text: string): ParsedOutput {
  switch (format) {
    case "claude-transcript":
      return claudeTranscript(text);
    case "codex-rollout":
      return codexRollout(text);
    case "opencode-events":
      return opencodeEvents(text);
    case "gemini-chat":
      return geminiChat(text);
    case "qwen-chat":
      return qwenChat(text);
    case "pi-session":
      return pi(text, "message");
    case "copilot-session":
      return copilotSession(text);
    case "cn-session":
      return cnSession(text);
  }
}

/**
 * Gemini CLI's chat recording (`~/.gemini/tmp/<project>/chats/session-*.jsonl`, 0.61): the
 * session's id first, then its messages, a message written again as it grows (counted once, by
 * id); the model's messages (`type: "gemini"`) carry their tokens, input with the cached in.
 */
function geminiChat(text: string): ParsedOutput {
  const lines = jsonLines(text);
  let session: string | null = null;
  let summary: string | null = null;
  const messages = new Map<string, Usage>();
  for (const e of lines) {
    session = session ?? str(e.sessionId);
    if (e.type !== "gemini" || typeof e.id !== "string") continue;
    summary = str(e.content) || summary;
    const t = isObject(e.tokens) ? e.tokens : {};
    messages.set(e.id, {
      input_tokens: count(t.input),
      output_tokens: count(t.output),
      cache_read_tokens: count(t.cached),
      cache_write_tokens: null,
      cost_usd: null,
    });
  }
  if (session === null && messages.size === 0) return NONE;
  return {
    result: { summary: capped(summary), session_id: session, is_error: false },
    usage: usageOf(addUsage([...messages.values()])),
  };
}

/**
 * Qwen Code's chat (`~/.qwen/projects/<folder>/chats/<session>.jsonl`, 0.24): one record a line;
 * the model's (`type: "assistant"`) carry Gemini's usageMetadata, input with the cached in.
 */
function qwenChat(text: string): ParsedOutput {
  let session: string | null = null;
  let summary: string | null = null;
  const messages = new Map<string, Usage>();
  for (const e of jsonLines(text)) {
    session = session ?? str(e.sessionId);
    if (e.type !== "assistant" || !isObject(e.message)) continue;
    const parts = Array.isArray(e.message.parts) ? e.message.parts.filter(isObject) : [];
    const said = parts
      .map((p) => str(p.text) ?? "")
      .join("")
      .trim();
    if (said) summary = said;
    const u = isObject(e.usageMetadata) ? e.usageMetadata : null;
    if (u && typeof e.uuid === "string")
      messages.set(e.uuid, {
        input_tokens: count(u.promptTokenCount),
        output_tokens: count(u.candidatesTokenCount),
        cache_read_tokens: count(u.cachedContentTokenCount),
        cache_write_tokens: null,
        cost_usd: null,
      });
  }
  if (session === null) return NONE;
  return {
    result: { summary: capped(summary), session_id: session, is_error: false },
    usage: usageOf(addUsage([...messages.values()])),
  };
}

/**
 * GitHub Copilot CLI's session events (`~/.copilot/session-state/<session>/events.jsonl`,
 * 1.0.102): its start names the session, each model call leaves a usage record (input with the
 * cached in), the answer is the last assistant message with content.
 */
function copilotSession(text: string): ParsedOutput {
  let session: string | null = null;
  let summary: string | null = null;
  let error: string | null = null;
  const calls: Usage[] = [];
  for (const e of jsonLines(text)) {
    const data = isObject(e.data) ? e.data : {};
    if (e.type === "session.start") session = str(data.sessionId) ?? session;
    else if (e.type === "assistant.message" && str(data.content)) {
      summary = str(data.content);
      error = null;
    } else if (e.type === "session.error") error = str(data.message) ?? "error";
    else if (e.type === "session.usage_record" && isObject(data.usage))
      calls.push({
        input_tokens: count(data.usage.inputTokens),
        output_tokens: count(data.usage.outputTokens),
        cache_read_tokens: count(data.usage.cacheReadTokens),
        cache_write_tokens: count(data.usage.cacheWriteTokens),
        cost_usd: null,
      });
  }
  if (session === null) return NONE;
  return {
    result: { summary: capped(error ?? summary), session_id: session, is_error: error !== null },
    usage: usageOf(addUsage(calls)),
  };
}

/**
 * Continue cn's session (`~/.continue/sessions/<session>.json`, 1.5.47): one document, its history
 * of messages, the assistant's with OpenAI's usage (prompt tokens with the cached in).
 */
function cnSession(text: string): ParsedOutput {
  const doc = parse(text);
  if (!isObject(doc) || !Array.isArray(doc.history)) return NONE;
  let summary: string | null = null;
  const messages: Usage[] = [];
  for (const h of doc.history) {
    const m = isObject(h) && isObject(h.message) ? h.message : null;
    if (m?.role !== "assistant") continue;
    summary = (typeof m.content === "string" ? m.content.trim() : textOf(m.content)) || summary;
    const u = isObject(m.usage) ? m.usage : null;
    if (u)
      messages.push({
        input_tokens: count(u.prompt_tokens),
        output_tokens: count(u.completion_tokens),
        cache_read_tokens: isObject(u.prompt_tokens_details)
          ? count(u.prompt_tokens_details.cached_tokens)
          : null,
        cache_write_tokens: null,
        cost_usd: null,
      });
  }
  return {
    result: { summary: capped(summary), session_id: str(doc.sessionId), is_error: false },
    usage: usageOf(addUsage(messages)),
  };
}

/**
 * The records of termorch's opencode plugin: assistant messages' final text, each completed
 * message's tokens (counted once, by id: opencode updates a message more than once) and cost,
 * and the session's errors.
 */
function opencodeEvents(text: string): ParsedOutput {
  const records = jsonLines(text);
  let summary: string | null = null;
  let session: string | null = null;
  let error: string | null = null;
  const messages = new Map<string, Usage>();
  for (const r of records) {
    session = session ?? str(r.session);
    if (r.type === "text") {
      summary = str(r.text) || summary;
      error = null;
    } else if (r.type === "session.error") error = str(r.message) ?? "error";
    else if (r.type === "message.completed" && typeof r.id === "string") {
      const t = isObject(r.tokens) ? r.tokens : {};
      const cache = isObject(t.cache) ? t.cache : {};
      const cacheRead = count(cache.read);
      const cacheWrite = count(cache.write);
      messages.set(r.id, {
        input_tokens: allInput(count(t.input), cacheRead, cacheWrite),
        output_tokens: count(t.output),
        cache_read_tokens: cacheRead,
        cache_write_tokens: cacheWrite,
        cost_usd: money(r.cost),
      });
      if (str(r.error)) error = str(r.error);
    }
  }
  if (records.length === 0) return NONE;
  return {
    result: { summary: capped(error ?? summary), session_id: session, is_error: error !== null },
    usage: usageOf(addUsage([...messages.values()])),
  };
}

/**
 * Claude Code writes one line per content block of a response, each repeating the message's
 * usage: responses are counted once, by message id.
 */
function claudeTranscript(text: string): ParsedOutput {
  const seen = new Set<string>();
  const messages: Usage[] = [];
  let summary: string | null = null;
  let session: string | null = null;
  let error = false;
  for (const e of jsonLines(text)) {
    session = str(e.sessionId) ?? session;
    if (e.type !== "assistant" || !isObject(e.message)) continue;
    const m = e.message;
    const said = textOf(m.content);
    if (said) {
      summary = said;
      error = e.isApiErrorMessage === true;
    }
    const id = str(m.id);
    if (id === null || seen.has(id) || !isObject(m.usage)) continue;
    seen.add(id);
    messages.push(anthropicUsage(m.usage, null));
  }
  if (summary === null && messages.length === 0) return NONE;
  return {
    result: { summary: capped(summary), session_id: session, is_error: error },
    usage: usageOf(addUsage(messages)),
  };
}

/** codex's rollout: the last token_count's running total for the thread, the last agent message. */
function codexRollout(text: string): ParsedOutput {
  let total: Json | null = null;
  let summary: string | null = null;
  let session: string | null = null;
  for (const e of jsonLines(text)) {
    const p = isObject(e.payload) ? e.payload : {};
    if (e.type === "session_meta") session = str(p.id) ?? session;
    if (e.type !== "event_msg") continue;
    if (p.type === "token_count" && isObject(p.info) && isObject(p.info.total_token_usage))
      total = p.info.total_token_usage;
    else if (p.type === "task_complete") summary = str(p.last_agent_message) ?? summary;
    else if (p.type === "agent_message") summary = str(p.message) ?? summary;
  }
  if (total === null && summary === null) return NONE;
  const usage: Usage | null =
    total === null
      ? null
      : {
          input_tokens: count(total.input_tokens),
          output_tokens: count(total.output_tokens),
          cache_read_tokens: count(total.cached_input_tokens),
          cache_write_tokens: count(total.cache_write_input_tokens),
          cost_usd: null,
        };
  return {
    result: { summary: capped(summary), session_id: session, is_error: false },
    usage: usageOf(usage),
  };
}

const arr = (v: unknown): unknown[] => (Array.isArray(v) ? v : []);

/** The text blocks of a message's content (Anthropic's and pi's shape), joined. */
function textOf(content: unknown): string {
  return arr(content)
    .filter(isObject)
    .filter((c) => c.type === "text")
    .map((c) => str(c.text) ?? "")
    .join("");
}
