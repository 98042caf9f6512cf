import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { execa } from "execa";
import * as pty from "node-pty";
import { afterAll, describe, expect, it } from "vitest";
import { attachPlan } from "../../src/ops/attach.js";
import { editAssignments, logText, opsWorld, stateOf, waitForStatus } from "../fixtures/ops-helpers.js";
import { BIN, isAlive, ROOT, tmuxSessions, uniqueSocket, waitFor, writeAssignments } from "./harness.js";

const world = opsWorld(uniqueSocket("ops-attach"));
const terminals: pty.IPty[] = [];
afterAll(() => {
  for (const t of terminals) {
    try {
      t.kill();
    } catch {}
  }
  world.teardown();
});

/** The operator's terminal: `termorch attach` under a real pseudo-terminal, outside any tmux. */
function operatorTerminal(args: string[]): { term: pty.IPty; output: () => string; exited: Promise<number> } {
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) if (v !== undefined && k !== "TMUX") env[k] = v;
  Object.assign(env, world.env, { TERM: "xterm-256color", LANG: "C.UTF-8" });
  delete env.TMUX;
  const term = pty.spawn(process.execPath, [BIN, ...args], {
    name: "xterm-256color",
    cols: 120,
    rows: 30,
    cwd: ROOT,
    env,
  });
  terminals.push(term);
  let out = "";
  term.onData((d) => {
    out += d;
  });
  const exited = new Promise<number>((resolve) => term.onExit((e) => resolve(e.exitCode)));
  return { term, output: () => out, exited };
}

function withTimeout<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  return Promise.race([
    p,
    new Promise<T>((_, reject) =>
      setTimeout(() => reject(new Error(`timed out after ${ms} ms: ${what}`)), ms),
    ),
  ]);
}

/** A run whose one task is an interactive (tty) agent answering each line it reads with got:<line>. */
async function startTalkRun() {
  const { dir } = world.workspace();
  const config = join(dir, "config.json");
  writeFileSync(
    config,
    JSON.stringify({
      agents: {
        talk: {
          // The padding line after each answer: the tty log filter holds back the last ~45
          // bytes of pane output (they could start its end marker), so a line reaches the log
          // only once more output follows it.
          command: [
            "bash",
            "-c",
            "pad() { printf '%64s\\n' ''; }; echo ready-marker; pad; while read l; do echo got:$l; pad; done",
          ],
          tty: true,
        },
      },
    }),
  );
  const file = writeAssignments(dir, [{ id: "talk" }]);
  const runId = editAssignments(file, (a) => {
    delete a.tasks[0]!.command;
    a.tasks[0]!.agent = "talk";
  });
  const run = world.start(["run", file, "--config", config]);
  await waitForStatus(dir, "talk", "running");
  await waitFor(() => logText(dir, "talk").includes("ready-marker"), 20_000, "the agent's marker in its log");
  const session = stateOf(dir)!.tasks[0]!.current.session!;
  // Keys that arrive together are a paste to tmux, and a paste never triggers key bindings
  // (assume-paste-time, 1 ms): the test types faster than a person, so it is turned off on
  // this file's own server, letting C-b d detach even right after other keys.
  await execa("tmux", ["-L", world.socket, "set-option", "-g", "assume-paste-time", "0"], {
    env: { TMUX: "" },
  });

  return { dir, runId, run, session };
}

describe("termorch attach", () => {
  it("puts the operator's terminal on a live tty agent; --read-only keys never reach it; the run goes on", async () => {
    const { dir, runId, run, session } = await startTalkRun();

    // Attached: the operator sees the live pane and types into the agent.
    const rw = operatorTerminal(["attach", "talk", "--run", runId]);
    await waitFor(() => rw.output().includes("ready-marker"), 20_000, "the pane on the operator's terminal");
    rw.term.write("hello1\r");
    await waitFor(() => rw.output().includes("got:hello1"), 20_000, "the agent's answer on the terminal");
    await waitFor(() => logText(dir, "talk").includes("got:hello1"), 20_000, "the agent's answer in its log");
    // Detach with the tmux key sequence (prefix C-b, then d).
    rw.term.write("\x02d");
    expect(await withTimeout(rw.exited, 20_000, "attach to exit on detach")).toBe(0);
    expect(rw.output()).toContain("detached");
    expect(isAlive(run.pid!)).toBe(true);
    expect(tmuxSessions(world.socket)).toContain(session);

    // Read-only: the screen shows the agent, but what is typed is dropped. The keys and the
    // detach travel in one client stream, so once detached tmux has already handled them.
    const ro = operatorTerminal(["attach", "talk", "--run", runId, "--read-only"]);
    await waitFor(() => ro.output().includes("got:hello1"), 20_000, "the pane on the read-only terminal");
    ro.term.write("secret2\r\x02d");
    expect(await withTimeout(ro.exited, 20_000, "read-only attach to exit on detach")).toBe(0);
    // A later line the agent does get: anything typed before it would be in the log before it.
    await execa("tmux", ["-L", world.socket, "send-keys", "-t", `=${session}:`, "marker3", "Enter"], {
      env: { TMUX: "" },
    });
    await waitFor(() => logText(dir, "talk").includes("got:marker3"), 20_000, "the later marker in the log");
    expect(logText(dir, "talk")).not.toContain("secret2");

    // The run was not disturbed: end the agent (EOF) and the run finishes normally.
    expect(isAlive(run.pid!)).toBe(true);
    await execa("tmux", ["-L", world.socket, "send-keys", "-t", `=${session}:`, "C-d"], {
      env: { TMUX: "" },
    });
    const result = await run;
    expect(result.exitCode).toBe(0);
  });

  it("inside termorch's own tmux, switches the operator's client (read-only as asked) instead of nesting", async () => {
    const { dir, runId, run, session } = await startTalkRun();
    const tmux = (...args: string[]) =>
      execa("tmux", ["-L", world.socket, ...args], { env: { TMUX: "" } }).then((r) => r.stdout);
    // The operator's own session on termorch's server, with a shell, and a client on it.
    await tmux("new-session", "-d", "-s", "operator", "-x", "120", "-y", "30", "bash --norc --noprofile");
    const env: Record<string, string> = {
      HOME: process.env.HOME ?? "/",
      TERM: "xterm-256color",
      LANG: "C.UTF-8",
      PATH: process.env.PATH ?? "",
    };
    const term = pty.spawn("tmux", ["-L", world.socket, "attach-session", "-t", "=operator"], {
      name: "xterm-256color",
      cols: 120,
      rows: 30,
      cwd: ROOT,
      env,
    });
    terminals.push(term);
    let out = "";
    term.onData((d) => {
      out += d;
    });
    const exited = new Promise<number>((resolve) => term.onExit((e) => resolve(e.exitCode)));
    await waitFor(
      async () => (await tmux("list-clients", "-F", "#{client_session}")).includes("operator"),
      20_000,
      "the operator's client",
      50,
    );
    // Typed into the shell inside tmux, where $TMUX names termorch's server.
    term.write(
      `TERMORCH_REGISTRY=${world.registry} ${process.execPath} ${BIN} attach talk --run ${runId} --read-only\r`,
    );
    await waitFor(() => out.includes("ready-marker"), 20_000, "the switched client to show the agent");
    const clients = async () =>
      (await tmux("list-clients", "-F", "#{client_session} #{client_readonly}")).split("\n");
    await waitFor(
      async () => (await clients()).includes(`${session} 1`),
      20_000,
      "the client on the task, read-only",
      50,
    );
    // The same client, switched: none is left on the operator's session, none nested in a pane.
    const ours = (await clients()).filter((c) => c.startsWith("operator ") || c.startsWith(`${session} `));
    expect(ours).toEqual([`${session} 1`]);
    term.write("secret3\r\x02d");
    expect(await withTimeout(exited, 20_000, "the client to detach")).toBe(0);
    await tmux("send-keys", "-t", `=${session}:`, "marker4", "Enter");
    await waitFor(() => logText(dir, "talk").includes("got:marker4"), 20_000, "the later marker in the log");
    expect(logText(dir, "talk")).not.toContain("secret3");
    await tmux("kill-session", "-t", "=operator");
    await tmux("send-keys", "-t", `=${session}:`, "C-d");
    expect((await run).exitCode).toBe(0);
  });

  it("says which runs it looked at when no run has the task live (exit 2)", async () => {
    const r = await world.cli(["attach", "nobody"]);
    expect(r.exitCode).toBe(2);
    expect(r.stderr).toContain("no live session of task nobody in any registered run");
    expect(r.stderr).toMatch(/looked at|no runs registered/);
  });

  it("switches the client instead of nesting when already inside termorch's own tmux server", () => {
    const base = { socket: "s", socketPath: "/tmp/tmux-1/s", session: "termorch-r-A", readOnly: false };
    const inside = attachPlan({ ...base, env: { TMUX: "/tmp/tmux-1/s,123,0", TERM: "screen" } });
    expect(inside.mode).toBe("switch");
    expect(inside.args).toEqual(["-S", "/tmp/tmux-1/s", "switch-client", "-E", "-t", "=termorch-r-A"]);
    const other = attachPlan({
      ...base,
      readOnly: true,
      env: { TMUX: "/tmp/tmux-1/default,9,1", TERM: "screen" },
    });
    expect(other.mode).toBe("attach");
    expect(other.args).toEqual(["-S", "/tmp/tmux-1/s", "attach-session", "-E", "-r", "-t", "=termorch-r-A"]);
    // Nesting in the operator's own tmux needs TMUX unset, or tmux refuses.
    expect(other.env.TMUX).toBeUndefined();
    expect(other.env.TERM).toBe("screen");
  });
});
