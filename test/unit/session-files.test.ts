import { mkdirSync, mkdtempSync, rmSync, utimesSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { findSession } from "../../src/agent/session-files.js";

const HOME = mkdtempSync(join(tmpdir(), "termorch-cli-sessions-"));
afterAll(() => rmSync(HOME, { recursive: true, force: true }));

function file(path: string, text: string, mtimeMs = Date.now()): string {
  const full = join(HOME, path);
  mkdirSync(join(full, ".."), { recursive: true });
  writeFileSync(full, text);
  utimesSync(full, mtimeMs / 1000, mtimeMs / 1000);
  return full;
}

describe("a task's session among those a CLI keeps for its user", () => {
  const since = Date.now() - 60_000;
  const old = since - 3_600_000;
  const env = { HOME };

  it("by the folder it ran in and the attempt's start, never another folder's or an older one", () => {
    file(
      ".pi/agent/sessions/--w-other--/a.jsonl",
      `${JSON.stringify({ type: "session", cwd: "/w/other" })}\n`,
    );
    file(
      ".pi/agent/sessions/--w-task--/old.jsonl",
      `${JSON.stringify({ type: "session", cwd: "/w/task" })}\n`,
      old,
    );
    const mine = file(
      ".pi/agent/sessions/--w-task--/new.jsonl",
      `${JSON.stringify({ type: "session", cwd: "/w/task" })}\n`,
    );
    expect(findSession("pi", { env, cwd: "/w/task", since })).toEqual({ format: "pi-session", path: mine });
    expect(findSession("pi", { env, cwd: "/w/none", since })).toBeNull();
    expect(findSession("pi", { env, cwd: "/w/task", since: Date.now() + 60_000 })).toBeNull();
  });

  it("each CLI's layout: gemini's project root, qwen's and copilot's first record, cn's document", () => {
    file(".gemini/tmp/t/.project_root", "/w/task\n");
    const gemini = file(".gemini/tmp/t/chats/session-1.jsonl", "{}\n");
    expect(findSession("gemini", { env, cwd: "/w/task", since })?.path).toBe(gemini);
    const qwen = file(".qwen/projects/-w-task/chats/q.jsonl", `${JSON.stringify({ cwd: "/w/task" })}\n`);
    expect(findSession("qwen", { env, cwd: "/w/task", since })?.path).toBe(qwen);
    const start = { type: "session.start", data: { context: { cwd: "/w/task" } } };
    const copilot = file("copilot-home/session-state/s/events.jsonl", `${JSON.stringify(start)}\n`);
    expect(
      findSession("copilot", {
        env: { ...env, COPILOT_HOME: join(HOME, "copilot-home") },
        cwd: "/w/task",
        since,
      })?.path,
    ).toBe(copilot);
    expect(findSession("copilot", { env, cwd: "/w/task", since })).toBeNull();
    const cn = file(
      ".continue/sessions/n.json",
      JSON.stringify({ workspaceDirectory: "/w/task", history: [] }),
    );
    file(".continue/sessions/sessions.json", "[]");
    expect(findSession("cn", { env, cwd: "/w/task", since })).toEqual({ format: "cn-session", path: cn });
    expect(findSession("cn", { env: {}, cwd: "/w/task", since })).toBeNull();
  });
});
