import { describe, expect, it } from "vitest";
import { parseAgentOutput, parseTranscript, SUMMARY_MAX } from "../../src/agent/results.js";
import { addUsage } from "../../src/contract/agent-result.js";

// Output in each CLI's documented shape (docs/agents.md names the sources).
describe("an agent CLI's own account of its work", () => {
  it("claude: the result object after any log lines; an error subtype is an error", () => {
    const out = `starting\n${JSON.stringify({
      type: "result",
      subtype: "success",
      is_error: false,
      result: "Done: added tests",
      session_id: "s-1",
      total_cost_usd: 0.0123,
      usage: {
        input_tokens: 10,
        output_tokens: 20,
        cache_read_input_tokens: 30,
        cache_creation_input_tokens: 40,
      },
    })}\n`;
    expect(parseAgentOutput("claude-json", out)).toEqual({
      result: { summary: "Done: added tests", session_id: "s-1", is_error: false },
      // Anthropic counts only the uncached input: the report counts it all, as the other CLIs do.
      usage: {
        input_tokens: 80,
        output_tokens: 20,
        cache_read_tokens: 30,
        cache_write_tokens: 40,
        cost_usd: 0.0123,
      },
    });
    const failed = JSON.stringify({
      type: "result",
      subtype: "error_max_turns",
      is_error: false,
      session_id: "s",
    });
    expect(parseAgentOutput("claude-json", failed).result).toMatchObject({ is_error: true, summary: null });
    expect(parseAgentOutput("claude-json", "not json")).toEqual({ result: null, usage: null });
  });

  it("claude: stopped by its own --max-budget-usd, its usage zeroed: the tokens come from modelUsage", () => {
    const capped = JSON.stringify({
      type: "result",
      subtype: "error_max_budget_usd",
      is_error: true,
      session_id: "s-1",
      total_cost_usd: 0.000175,
      errors: ["Reached maximum budget ($0.00001)"],
      usage: {
        input_tokens: 0,
        cache_creation_input_tokens: 0,
        cache_read_input_tokens: 0,
        output_tokens: 0,
      },
      modelUsage: {
        "claude-sonnet-4-5": {
          inputTokens: 10,
          outputTokens: 5,
          cacheReadInputTokens: 4,
          cacheCreationInputTokens: 2,
          costUSD: 0.000175,
        },
        "claude-haiku-4-5": {
          inputTokens: 3,
          outputTokens: 1,
          cacheReadInputTokens: 0,
          cacheCreationInputTokens: 0,
          costUSD: 0,
        },
      },
    });
    expect(parseAgentOutput("claude-json", capped)).toEqual({
      result: { summary: "Reached maximum budget ($0.00001)", session_id: "s-1", is_error: true },
      // input_tokens counts the cached ones too: 13 + 4 + 2.
      usage: {
        input_tokens: 19,
        output_tokens: 6,
        cache_read_tokens: 4,
        cache_write_tokens: 2,
        cost_usd: 0.000175,
      },
      atBudgetCap: true,
    });
  });

  it("codex: the last agent message, the thread, usage summed over turns, a failed turn", () => {
    const lines = [
      { type: "thread.started", thread_id: "th-9" },
      { type: "item.completed", item: { type: "agent_message", text: "first" } },
      { type: "turn.completed", usage: { input_tokens: 100, cached_input_tokens: 40, output_tokens: 7 } },
      { type: "item.completed", item: { type: "agent_message", text: "second" } },
      {
        type: "turn.completed",
        usage: { input_tokens: 50, cached_input_tokens: 0, cache_write_input_tokens: 20, output_tokens: 3 },
      },
    ].map((l) => JSON.stringify(l));
    expect(parseAgentOutput("codex-jsonl", lines.join("\n"))).toEqual({
      result: { summary: "second", session_id: "th-9", is_error: false },
      usage: {
        input_tokens: 150,
        output_tokens: 10,
        cache_read_tokens: 40,
        cache_write_tokens: 20,
        cost_usd: null,
      },
    });
    const failed = `${lines[0]}\n${JSON.stringify({ type: "turn.failed", error: { message: "quota" } })}\n`;
    expect(parseAgentOutput("codex-jsonl", failed).result).toEqual({
      summary: "quota",
      session_id: "th-9",
      is_error: true,
    });
  });

  it("gemini: response, session and tokens of every model; an error object", () => {
    const out = JSON.stringify({
      session_id: "g-1",
      response: "ok",
      stats: {
        models: {
          "gemini-2.5-pro": { tokens: { prompt: 100, candidates: 5, cached: 60 } },
          "gemini-2.5-flash": { tokens: { prompt: 10, candidates: 1, cached: 0 } },
        },
      },
    });
    expect(parseAgentOutput("gemini-json", out)).toEqual({
      result: { summary: "ok", session_id: "g-1", is_error: false },
      usage: {
        input_tokens: 110,
        output_tokens: 6,
        cache_read_tokens: 60,
        cache_write_tokens: null,
        cost_usd: null,
      },
    });
    expect(
      parseAgentOutput("gemini-json", JSON.stringify({ error: { message: "bad key" } })).result,
    ).toMatchObject({
      is_error: true,
      summary: "bad key",
    });
  });

  it("gemini: an error object printed bare on stderr after a stack trace (0.61), or after [ERROR]", () => {
    const stderr = [
      "Error when talking to Gemini API Full report available at: /tmp/gemini-client-error.json",
      "    at async GeminiChat.sendMessageStream (file:///gemini/bundle/chunk.js:1:2) {",
      '  cause: { "status": 400 }',
      "}",
      "{",
      '  "session_id": "g-2",',
      '  "error": {',
      '    "type": "Error",',
      '    "message": "[API Error: bad {request} \\"x\\"]",',
      '    "code": 400',
      "  }",
      "}",
      "",
    ].join("\n");
    expect(parseAgentOutput("gemini-json", "", { stderr }).result).toEqual({
      summary: '[API Error: bad {request} "x"]',
      session_id: "g-2",
      is_error: true,
    });
    const prefixed = `warn\n[ERROR] ${JSON.stringify({ error: { message: "quota" } }, null, 2)}\n`;
    expect(parseAgentOutput("gemini-json", "", { stderr: prefixed }).result?.summary).toBe("quota");
    expect(parseAgentOutput("gemini-json", "", { stderr: "Error: {not json\n" }).result).toBeNull();
  });

  it("opencode: the last text part, the session, tokens and cost of every step; an error event", () => {
    const ev = (e: object): string => JSON.stringify({ sessionID: "ses_1", ...e });
    const out = [
      ev({ type: "text", part: { text: "edited a.ts" } }),
      ev({
        type: "step_finish",
        part: { cost: 0.01, tokens: { input: 10, output: 2, cache: { read: 5, write: 1 } } },
      }),
      ev({
        type: "step_finish",
        part: { cost: 0.02, tokens: { input: 20, output: 3, cache: { read: 0, write: 0 } } },
      }),
    ].join("\n");
    expect(parseAgentOutput("opencode-jsonl", out)).toEqual({
      result: { summary: "edited a.ts", session_id: "ses_1", is_error: false },
      // opencode, like claude, counts the cached input apart.
      usage: {
        input_tokens: 36,
        output_tokens: 5,
        cache_read_tokens: 5,
        cache_write_tokens: 1,
        cost_usd: 0.03,
      },
    });
    const failed = ev({ type: "error", error: { name: "APIError", data: { message: "rate limited" } } });
    expect(parseAgentOutput("opencode-jsonl", failed).result).toMatchObject({
      is_error: true,
      summary: "rate limited",
    });
  });

  it("aider: its usage lines (tokens added up, the last session cost), no summary", () => {
    const out = [
      "Applied edit to a.py",
      "Tokens: 2.4k sent, 1.0k cache write, 3.1k cache hit, 180 received. Cost: $0.0099 message, $0.01 session.",
      "Tokens: 1.2k sent, 20 received. Cost: $0.0050 message, $0.02 session.",
    ].join("\n");
    expect(parseAgentOutput("text", out)).toEqual({
      result: null,
      usage: {
        input_tokens: 3600,
        output_tokens: 200,
        cache_read_tokens: 3100,
        cache_write_tokens: 1000,
        cost_usd: 0.02,
      },
    });
    expect(parseAgentOutput("text", "no usage line")).toEqual({ result: null, usage: null });
  });

  it("cuts a long summary and adds usages field by field", () => {
    const long = JSON.stringify({ type: "result", is_error: false, result: "x".repeat(SUMMARY_MAX + 10) });
    expect(parseAgentOutput("claude-json", long).result!.summary!.length).toBeLessThan(SUMMARY_MAX + 50);
    const u = {
      input_tokens: 1,
      output_tokens: null,
      cache_read_tokens: null,
      cache_write_tokens: null,
      cost_usd: 0.1,
    };
    expect(addUsage([u, null, { ...u, output_tokens: 2, cost_usd: 0.2 }])).toEqual({
      input_tokens: 2,
      output_tokens: 2,
      cache_read_tokens: null,
      cache_write_tokens: null,
      cost_usd: 0.3,
    });
    expect(addUsage([null])).toBeNull();
  });
});

describe("an interactive session's transcript", () => {
  it("claude: each response counted once (one line per content block repeats its usage), the last text", () => {
    const usage = {
      input_tokens: 10,
      output_tokens: 5,
      cache_read_input_tokens: 30,
      cache_creation_input_tokens: 2,
    };
    const line = (id: string, content: object[], extra: object = {}): string =>
      JSON.stringify({ type: "assistant", sessionId: "s-9", message: { id, content, usage }, ...extra });
    const text = [
      JSON.stringify({ type: "user", sessionId: "s-9", message: { content: "do it" } }),
      line("m1", [{ type: "text", text: "I will write it." }]),
      line("m1", [{ type: "tool_use", name: "Write" }]),
      line("m2", [{ type: "text", text: "Done." }]),
    ].join("\n");
    expect(parseTranscript("claude-transcript", text)).toEqual({
      result: { summary: "Done.", session_id: "s-9", is_error: false },
      usage: {
        input_tokens: 84,
        output_tokens: 10,
        cache_read_tokens: 60,
        cache_write_tokens: 4,
        cost_usd: null,
      },
    });
  });

  it("codex: the thread's running total of its last token_count, its last agent message", () => {
    const ev = (payload: object): string => JSON.stringify({ type: "event_msg", payload });
    const total = (n: number) => ({
      type: "token_count",
      info: {
        total_token_usage: {
          input_tokens: n,
          cached_input_tokens: 4,
          cache_write_input_tokens: 1,
          output_tokens: 2,
        },
      },
    });
    const text = [
      JSON.stringify({ type: "session_meta", payload: { id: "th-1" } }),
      ev(total(10)),
      ev(total(30)),
      ev({ type: "task_complete", last_agent_message: "Done: x" }),
    ].join("\n");
    expect(parseTranscript("codex-rollout", text)).toEqual({
      result: { summary: "Done: x", session_id: "th-1", is_error: false },
      usage: {
        input_tokens: 30,
        output_tokens: 2,
        cache_read_tokens: 4,
        cache_write_tokens: 1,
        cost_usd: null,
      },
    });
  });
});

describe("Qwen Code's output", () => {
  it("the last event of its array is a Claude-style result; its input tokens count the cached ones already", () => {
    const out = JSON.stringify([
      { type: "system", subtype: "init", session_id: "q-1" },
      {
        type: "result",
        subtype: "success",
        is_error: false,
        session_id: "q-1",
        result: "Done.",
        usage: { input_tokens: 1210, output_tokens: 85, cache_read_input_tokens: 400 },
      },
    ]);
    expect(parseAgentOutput("qwen-json", out)).toEqual({
      result: { summary: "Done.", session_id: "q-1", is_error: false },
      usage: {
        input_tokens: 1210,
        output_tokens: 85,
        cache_read_tokens: 400,
        cache_write_tokens: null,
        cost_usd: null,
      },
    });
    const failed = JSON.stringify([
      {
        type: "result",
        subtype: "error_during_execution",
        is_error: true,
        error: { message: "[API Error: 400]" },
      },
    ]);
    expect(parseAgentOutput("qwen-json", failed).result).toMatchObject({
      summary: "[API Error: 400]",
      is_error: true,
    });
  });
});

describe("pi's output", () => {
  it("its session, each assistant message's usage (cached input added), the last text; a model error with exit 0", () => {
    const end = (message: object): string => JSON.stringify({ type: "message_end", message });
    const usage = (input: number, cacheRead: number) => ({
      input,
      output: 5,
      cacheRead,
      cacheWrite: 0,
      cost: { total: 0.01 },
    });
    const out = [
      JSON.stringify({ type: "session", id: "p-1" }),
      end({ role: "user", content: [{ type: "text", text: "go" }] }),
      end({ role: "assistant", content: [{ type: "toolCall" }], usage: usage(10, 0), stopReason: "toolUse" }),
      JSON.stringify({ type: "turn_end", message: { role: "assistant", usage: usage(10, 0) } }),
      end({
        role: "assistant",
        content: [{ type: "text", text: "Done." }],
        usage: usage(800, 400),
        stopReason: "stop",
      }),
    ].join("\n");
    expect(parseAgentOutput("pi-jsonl", out)).toEqual({
      result: { summary: "Done.", session_id: "p-1", is_error: false },
      usage: {
        input_tokens: 1210,
        output_tokens: 10,
        cache_read_tokens: 400,
        cache_write_tokens: 0,
        cost_usd: 0.02,
      },
    });
    const failed = end({
      role: "assistant",
      content: [],
      stopReason: "error",
      errorMessage: "Connection error.",
    });
    expect(parseAgentOutput("pi-jsonl", failed).result).toMatchObject({
      summary: "Connection error.",
      is_error: true,
    });
  });
});

describe("GitHub Copilot CLI's output", () => {
  const events = (...lines: object[]): string => lines.map((l) => JSON.stringify(l)).join("\n");
  it("the last assistant message with content, the result's session; its tokens from its usage file, per model", () => {
    const out = events(
      { type: "assistant.message", data: { content: "", toolRequests: [{ name: "create" }] } },
      { type: "assistant.message", data: { content: "Done: wrote C.txt" } },
      { type: "assistant.message", data: { content: "" } },
      { type: "result", sessionId: "s-9", exitCode: 0, usage: { premiumRequests: 0 } },
    );
    const usageFile = JSON.stringify({
      modelMetrics: {
        a: { usage: { inputTokens: 1210, outputTokens: 85, cacheReadTokens: 400, cacheWriteTokens: 0 } },
        b: { usage: { inputTokens: 10, outputTokens: 5, cacheReadTokens: 0, cacheWriteTokens: 0 } },
      },
    });
    expect(parseAgentOutput("copilot-jsonl", out, { usageFile })).toEqual({
      result: { summary: "Done: wrote C.txt", session_id: "s-9", is_error: false },
      usage: {
        input_tokens: 1220,
        output_tokens: 90,
        cache_read_tokens: 400,
        cache_write_tokens: 0,
        cost_usd: null,
      },
    });
    // No usage file (an attempt killed before copilot wrote it): the result alone.
    expect(parseAgentOutput("copilot-jsonl", out).usage).toBeNull();
  });

  it("a session error is the summary; a non-zero exit in the result is an error", () => {
    const failed = events(
      { type: "session.error", data: { message: "400 the request was refused", statusCode: 400 } },
      { type: "result", sessionId: "s-1", exitCode: 1 },
    );
    expect(parseAgentOutput("copilot-jsonl", failed).result).toEqual({
      summary: "400 the request was refused",
      session_id: "s-1",
      is_error: true,
    });
    const exited = events({ type: "result", sessionId: "s-2", exitCode: 2 });
    expect(parseAgentOutput("copilot-jsonl", exited).result?.is_error).toBe(true);
  });
});

describe("Continue cn's output", () => {
  it("its answer object on stdout, its error object on stderr; no tokens", () => {
    expect(
      parseAgentOutput("cn-json", JSON.stringify({ response: "Done: wrote K.txt", status: "success" })),
    ).toEqual({ result: { summary: "Done: wrote K.txt", session_id: null, is_error: false }, usage: null });
    expect(
      parseAgentOutput("cn-json", "", {
        stderr: `some log\n${JSON.stringify({ status: "error", message: "400 refused" })}\n`,
      }).result,
    ).toEqual({ summary: "400 refused", session_id: null, is_error: true });
    expect(parseAgentOutput("cn-json", "plain text", { stderr: "Error: boom" })).toEqual({
      result: null,
      usage: null,
    });
  });
});

describe("the sessions interactive CLIs keep for their user (read after a task's attempt)", () => {
  const lines = (...l: object[]): string => l.map((x) => JSON.stringify(x)).join("\n");
  const usage = { input_tokens: 1210, output_tokens: 85, cache_read_tokens: 400 };

  it("gemini's chat: messages written again as they grow are counted once", () => {
    const answer = {
      id: "m2",
      type: "gemini",
      content: "Done",
      tokens: { input: 1200, output: 80, cached: 400 },
    };
    const text = lines(
      { sessionId: "g-1", kind: "main" },
      { id: "m1", type: "gemini", content: "", tokens: { input: 10, output: 5, cached: 0 } },
      { id: "m1", type: "gemini", content: "", tokens: { input: 10, output: 5, cached: 0 } },
      answer,
      answer,
    );
    expect(parseTranscript("gemini-chat", text)).toMatchObject({
      result: { summary: "Done", session_id: "g-1", is_error: false },
      usage,
    });
  });

  it("Qwen Code's chat: the model's records with Gemini's usageMetadata", () => {
    const text = lines(
      { uuid: "u0", sessionId: "q-1", type: "user", cwd: "/w", message: { parts: [{ text: "go" }] } },
      {
        uuid: "u1",
        sessionId: "q-1",
        type: "assistant",
        message: { parts: [{ functionCall: {} }] },
        usageMetadata: { promptTokenCount: 10, candidatesTokenCount: 5 },
      },
      {
        uuid: "u2",
        sessionId: "q-1",
        type: "assistant",
        message: { parts: [{ text: "Done" }] },
        usageMetadata: { promptTokenCount: 1200, candidatesTokenCount: 80, cachedContentTokenCount: 400 },
      },
    );
    expect(parseTranscript("qwen-chat", text)).toMatchObject({
      result: { summary: "Done", session_id: "q-1" },
      usage,
    });
  });

  it("pi's session file: its message entries, cached input added", () => {
    const text = lines(
      { type: "session", id: "p-1", cwd: "/w" },
      {
        type: "message",
        message: {
          role: "assistant",
          content: [{ type: "text", text: "Done" }],
          usage: { input: 810, output: 85, cacheRead: 400, cacheWrite: 0 },
        },
      },
    );
    expect(parseTranscript("pi-session", text)).toMatchObject({
      result: { summary: "Done", session_id: "p-1" },
      usage,
    });
  });

  it("copilot's session events: its start, each call's usage record, the last answer", () => {
    const text = lines(
      { type: "session.start", data: { sessionId: "c-1", context: { cwd: "/w" } } },
      {
        type: "session.usage_record",
        data: { usage: { inputTokens: 10, outputTokens: 5, cacheReadTokens: 0 } },
      },
      { type: "assistant.message", data: { content: "Done" } },
      {
        type: "session.usage_record",
        data: { usage: { inputTokens: 1200, outputTokens: 80, cacheReadTokens: 400 } },
      },
    );
    expect(parseTranscript("copilot-session", text)).toMatchObject({
      result: { summary: "Done", session_id: "c-1" },
      usage,
    });
  });

  it("cn's session document: the assistant's messages and their OpenAI usage", () => {
    const text = JSON.stringify({
      sessionId: "n-1",
      workspaceDirectory: "/w",
      history: [
        { message: { role: "user", content: "go" } },
        { message: { role: "assistant", content: "", usage: { prompt_tokens: 10, completion_tokens: 5 } } },
        {
          message: {
            role: "assistant",
            content: "Done",
            usage: {
              prompt_tokens: 1200,
              completion_tokens: 80,
              prompt_tokens_details: { cached_tokens: 400 },
            },
          },
        },
      ],
    });
    expect(parseTranscript("cn-session", text)).toMatchObject({
      result: { summary: "Done", session_id: "n-1" },
      usage,
    });
    expect(parseTranscript("cn-session", "not json")).toEqual({ result: null, usage: null });
  });
});
