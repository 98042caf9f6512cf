/**
 * An interactive CLI's own account of its state, from the events its hooks or notify program
 * appended to `$TERMORCH_AGENT_EVENTS` (one JSON document a line; docs/agents.md names each
 * CLI's events and where they were checked). Pure: text in, events out.
 */
export type StateEventFormat = "claude-hooks" | "codex-notify" | "opencode-plugin" | "pi-extension";

export type AgentEvent =
  /** The CLI took a message: the prompt was delivered. */
  | { kind: "prompt" }
  /** It stopped for its user: a permission, a question. */
  | { kind: "waiting"; asks: string }
  /** Its turn is over: it waits for the next message. */
  | { kind: "turn_done" }
  /** Where its session's transcript is (a file path), or the id that names it (codex's thread). */
  | { kind: "transcript"; path: string }
  | { kind: "thread"; id: string };

/** How a `waiting` event of a turn that ended on an error begins. */
export const TURN_FAILED = "its turn failed";

type Json = Record<string, unknown>;
const isObject = (v: unknown): v is Json => typeof v === "object" && v !== null && !Array.isArray(v);
const str = (v: unknown): string | null => (typeof v === "string" && v.trim() !== "" ? v.trim() : null);

/** The events in complete lines of `text` (a line still being written is left for the next read). */
export function parseStateEvents(format: StateEventFormat, text: string): AgentEvent[] {
  const out: AgentEvent[] = [];
  for (const line of text.split("\n")) {
    let value: unknown;
    try {
      value = JSON.parse(line);
    } catch {
      continue;
    }
    if (!isObject(value)) continue;
    const event = EVENT_OF[format](value);
    if (event) out.push(event);
    // Every Claude Code hook names its transcript; codex's notify names its thread.
    const transcript = str(value.transcript_path);
    if (transcript) out.push({ kind: "transcript", path: transcript });
    const thread = event && format === "codex-notify" ? str(value["thread-id"]) : null;
    if (thread) out.push({ kind: "thread", id: thread });
  }
  return out;
}

const EVENT_OF: Record<StateEventFormat, (e: Json) => AgentEvent | null> = {
  // Claude Code hooks (given with --settings): the hook's input on stdin.
  "claude-hooks": (e) => {
    switch (e.hook_event_name) {
      case "UserPromptSubmit":
        return { kind: "prompt" };
      case "Notification":
        return { kind: "waiting", asks: str(e.message) ?? "Claude Code needs your attention" };
      case "PermissionRequest":
        return {
          kind: "waiting",
          asks: `Claude Code asks permission to use ${str(e.tool_name) ?? "a tool"}`,
        };
      case "Stop":
        return { kind: "turn_done" };
      // A turn that ended on an API error (Stop does not fire then).
      case "StopFailure":
        return {
          kind: "waiting",
          asks: `${TURN_FAILED}: ${str(e.last_assistant_message) ?? str(e.error) ?? "an error"}`,
        };
      default:
        return null;
    }
  },
  // termorch's pi extension (src/agent/event-recorders.ts); pi asks no permission.
  "pi-extension": (e) => {
    switch (e.type) {
      case "agent_start":
        return { kind: "prompt" };
      case "error":
        return { kind: "waiting", asks: `${TURN_FAILED}: ${str(e.message) ?? "an error"}` };
      case "agent_end":
        return { kind: "turn_done" };
      default:
        return null;
    }
  },
  // termorch's opencode plugin (src/agent/event-recorders.ts): the main session's events.
  "opencode-plugin": (e) => {
    switch (e.type) {
      case "session.status":
        return e.status === "busy" ? { kind: "prompt" } : null;
      case "permission.asked": {
        const patterns = Array.isArray(e.patterns) ? e.patterns.filter((p) => typeof p === "string") : [];
        return {
          kind: "waiting",
          asks: `opencode asks permission: ${str(e.permission) ?? "a tool"}${patterns.length > 0 ? ` (${patterns.join(", ")})` : ""}`,
        };
      }
      case "question.asked":
        return { kind: "waiting", asks: "opencode asks a question" };
      case "session.error":
        return { kind: "waiting", asks: `${TURN_FAILED}: ${str(e.message) ?? "an error"}` };
      case "session.idle":
        return { kind: "turn_done" };
      default:
        return null;
    }
  },
  // codex's notify program: its one event, agent-turn-complete. The thread title it asks the model
  // for in a side turn also ends with one; its input is the title request, not the user's message.
  "codex-notify": (e) => {
    if (e.type !== "agent-turn-complete") return null;
    const inputs = Array.isArray(e["input-messages"]) ? e["input-messages"] : [];
    if (
      inputs.some((m) => typeof m === "string" && m.startsWith("Generate a concise, single-line task title"))
    )
      return null;
    return { kind: "turn_done" };
  },
};
