import { describe, expect, it } from "vitest";
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
});
