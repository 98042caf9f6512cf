import { readdirSync, readFileSync, realpathSync, statSync } from "node:fs";
import { join } from "node:path";
import { readPartsSync } from "../fs/file-range.js";
import type { SessionStore } from "./presets.js";
import type { TranscriptFormat } from "./results.js";

/**
 * Where an agent CLI keeps the session a task's attempt ran, found among the sessions it keeps
 * for its user by the folder the session ran in (the task's worktree, unique to the task) and by
 * when it was last written (since the attempt started). Read only: termorch never writes there.
 * Layouts are those of the pinned versions (docs/agents.md).
 */
export interface SessionLookup {
  /** The agent's environment (HOME, and COPILOT_HOME where copilot's store is moved). */
  env: Readonly<Record<string, string | undefined>>;
  /** The folder the agent ran in. */
  cwd: string;
  /** Epoch ms: the attempt's start; older sessions are not its. */
  since: number;
}

const FORMAT: Record<SessionStore, TranscriptFormat> = {
  gemini: "gemini-chat",
  qwen: "qwen-chat",
  pi: "pi-session",
  copilot: "copilot-session",
  cn: "cn-session",
};

export function findSession(
  store: SessionStore,
  lookup: SessionLookup,
): { format: TranscriptFormat; path: string } | null {
  const home = lookup.env.HOME;
  if (!home) return null;
  const folders = new Set([lookup.cwd, realOrSame(lookup.cwd)]);
  const ranHere = (cwd: unknown): boolean => typeof cwd === "string" && folders.has(cwd);
  const newest = (files: string[], belongs: (path: string) => boolean): string | null =>
    files
      .map((path) => ({ path, mtime: statSync(path, { throwIfNoEntry: false })?.mtimeMs ?? 0 }))
      // A second's slack for file systems that keep coarse times.
      .filter((f) => f.mtime >= lookup.since - 1000)
      .sort((a, b) => b.mtime - a.mtime)
      .find((f) => belongs(f.path))?.path ?? null;
  let path: string | null = null;
  switch (store) {
    case "gemini": {
      // One folder per project, its root named in `.project_root`.
      const tmp = join(home, ".gemini", "tmp");
      const project = entries(tmp).find((d) => ranHere(readText(join(tmp, d, ".project_root"))?.trim()));
      if (project === undefined) return null;
      const chats = join(tmp, project, "chats");
      path = newest(
        entries(chats)
          .filter((f) => f.startsWith("session-") && f.endsWith(".jsonl"))
          .map((f) => join(chats, f)),
        () => true,
      );
      break;
    }
    case "qwen": {
      const projects = join(home, ".qwen", "projects");
      const files = entries(projects).flatMap((d) =>
        entries(join(projects, d, "chats"))
          .filter((f) => f.endsWith(".jsonl"))
          .map((f) => join(projects, d, "chats", f)),
      );
      path = newest(files, (f) => ranHere(firstRecord(f)?.cwd));
      break;
    }
    case "pi": {
      const sessions = join(home, ".pi", "agent", "sessions");
      const files = entries(sessions).flatMap((d) =>
        entries(join(sessions, d))
          .filter((f) => f.endsWith(".jsonl"))
          .map((f) => join(sessions, d, f)),
      );
      path = newest(files, (f) => ranHere(firstRecord(f)?.cwd));
      break;
    }
    case "copilot": {
      const state = join(lookup.env.COPILOT_HOME || join(home, ".copilot"), "session-state");
      const files = entries(state).map((d) => join(state, d, "events.jsonl"));
      path = newest(files, (f) => {
        const start = firstRecord(f);
        const data = isObject(start?.data) ? start.data : {};
        return ranHere(isObject(data.context) ? data.context.cwd : undefined);
      });
      break;
    }
    case "cn": {
      const sessions = join(home, ".continue", "sessions");
      const files = entries(sessions)
        .filter((f) => f.endsWith(".json") && f !== "sessions.json")
        .map((f) => join(sessions, f));
      path = newest(files, (f) => {
        try {
          const doc: unknown = JSON.parse(readText(f) ?? "");
          return isObject(doc) && ranHere(doc.workspaceDirectory);
        } catch {
          return false;
        }
      });
      break;
    }
  }
  return path === null ? null : { format: FORMAT[store], path };
}

type Json = Record<string, unknown>;
const isObject = (v: unknown): v is Json => typeof v === "object" && v !== null && !Array.isArray(v);

function entries(dir: string): string[] {
  try {
    return readdirSync(dir);
  } catch {
    return [];
  }
}

function readText(path: string): string | null {
  try {
    return readFileSync(path, "utf8");
  } catch {
    return null;
  }
}

function realOrSame(path: string): string {
  try {
    return realpathSync(path);
  } catch {
    return path;
  }
}

/** A JSONL file's first record (its first 64 KiB suffice: sessions open with a short header). */
function firstRecord(path: string): Json | null {
  const head = readPartsSync(path, [{ from: 0, bytes: 64 * 1024 }])?.parts[0];
  if (!head) return null;
  try {
    const value: unknown = JSON.parse(head.toString("utf8").split("\n")[0] ?? "");
    return isObject(value) ? value : null;
  } catch {
    return null;
  }
}

/** codex's rollout of thread `thread`, in its home (CODEX_HOME, else ~/.codex of the agent's environment). */
export function findCodexRollout(
  env: Readonly<Record<string, string | undefined>>,
  thread: string,
): { format: TranscriptFormat; path: string } | null {
  const home = env.CODEX_HOME ?? (env.HOME ? join(env.HOME, ".codex") : null);
  const path = home ? findRollout(join(home, "sessions"), thread) : null;
  return path ? { format: "codex-rollout", path } : null;
}

/**
 * codex's rollout of a thread: `<CODEX_HOME>/sessions/YYYY/MM/DD/rollout-<time>-<thread>.jsonl`,
 * newest days first (read only: it is the user's codex home).
 */
function findRollout(sessions: string, thread: string): string | null {
  const suffix = `-${thread}.jsonl`;
  const down = (dir: string, depth: number): string | null => {
    let names: string[];
    try {
      names = readdirSync(dir).sort().reverse();
    } catch {
      return null;
    }
    for (const name of names) {
      if (depth === 3) {
        if (name.startsWith("rollout-") && name.endsWith(suffix)) return join(dir, name);
        continue;
      }
      const found = down(join(dir, name), depth + 1);
      if (found) return found;
    }
    return null;
  };
  return down(sessions, 0);
}
