/**
 * The plugins through which CLIs without hooks of their own report their state to termorch,
 * written by termorch into a configuration folder of the task's own (`{agent_config}`) before each
 * attempt and named to the CLI for that invocation only. Each appends to `$TERMORCH_AGENT_EVENTS`,
 * one JSON line each, only what termorch reads (src/agent/state-events.ts, src/agent/results.ts).
 */

/**
 * opencode (and Kilo Code, its fork) loads every file in `plugins/` of the folder its
 * OPENCODE_CONFIG_DIR (KILO_CONFIG_DIR) names, besides the user's own configuration. The plugin
 * records the main session's status, its questions, its end, and its assistant messages' final
 * text and tokens. Event names and fields are those of opencode 1.18.33 and Kilo Code 7.7.7
 * (docs/agents.md).
 */
export const OPENCODE_PLUGIN_FILE = "plugins/termorch-events.js";

export const OPENCODE_PLUGIN_SOURCE = `// Written by termorch for one task: records opencode's own events for it (see termorch's docs/agents.md).
import { appendFileSync } from "node:fs";

const file = process.env.TERMORCH_AGENT_EVENTS;
// Sub-agents run in child sessions: their status is not the task's.
const children = new Set();
const assistantMessages = new Set();

function record(event) {
  const p = event.properties ?? {};
  const info = p.info ?? {};
  if ((event.type === "session.created" || event.type === "session.updated") && info.parentID) {
    children.add(info.id);
    return null;
  }
  const session = p.sessionID ?? info.sessionID ?? p.part?.sessionID ?? null;
  if (session !== null && children.has(session)) return null;
  switch (event.type) {
    case "session.status":
      return { type: event.type, session, status: p.status?.type ?? null };
    case "session.idle":
      return { type: event.type, session };
    case "session.error":
      return { type: event.type, session, message: p.error?.data?.message ?? p.error?.name ?? null };
    case "permission.asked":
      return { type: event.type, session, permission: p.permission ?? null, patterns: p.patterns ?? [] };
    case "question.asked":
      return { type: event.type, session };
    case "message.updated":
      if (info.role !== "assistant") return null;
      assistantMessages.add(info.id);
      if (!info.time?.completed) return null;
      return {
        type: "message.completed",
        session,
        id: info.id,
        tokens: info.tokens ?? null,
        cost: info.cost ?? null,
        error: info.error?.data?.message ?? info.error?.name ?? null,
      };
    case "message.part.updated": {
      const part = p.part ?? {};
      if (part.type !== "text" || !part.time?.end || !assistantMessages.has(part.messageID)) return null;
      return { type: "text", session, text: part.text ?? "" };
    }
    default:
      return null;
  }
}

export const TermorchEvents = async () => ({
  event: async ({ event }) => {
    const line = file ? record(event) : null;
    if (line) appendFileSync(file, JSON.stringify(line) + "\\n");
  },
});
`;

/**
 * pi loads an extension file named by `-e`: this one records when it takes a prompt
 * (`agent_start`), when the prompt's work ends (`agent_end`), and a model error (an assistant
 * message ending with `stopReason: "error"`). Events of pi 0.73.1 (its docs/extensions.md).
 */
export const PI_EXTENSION_FILE = "termorch-events.mjs";

export const PI_EXTENSION_SOURCE = `// Written by termorch for one task: records pi's own events for it (see termorch's docs/agents.md).
import { appendFileSync } from "node:fs";

const file = process.env.TERMORCH_AGENT_EVENTS;
const record = (line) => {
  if (file) appendFileSync(file, JSON.stringify(line) + "\\n");
};

export default function (pi) {
  pi.on("agent_start", async () => record({ type: "agent_start" }));
  pi.on("agent_end", async () => record({ type: "agent_end" }));
  pi.on("message_end", async (event) => {
    const m = event.message ?? {};
    if (m.role === "assistant" && m.stopReason === "error")
      record({ type: "error", message: m.errorMessage ?? null });
  });
}
`;
