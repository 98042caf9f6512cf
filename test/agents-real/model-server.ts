import { existsSync, readFileSync } from "node:fs";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { isAbsolute, join } from "node:path";
import { gunzipSync } from "node:zlib";

/**
 * A scripted model server on loopback that speaks the wire protocols of the real agent CLIs:
 * Anthropic Messages (claude), OpenAI Responses (codex), OpenAI-compatible chat completions
 * (opencode and others) and Gemini's generateContent (gemini), each streamed as the CLI asks.
 *
 * A test gives a script of steps. The agent's main requests (those that declare a tool that
 * writes files or runs commands) get the step whose index is the number of tool results the request carries, so a
 * CLI's retries and the order of its side requests do not shift the script; past its end, the
 * last step repeats. Side requests (titles, topic checks, routing) get a short answer with no
 * tokens. Every request is recorded for the test to look at.
 *
 * A script may instead choose each step from the conversation so far (`{ next }`): the tool calls
 * the CLI sent back with their results, for a model that acts on what its tools answered (an
 * orchestrator following a run through MCP tools).
 */

/** Tokens a step reports; the cached ones are counted in `input`, as OpenAI and Gemini count them. */
export interface ScriptUsage {
  input: number;
  output: number;
  cacheRead?: number;
  cacheWrite?: number;
}

export type Step =
  /**
   * A call of the CLI's own file-writing tool (a path relative to its working folder); `usage`:
   * what the response says it cost (default 10 in, 5 out).
   */
  | { write: string; content: string; usage?: ScriptUsage }
  /** A call of its file-reading tool (some CLIs write over a file only once it was read). */
  | { read: string }
  /**
   * A call of tool `tool` of the MCP server the CLI knows as `mcp`, named as the CLI names it
   * (claude mcp__<server>__<tool>, gemini mcp_<server>_<tool>, codex the function <tool> of the
   * namespace mcp__<server>, opencode-like CLIs <server>_<tool>). A codex that defers MCP tools
   * behind its tool search is first sent a search for them.
   */
  | { mcp: string; tool: string; args: Record<string, unknown> }
  /**
   * A call of the CLI's own shell tool. `ask`: a call that needs the user's permission in the CLI's
   * edit mode (codex: with escalated sandbox permissions, which its exec_command declares).
   */
  | { shell: string; ask?: boolean }
  /** The final answer of the turn. */
  | { reply: string; usage?: ScriptUsage }
  /**
   * An HTTP error as the API sends it, with a Retry-After of `retryAfter` seconds (default 0: a
   * CLI that retries does not stretch a test) and, when given, `body` instead of the provider's
   * usual error document (a usage cap in a provider's own words).
   */
  | FailStep;

/** An HTTP error step (see Step). */
export type FailStep = { fail: number; message: string; retryAfter?: string; body?: unknown };

export type Protocol = "anthropic" | "responses" | "chat" | "gemini";

export interface RecordedRequest {
  protocol: Protocol | null;
  method: string;
  path: string;
  headers: Record<string, string | string[] | undefined>;
  body: unknown;
  /** A request of the agent's loop (it declared a file tool), as opposed to a side request. */
  main: boolean;
  /** The script step it got (main requests only). */
  step: number | null;
  /** The text of the whole request, for finding what the CLI sent (its prompt, its folder). */
  text: string;
  /** The credential it came with (authorization, x-api-key, x-goog-api-key or ?key=), kept out of `headers`. */
  auth: string | null;
}

export interface ModelServer {
  /** `http://127.0.0.1:<port>` (no path). */
  readonly url: string;
  readonly requests: readonly RecordedRequest[];
  /** Main requests only. */
  mainRequests(): RecordedRequest[];
  /** Replaces the script (the next main request reads the new one). */
  setScript(script: Script): void;
  /** Answers each request `ms` later (a model's think time; 0 by default). */
  setDelay(ms: number): void;
  /** Answers the next `n` main requests with `failure` whatever the script says (a limit that lifts). */
  failFirst(n: number, failure: FailStep): void;
  close(): Promise<void>;
}

/** The model a server names when asked for its list (CLIs that check the model exists). */
export const MODEL = "termorch-test-model";

/** A tool call the CLI made and sent back, with what the tool answered (null: no answer yet). */
export interface ToolExchange {
  /** The tool's name as declared to the model. */
  name: string;
  /** codex: the namespace the tool belongs to (mcp__<server> for an MCP server's tools). */
  namespace?: string;
  args: unknown;
  /**
   * The answer's text as the CLI sent it to the model: claude the tool's text, codex prefixes
   * "Wall time … Output:", gemini wraps it in <untrusted_context> (its `output`, or the JSON of
   * its error).
   */
  result: string | null;
}

/**
 * Steps for all conversations, or chosen from the request's text (which task's prompt it
 * carries), or one step at a time from the conversation so far (main requests only).
 */
export type Script = Step[] | ((requestText: string) => Step[]) | ConversationScript;

/** A script that answers each main request with a step chosen from its conversation so far. */
export interface ConversationScript {
  next(conversation: ToolExchange[], requestText: string): Step;
}

/** The tool of MCP server `server` that an exchange called, whichever way the CLI names it; null for another tool. */
export function mcpToolOf(exchange: ToolExchange, server: string): string | null {
  if (exchange.namespace !== undefined) return exchange.namespace === `mcp__${server}` ? exchange.name : null;
  for (const prefix of [`mcp__${server}__`, `mcp_${server}_`, `${server}_`])
    if (exchange.name.startsWith(prefix)) return exchange.name.slice(prefix.length);
  return null;
}

export async function startModelServer(initial: Script): Promise<ModelServer> {
  let script = initial;
  let delayMs = 0;
  let failing: { left: number; failure: FailStep } = { left: 0, failure: { fail: 429, message: "" } };
  const requests: RecordedRequest[] = [];
  const server: Server = createServer((req, res) => {
    void readBody(req).then(
      (raw) => {
        let reply: Reply;
        try {
          reply = handle(req, raw);
        } catch (error) {
          reply = json(500, { error: { message: `model server: ${String(error)}` } });
        }
        if (delayMs === 0) send(res, reply);
        else setTimeout(() => send(res, reply), delayMs);
      },
      () => res.destroy(),
    );
  });

  const handle = (req: IncomingMessage, raw: Buffer): Reply => {
    const path = (req.url ?? "/").split("?")[0] ?? "/";
    const text = raw.toString("utf8");
    let body: unknown = null;
    try {
      body = text ? JSON.parse(text) : null;
    } catch {
      body = text;
    }
    const protocol = protocolOf(req.method ?? "GET", path);
    const tools = protocol ? toolsOf(protocol, body) : [];
    // Side requests that want JSON of a schema (titles, gemini's routing): codex's TUI asks for a
    // thread title with its tools declared, so a schema makes a request a side one.
    const schema = answerSchemaOf(body);
    const main = schema === null && tools.some((t) => t.role === "write" || t.role === "shell");
    // The step of a main request: by its count of tool results, or from its conversation (not for
    // a token count, which carries the conversation too).
    const current = script;
    let chosen: Step | null = null;
    let stepIndex: number | null = null;
    if (main && (Array.isArray(current) || typeof current === "function")) {
      const steps = typeof current === "function" ? current(text) : current;
      stepIndex = Math.min(toolResultsIn(protocol!, body), steps.length - 1);
      chosen = steps[stepIndex]!;
    } else if (
      main &&
      !Array.isArray(current) &&
      typeof current !== "function" &&
      !/count_?tokens$/i.test(path)
    ) {
      const conversation = conversationOf(protocol!, body);
      stepIndex = conversation.length;
      chosen = current.next(conversation, text);
    }
    requests.push({
      protocol,
      method: req.method ?? "GET",
      path,
      headers: {
        ...req.headers,
        authorization: undefined,
        "x-api-key": undefined,
        "x-goog-api-key": undefined,
      },
      auth: credentialOf(req),
      body,
      main,
      step: stepIndex,
      text,
    });
    if (req.method === "GET" && path.endsWith("/models")) return json(200, modelList(protocol, path));
    if (protocol === null || !isObject(body)) return json(200, {});
    if (path.endsWith("/count_tokens")) return json(200, { input_tokens: 1 });
    if (path.endsWith(":countTokens")) return json(200, { totalTokens: 1 });
    const step: Step =
      chosen ??
      ({
        reply: schema === null ? "ok" : JSON.stringify(sampleOf(schema)),
        usage: { input: 0, output: 0 },
      } as Step);
    if (main && failing.left > 0) {
      failing.left--;
      return fail(protocol, failing.failure);
    }
    if ("fail" in step) return fail(protocol, step);
    const action = actionOf(step, tools, cwdOf(text));
    const stream = protocol === "gemini" ? path.includes(":streamGenerateContent") : body.stream === true;
    return respond[protocol](action, stream, typeof body.model === "string" ? body.model : MODEL);
  };

  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    mainRequests: () => requests.filter((r) => r.main),
    setScript(next) {
      script = next;
    },
    setDelay(ms) {
      delayMs = ms;
    },
    failFirst(n, failure) {
      failing = { left: n, failure };
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

// ---------------------------------------------------------------------------------------------
// What a request is

function credentialOf(req: IncomingMessage): string | null {
  const h = req.headers;
  const header = h.authorization ?? h["x-api-key"] ?? h["x-goog-api-key"];
  if (typeof header === "string") return header;
  return new URL(req.url ?? "/", "http://x").searchParams.get("key");
}

function protocolOf(method: string, path: string): Protocol | null {
  if (path.endsWith("/messages") || path.endsWith("/messages/count_tokens")) return "anthropic";
  if (path.endsWith("/responses")) return "responses";
  if (path.endsWith("/chat/completions")) return "chat";
  if (/\/models\/[^/]+:(stream)?[gG]enerateContent$|:countTokens$/.test(path)) return "gemini";
  if (method === "GET" && path.endsWith("/models")) return null;
  return null;
}

type Json = Record<string, unknown>;
const isObject = (v: unknown): v is Json => typeof v === "object" && v !== null && !Array.isArray(v);
const arr = (v: unknown): unknown[] => (Array.isArray(v) ? v : []);

interface Tool {
  name: string;
  /** codex: the namespace a function belongs to (an MCP server's tools). */
  namespace?: string;
  /** A function's JSON Schema properties; null for a free-form (custom) tool. */
  params: Json | null;
  role: "write" | "shell" | "patch" | "other";
}

const WRITE_TOOLS = /^(Write|write|write_file|create_file|WriteFile|file_write|create)$/;
const PATCH_TOOLS = /^apply_patch$/;
const SHELL_TOOLS = /^(Bash|bash|shell|run_shell_command|exec_command|shell_command|local_shell)$/;
const READ_TOOLS = /^(Read|read|read_file|view|ReadFile|Read_file)$/;

function roleOf(name: string): Tool["role"] {
  if (WRITE_TOOLS.test(name)) return "write";
  if (PATCH_TOOLS.test(name)) return "write";
  if (SHELL_TOOLS.test(name)) return "shell";
  return "other";
}

/** The tools the request declares, by protocol. */
function toolsOf(protocol: Protocol, body: unknown): Tool[] {
  if (!isObject(body)) return [];
  const out: Tool[] = [];
  const add = (name: unknown, params: unknown, custom = false, namespace?: string): void => {
    if (typeof name !== "string") return;
    const props = isObject(params) && isObject(params.properties) ? params.properties : {};
    out.push({
      name,
      params: custom ? null : props,
      role: namespace !== undefined ? "other" : PATCH_TOOLS.test(name) ? "patch" : roleOf(name),
      ...(namespace !== undefined ? { namespace } : {}),
    });
  };
  // codex declares an MCP server's tools as a namespace of functions, and a tool search (a tool
  // with no name) when it defers them: the ones a search loaded come back in the input's
  // tool_search_output items.
  const addResponses = (t: Json): void => {
    if (t.type === "namespace" && typeof t.name === "string") {
      for (const f of arr(t.tools)) if (isObject(f)) add(f.name, f.parameters, false, t.name);
    } else if (t.type === "tool_search") add("tool_search", null, true);
    else add(t.name, t.parameters, t.type === "custom");
  };
  if (protocol === "responses")
    for (const item of arr(body.input))
      if (isObject(item) && item.type === "tool_search_output")
        for (const t of arr(item.tools)) if (isObject(t)) addResponses(t);
  for (const t of arr(body.tools)) {
    if (!isObject(t)) continue;
    if (protocol === "anthropic") add(t.name, t.input_schema);
    else if (protocol === "responses") addResponses(t);
    else if (protocol === "chat")
      add(
        isObject(t.function) ? t.function.name : undefined,
        isObject(t.function) ? t.function.parameters : undefined,
      );
    else
      for (const f of arr(t.functionDeclarations))
        if (isObject(f)) add(f.name, f.parametersJsonSchema ?? f.parameters);
  }
  // A patch tool writes files too: it makes the request a main one.
  return out.map((t) => (t.role === "patch" ? { ...t, role: "write" as const, params: t.params } : t));
}

/** The JSON Schema a request wants its answer in (each API names it its own way), or null. */
function answerSchemaOf(body: unknown): Json | null {
  if (!isObject(body)) return null;
  const candidates = [
    isObject(body.text) && isObject(body.text.format) ? body.text.format.schema : undefined,
    isObject(body.output_config) && isObject(body.output_config.format)
      ? body.output_config.format.schema
      : undefined,
    isObject(body.generationConfig)
      ? (body.generationConfig.responseJsonSchema ?? body.generationConfig.responseSchema)
      : undefined,
    isObject(body.response_format) && isObject(body.response_format.json_schema)
      ? body.response_format.json_schema.schema
      : undefined,
  ];
  return (candidates.find(isObject) as Json | undefined) ?? null;
}

/** A value of the schema's shape: its required properties filled with plain values of their types. */
function sampleOf(schema: unknown): unknown {
  if (!isObject(schema)) return "termorch test";
  const type = String(schema.type ?? "object").toLowerCase();
  if (type === "object") {
    const props = isObject(schema.properties) ? schema.properties : {};
    return Object.fromEntries(Object.entries(props).map(([k, v]) => [k, sampleOf(v)]));
  }
  if (type === "array") return [];
  if (type === "integer" || type === "number") return 1;
  if (type === "boolean") return false;
  if (Array.isArray(schema.enum) && schema.enum.length > 0) return schema.enum[0];
  return "termorch test";
}

/** How many tool results the conversation holds: the index of the script's step to answer with. */
function toolResultsIn(protocol: Protocol, body: unknown): number {
  if (!isObject(body)) return 0;
  let n = 0;
  if (protocol === "anthropic")
    for (const m of arr(body.messages))
      for (const c of isObject(m) ? arr(m.content) : []) if (isObject(c) && c.type === "tool_result") n++;
  if (protocol === "responses")
    for (const item of arr(body.input))
      if (isObject(item) && typeof item.type === "string" && item.type.endsWith("_call_output")) n++;
  if (protocol === "chat") for (const m of arr(body.messages)) if (isObject(m) && m.role === "tool") n++;
  if (protocol === "gemini")
    for (const c of arr(body.contents))
      for (const p of isObject(c) ? arr(c.parts) : []) if (isObject(p) && isObject(p.functionResponse)) n++;
  return n;
}

/** The text of a tool result's content: a string, or blocks of text. */
function textOf(content: unknown): string {
  if (typeof content === "string") return content;
  return arr(content)
    .map((c) => (isObject(c) && typeof c.text === "string" ? c.text : JSON.stringify(c)))
    .join("\n");
}

/** The tool calls the conversation holds, each with its result, in order. */
export function conversationOf(protocol: Protocol, body: unknown): ToolExchange[] {
  if (!isObject(body)) return [];
  const calls: ToolExchange[] = [];
  const byId = new Map<unknown, ToolExchange>();
  const call = (callId: unknown, exchange: ToolExchange): void => {
    calls.push(exchange);
    if (callId !== undefined) byId.set(callId, exchange);
  };
  if (protocol === "anthropic")
    for (const m of arr(body.messages))
      for (const c of isObject(m) ? arr(m.content) : []) {
        if (!isObject(c)) continue;
        if (c.type === "tool_use") call(c.id, { name: String(c.name), args: c.input, result: null });
        const answered = c.type === "tool_result" ? byId.get(c.tool_use_id) : undefined;
        if (answered) answered.result = textOf(c.content);
      }
  if (protocol === "responses")
    for (const item of arr(body.input)) {
      if (!isObject(item)) continue;
      if (item.type === "function_call" || item.type === "custom_tool_call")
        call(item.call_id, {
          name: String(item.name),
          ...(typeof item.namespace === "string" ? { namespace: item.namespace } : {}),
          args: item.arguments ?? item.input,
          result: null,
        });
      const answered =
        item.type === "function_call_output" || item.type === "custom_tool_call_output"
          ? byId.get(item.call_id)
          : undefined;
      if (answered) answered.result = textOf(item.output);
    }
  if (protocol === "chat")
    for (const m of arr(body.messages)) {
      if (!isObject(m)) continue;
      for (const c of arr(m.tool_calls))
        if (isObject(c) && isObject(c.function))
          call(c.id, { name: String(c.function.name), args: c.function.arguments, result: null });
      const answered = m.role === "tool" ? byId.get(m.tool_call_id) : undefined;
      if (answered) answered.result = textOf(m.content);
    }
  if (protocol === "gemini")
    for (const c of arr(body.contents))
      for (const p of isObject(c) ? arr(c.parts) : []) {
        if (!isObject(p)) continue;
        const fc = p.functionCall;
        if (isObject(fc)) call(fc.id, { name: String(fc.name), args: fc.args, result: null });
        const fr = p.functionResponse;
        if (!isObject(fr)) continue;
        // By id when the CLI gives one, else the oldest unanswered call of that name.
        const answered =
          (fr.id !== undefined ? byId.get(fr.id) : undefined) ??
          calls.find((x) => x.name === fr.name && x.result === null);
        if (answered)
          answered.result =
            isObject(fr.response) && typeof fr.response.output === "string"
              ? fr.response.output
              : JSON.stringify(fr.response);
      }
  return calls;
}

/**
 * The folder the CLI works in, as its system prompt or environment context states it (each CLI
 * tells the model; the patterns are those of the pinned versions).
 */
function cwdOf(text: string): string | null {
  const patterns = [
    /<cwd>([^<]+)<\/cwd>/,
    /Working directory: ([^\n"\\]+)/,
    /[Cc]urrent working directory(?: is)?:? ([^\n"\\]+)/,
    /working (?:in the )?directory:? `?([^\n"`\\]+)`?/,
  ];
  for (const p of patterns) {
    const m = p.exec(text);
    if (m?.[1] && isAbsolute(m[1].trim())) return m[1].trim().replace(/[.,]$/, "");
  }
  return null;
}

// ---------------------------------------------------------------------------------------------
// What to answer

/** A step made concrete for the CLI at hand: a call of one of its tools, or text. */
type Action =
  | { kind: "call"; tool: Tool; args: Json | string; usage?: ScriptUsage }
  | { kind: "text"; text: string; usage: ScriptUsage }
  /** codex's client-side tool search (the Responses tool_search_call it runs itself). */
  | { kind: "search"; query: string };

function actionOf(step: Exclude<Step, { fail: number }>, tools: Tool[], cwd: string | null): Action {
  if ("reply" in step)
    return { kind: "text", text: step.reply, usage: step.usage ?? { input: 10, output: 5 } };
  if ("mcp" in step) {
    const { mcp: server, tool: name } = step;
    const names = [`mcp__${server}__${name}`, `mcp_${server}_${name}`, `${server}_${name}`];
    const tool = tools.find((t) =>
      t.namespace !== undefined
        ? t.namespace === `mcp__${server}` && t.name === name
        : names.includes(t.name),
    );
    if (tool) return { kind: "call", tool, args: step.args };
    // Searched by what it wants, the tool's name: with termorch's 14 tools, codex's search for
    // "termorch wait" ranks eight others above `wait` (they all name termorch), and never loads it.
    if (tools.some((t) => t.name === "tool_search")) return { kind: "search", query: name };
    throw new Error(`no tool ${name} of MCP server ${server} among ${tools.map((t) => t.name).join(", ")}`);
  }
  if ("read" in step) {
    const path = cwd && !isAbsolute(step.read) ? join(cwd, step.read) : step.read;
    const read = tools.find((t) => READ_TOOLS.test(t.name));
    if (!read?.params) return actionOf({ shell: `cat '${step.read}'` }, tools, cwd);
    const pathKey = Object.keys(read.params).find((n) => /path/i.test(n)) ?? "file_path";
    return { kind: "call", tool: read, args: { [pathKey]: path } };
  }
  if ("write" in step && step.usage) {
    const call = actionOf({ write: step.write, content: step.content }, tools, cwd);
    return call.kind === "call" ? { ...call, usage: step.usage } : call;
  }
  if ("write" in step) {
    const path = cwd && !isAbsolute(step.write) ? join(cwd, step.write) : step.write;
    // copilot's create refuses a file that exists: a model rewrites it with its edit tool, the
    // whole of its text replaced.
    const edit = tools.find((t) => t.name === "edit" && t.params && "old_str" in t.params);
    if (edit && existsSync(path))
      return {
        kind: "call",
        tool: edit,
        args: { path, old_str: readFileSync(path, "utf8"), new_str: step.content },
      };
    const write = tools.find((t) => WRITE_TOOLS.test(t.name));
    if (write?.params) return { kind: "call", tool: write, args: fileArgs(write.params, path, step.content) };
    const patch = tools.find((t) => PATCH_TOOLS.test(t.name));
    if (patch) {
      // Each + line is a line of the file: the content's last line break is the last line's own.
      const text = `*** Begin Patch\n*** Add File: ${step.write}\n${step.content
        .replace(/\n$/, "")
        .split("\n")
        .map((l) => `+${l}`)
        .join("\n")}\n*** End Patch\n`;
      return { kind: "call", tool: patch, args: patch.params ? { input: text } : text };
    }
    // No file tool (codex with a model it has no metadata for declares only exec_command): a shell
    // command writes the file, its content in base64 so nothing needs quoting.
    const b64 = Buffer.from(step.content).toString("base64");
    return actionOf(
      { shell: `mkdir -p "$(dirname '${step.write}')" && echo ${b64} | base64 -d > '${step.write}'` },
      tools,
      cwd,
    );
  }
  const shell = tools.find((t) => t.role === "shell");
  if (!shell?.params) throw new Error(`no shell tool among ${tools.map((t) => t.name).join(", ")}`);
  const key = "command" in shell.params ? "command" : "cmd" in shell.params ? "cmd" : "command";
  const schema = shell.params[key];
  const asArray = isObject(schema) && schema.type === "array";
  const args: Json = { [key]: asArray ? ["bash", "-lc", step.shell] : step.shell };
  if ("description" in shell.params) args.description = "run a command";
  if ("ask" in step && step.ask && "sandbox_permissions" in shell.params) {
    args.sandbox_permissions = "require_escalated";
    args.justification = "termorch test: a command that needs your permission";
  }
  return { kind: "call", tool: shell, args };
}

/** Arguments for a file-writing tool, named as its schema names them. */
function fileArgs(params: Json, path: string, content: string): Json {
  const names = Object.keys(params);
  const pathKey = names.find((n) => /path/i.test(n)) ?? "file_path";
  const contentKey = names.find((n) => /content|text/i.test(n)) ?? "content";
  return { [pathKey]: path, [contentKey]: content };
}

let seq = 0;
const id = (prefix: string): string => `${prefix}_${Date.now().toString(36)}${(++seq).toString(36)}`;

/** An HTTP answer: a JSON body, or a stream of server-sent events (name, data). */
type Reply =
  | { status: number; body: unknown; headers?: Record<string, string> }
  | { events: Array<[string | null, unknown]> };

function json(status: number, body: unknown, headers: Record<string, string> = {}): Reply {
  return { status, body, headers };
}

function sse(events: Array<[string | null, unknown]>): Reply {
  return { events };
}

function send(res: ServerResponse, reply: Reply): void {
  if ("events" in reply) {
    res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
    for (const [event, data] of reply.events)
      res.write(
        `${event ? `event: ${event}\n` : ""}data: ${typeof data === "string" ? data : JSON.stringify(data)}\n\n`,
      );
    res.end();
    return;
  }
  res.writeHead(reply.status, { "content-type": "application/json", ...reply.headers });
  res.end(JSON.stringify(reply.body));
}

function fail(protocol: Protocol, step: FailStep): Reply {
  // Retry at once unless told: a CLI that retries (opencode reads retry-after-ms) does not stretch a test.
  const after = step.retryAfter ?? "0";
  const headers: Record<string, string> = {
    "retry-after": after,
    "retry-after-ms": String(Number(after) * 1000),
  };
  if (step.body !== undefined) return json(step.fail, step.body, headers);
  const type =
    step.fail === 429 ? "rate_limit_error" : step.fail >= 500 ? "api_error" : "invalid_request_error";
  if (protocol === "anthropic")
    return json(step.fail, { type: "error", error: { type, message: step.message } }, headers);
  if (protocol === "gemini")
    return json(
      step.fail,
      {
        error: {
          code: step.fail,
          message: step.message,
          status:
            step.fail === 429 ? "RESOURCE_EXHAUSTED" : step.fail >= 500 ? "INTERNAL" : "INVALID_ARGUMENT",
        },
      },
      headers,
    );
  return json(step.fail, { error: { message: step.message, type, code: type, param: null } }, headers);
}

function modelList(protocol: Protocol | null, path: string): unknown {
  if (path.includes("v1beta")) return { models: [{ name: `models/${MODEL}` }] };
  if (protocol === "anthropic") return { data: [{ id: MODEL, type: "model" }], has_more: false };
  return { object: "list", data: [{ id: MODEL, object: "model", owned_by: "termorch" }] };
}

const respond: Record<Protocol, (action: Action, stream: boolean, model: string) => Reply> = {
  anthropic(action, stream, model) {
    if (action.kind === "search") throw new Error("a tool search is codex's");
    const usage = ("usage" in action && action.usage) || { input: 10, output: 5 };
    const cacheRead = usage.cacheRead ?? 0;
    const cacheWrite = usage.cacheWrite ?? 0;
    // Anthropic's input_tokens are the uncached part.
    const apiUsage = {
      input_tokens: usage.input - cacheRead - cacheWrite,
      output_tokens: usage.output,
      cache_read_input_tokens: cacheRead,
      cache_creation_input_tokens: cacheWrite,
    };
    const block =
      action.kind === "text"
        ? { type: "text", text: action.text }
        : { type: "tool_use", id: id("toolu"), name: action.tool.name, input: action.args };
    const stopReason = action.kind === "text" ? "end_turn" : "tool_use";
    const message = { id: id("msg"), type: "message", role: "assistant", model };
    if (!stream)
      return json(200, {
        ...message,
        content: [block],
        stop_reason: stopReason,
        stop_sequence: null,
        usage: apiUsage,
      });
    const start =
      block.type === "text"
        ? { type: "text", text: "" }
        : { type: "tool_use", id: (block as Json).id, name: (block as Json).name, input: {} };
    const delta =
      block.type === "text"
        ? { type: "text_delta", text: action.kind === "text" ? action.text : "" }
        : { type: "input_json_delta", partial_json: JSON.stringify((block as Json).input) };
    return sse([
      [
        "message_start",
        {
          type: "message_start",
          message: {
            ...message,
            content: [],
            stop_reason: null,
            stop_sequence: null,
            usage: { ...apiUsage, output_tokens: 1 },
          },
        },
      ],
      ["content_block_start", { type: "content_block_start", index: 0, content_block: start }],
      ["content_block_delta", { type: "content_block_delta", index: 0, delta }],
      ["content_block_stop", { type: "content_block_stop", index: 0 }],
      [
        "message_delta",
        {
          type: "message_delta",
          delta: { stop_reason: stopReason, stop_sequence: null },
          usage: { output_tokens: usage.output },
        },
      ],
      ["message_stop", { type: "message_stop" }],
    ]);
  },

  responses(action, _stream, model) {
    const usage = ("usage" in action && action.usage) || { input: 10, output: 5 };
    const responseId = id("resp");
    const item =
      action.kind === "text"
        ? {
            type: "message",
            id: id("msg"),
            role: "assistant",
            status: "completed",
            content: [{ type: "output_text", text: action.text, annotations: [] }],
          }
        : action.kind === "search"
          ? {
              type: "tool_search_call",
              id: id("ts"),
              call_id: id("call"),
              execution: "client",
              status: "completed",
              arguments: { query: action.query },
            }
          : typeof action.args === "string"
            ? {
                type: "custom_tool_call",
                id: id("ctc"),
                call_id: id("call"),
                name: action.tool.name,
                input: action.args,
              }
            : {
                type: "function_call",
                id: id("fc"),
                call_id: id("call"),
                ...(action.tool.namespace !== undefined ? { namespace: action.tool.namespace } : {}),
                name: action.tool.name,
                arguments: JSON.stringify(action.args),
              };
    const apiUsage = {
      input_tokens: usage.input,
      // codex 0.171 reads cache writes here (its cache_write_input_tokens).
      input_tokens_details: {
        cached_tokens: usage.cacheRead ?? 0,
        cache_write_tokens: usage.cacheWrite ?? 0,
      },
      output_tokens: usage.output,
      output_tokens_details: { reasoning_tokens: 0 },
      total_tokens: usage.input + usage.output,
    };
    const response = { id: responseId, object: "response", model, created_at: Math.floor(Date.now() / 1000) };
    const events: Array<[string | null, unknown]> = [
      [
        "response.created",
        { type: "response.created", response: { ...response, status: "in_progress", output: [] } },
      ],
      ["response.output_item.added", { type: "response.output_item.added", output_index: 0, item }],
    ];
    if (action.kind === "text")
      events.push([
        "response.output_text.delta",
        {
          type: "response.output_text.delta",
          item_id: item.id,
          output_index: 0,
          content_index: 0,
          delta: action.text,
        },
      ]);
    events.push(
      ["response.output_item.done", { type: "response.output_item.done", output_index: 0, item }],
      [
        "response.completed",
        {
          type: "response.completed",
          response: { ...response, status: "completed", output: [item], usage: apiUsage },
        },
      ],
    );
    return sse(events);
  },

  chat(action, stream, model) {
    if (action.kind === "search") throw new Error("a tool search is codex's");
    const usage = ("usage" in action && action.usage) || { input: 10, output: 5 };
    const apiUsage = {
      prompt_tokens: usage.input,
      completion_tokens: usage.output,
      total_tokens: usage.input + usage.output,
      prompt_tokens_details: { cached_tokens: usage.cacheRead ?? 0 },
    };
    const chunkId = id("chatcmpl");
    const created = Math.floor(Date.now() / 1000);
    const call =
      action.kind === "call"
        ? {
            index: 0,
            id: id("call"),
            type: "function",
            function: { name: action.tool.name, arguments: JSON.stringify(action.args) },
          }
        : null;
    const finish = call ? "tool_calls" : "stop";
    if (!stream)
      return json(200, {
        id: chunkId,
        object: "chat.completion",
        created,
        model,
        choices: [
          {
            index: 0,
            message: {
              role: "assistant",
              content: action.kind === "text" ? action.text : null,
              ...(call ? { tool_calls: [{ id: call.id, type: "function", function: call.function }] } : {}),
            },
            finish_reason: finish,
          },
        ],
        usage: apiUsage,
      });
    const chunk = (choices: unknown[], extra: Json = {}): [null, unknown] => [
      null,
      { id: chunkId, object: "chat.completion.chunk", created, model, choices, ...extra },
    ];
    return sse([
      chunk([{ index: 0, delta: { role: "assistant", content: "" }, finish_reason: null }]),
      chunk([
        {
          index: 0,
          delta: call ? { tool_calls: [call] } : { content: action.kind === "text" ? action.text : "" },
          finish_reason: null,
        },
      ]),
      chunk([{ index: 0, delta: {}, finish_reason: finish }]),
      chunk([], { usage: apiUsage }),
      [null, "[DONE]"],
    ]);
  },

  gemini(action, stream, model) {
    if (action.kind === "search") throw new Error("a tool search is codex's");
    const usage = ("usage" in action && action.usage) || { input: 10, output: 5 };
    const part =
      action.kind === "text"
        ? { text: action.text }
        : { functionCall: { name: action.tool.name, args: action.args } };
    const body = {
      candidates: [{ content: { role: "model", parts: [part] }, finishReason: "STOP", index: 0 }],
      usageMetadata: {
        promptTokenCount: usage.input,
        candidatesTokenCount: usage.output,
        cachedContentTokenCount: usage.cacheRead ?? 0,
        totalTokenCount: usage.input + usage.output,
      },
      modelVersion: model,
      responseId: id("gresp"),
    };
    if (!stream) return json(200, body);
    return sse([[null, body]]);
  },
};

async function readBody(req: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const c of req) chunks.push(c as Buffer);
  const raw = Buffer.concat(chunks);
  return req.headers["content-encoding"] === "gzip" ? gunzipSync(raw) : raw;
}
