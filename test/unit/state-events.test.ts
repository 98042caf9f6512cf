import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { describe, expect, it } from "vitest";
import { OPENCODE_PLUGIN_SOURCE, PI_EXTENSION_SOURCE } from "../../src/agent/event-recorders.js";
import { parseTranscript } from "../../src/agent/results.js";
import { parseStateEvents } from "../../src/agent/state-events.js";

describe("an interactive CLI's state events", () => {
  it("Claude Code's hooks: prompt, permission, notification, turn end, a failed turn; each names its transcript", () => {
    const hook = (e: object): string =>
      JSON.stringify({ session_id: "s", transcript_path: "/h/.claude/projects/x/s.jsonl", ...e });
    const text = [
      hook({ hook_event_name: "UserPromptSubmit", prompt: "go" }),
      hook({ hook_event_name: "PermissionRequest", tool_name: "Bash" }),
      hook({ hook_event_name: "Notification", message: "Claude needs your permission" }),
      hook({ hook_event_name: "Stop" }),
      hook({ hook_event_name: "StopFailure", last_assistant_message: "API Error: 400 refused" }),
      "{ half a line",
    ].join("\n");
    const events = parseStateEvents("claude-hooks", text).filter((e) => e.kind !== "transcript");
    expect(events).toEqual([
      { kind: "prompt" },
      { kind: "waiting", asks: "Claude Code asks permission to use Bash" },
      { kind: "waiting", asks: "Claude needs your permission" },
      { kind: "turn_done" },
      { kind: "waiting", asks: "its turn failed: API Error: 400 refused" },
    ]);
    expect(parseStateEvents("claude-hooks", text)).toContainEqual({
      kind: "transcript",
      path: "/h/.claude/projects/x/s.jsonl",
    });
  });

  it("codex's notify: a turn's end with its thread; the title side turn is not the user's", () => {
    const text = [
      JSON.stringify({
        type: "agent-turn-complete",
        "thread-id": "th-1",
        "input-messages": ["Generate a concise, single-line task title for …"],
      }),
      JSON.stringify({ type: "agent-turn-complete", "thread-id": "th-2", "input-messages": ["do it"] }),
    ].join("\n");
    expect(parseStateEvents("codex-notify", text)).toEqual([
      { kind: "turn_done" },
      { kind: "thread", id: "th-2" },
    ]);
  });

  it("termorch's opencode plugin: the main session's status, questions, failure and end; sub-agents' sessions left out", async () => {
    type Plugin = { TermorchEvents: () => Promise<{ event: (e: { event: object }) => Promise<void> }> };
    const text = await recordedBy<Plugin>(OPENCODE_PLUGIN_SOURCE, async (mod) => {
      const hooks = await mod.TermorchEvents();
      const send = (type: string, properties: object) => hooks.event({ event: { type, properties } });
      const info = (id: string, extra: object = {}) => ({
        info: { id, role: "assistant", sessionID: "main", ...extra },
      });
      await send("session.created", { info: { id: "child", parentID: "main" } });
      await send("session.status", { sessionID: "main", status: { type: "busy" } });
      await send("session.status", { sessionID: "child", status: { type: "idle" } });
      await send("session.idle", { sessionID: "child" });
      await send("message.updated", info("m1"));
      await send("message.part.updated", {
        part: { type: "text", messageID: "m1", sessionID: "main", text: "" },
      });
      await send("permission.asked", {
        sessionID: "main",
        permission: "external_directory",
        patterns: ["/x/*"],
      });
      await send("message.part.updated", {
        part: { type: "text", messageID: "m1", sessionID: "main", text: "Done", time: { end: 2 } },
      });
      // The user's own message's text part is not the answer.
      await send("message.part.updated", {
        part: { type: "text", messageID: "u1", sessionID: "main", text: "do it", time: { end: 3 } },
      });
      const tokens = { input: 800, output: 80, cache: { read: 400, write: 0 } };
      await send("message.updated", info("m1", { time: { completed: 4 }, tokens, cost: 0.01 }));
      await send("message.updated", info("m1", { time: { completed: 4 }, tokens, cost: 0.01 }));
      await send("session.error", { sessionID: "main", error: { data: { message: "refused" } } });
      await send("session.idle", { sessionID: "main" });
    });
    expect(parseStateEvents("opencode-plugin", text)).toEqual([
      { kind: "prompt" },
      { kind: "waiting", asks: "opencode asks permission: external_directory (/x/*)" },
      { kind: "waiting", asks: "its turn failed: refused" },
      { kind: "turn_done" },
    ]);
    // Its records are the session's account: the message counted once, cached input in.
    expect(parseTranscript("opencode-events", text)).toEqual({
      result: { summary: "refused", session_id: "main", is_error: true },
      usage: {
        input_tokens: 1200,
        output_tokens: 80,
        cache_read_tokens: 400,
        cache_write_tokens: 0,
        cost_usd: 0.01,
      },
    });
  });

  it("termorch's pi extension: a prompt taken, a model error, the prompt's end", async () => {
    type Extension = {
      default: (pi: { on: (name: string, f: (e: object) => Promise<void>) => void }) => void;
    };
    const text = await recordedBy<Extension>(PI_EXTENSION_SOURCE, async (mod) => {
      const handlers = new Map<string, (e: object) => Promise<void>>();
      mod.default({ on: (name, f) => handlers.set(name, f) });
      await handlers.get("agent_start")!({});
      await handlers.get("message_end")!({ message: { role: "assistant", stopReason: "stop" } });
      await handlers.get("message_end")!({
        message: { role: "assistant", stopReason: "error", errorMessage: "400 refused" },
      });
      await handlers.get("agent_end")!({});
    });
    expect(parseStateEvents("pi-extension", text)).toEqual([
      { kind: "prompt" },
      { kind: "waiting", asks: "its turn failed: 400 refused" },
      { kind: "turn_done" },
    ]);
  });
});

/**
 * What a plugin of termorch's recorded: its source loaded as the CLI loads it, with
 * $TERMORCH_AGENT_EVENTS naming a file of this test's, driven by `drive`.
 */
async function recordedBy<M>(source: string, drive: (mod: M) => Promise<void>): Promise<string> {
  const dir = mkdtempSync(join(tmpdir(), "termorch-recorder-"));
  const events = join(dir, "events.jsonl");
  const module = join(dir, "recorder.mjs");
  writeFileSync(module, source);
  const saved = process.env.TERMORCH_AGENT_EVENTS;
  process.env.TERMORCH_AGENT_EVENTS = events;
  try {
    await drive((await import(pathToFileURL(module).href)) as M);
    return readFileSync(events, "utf8");
  } finally {
    if (saved === undefined) delete process.env.TERMORCH_AGENT_EVENTS;
    else process.env.TERMORCH_AGENT_EVENTS = saved;
    rmSync(dir, { recursive: true, force: true });
  }
}
