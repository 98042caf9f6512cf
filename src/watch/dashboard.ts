import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import type { Key } from "ink";
import type { ReactNode } from "react";
import { attachPlan, runAttach } from "../ops/attach.js";
import { serverFor } from "../ops/sessions.js";
import { Board, type Handoff } from "./board.js";
import type { Segment, Tone } from "./model.js";
import type { ViewSource } from "./plain.js";

type Env = Readonly<Record<string, string | undefined>>;
type Ink = typeof import("ink");
type ReactLib = typeof import("react");

export interface DashboardOptions {
  feed: ViewSource & { refresh(): void };
  env: Env;
  cwd: string;
  /** What the title bar names as the scope. */
  scope: string;
  /** false under NO_COLOR: no colour escapes at all. */
  color: boolean;
  stdin: NodeJS.ReadStream;
  stdout: NodeJS.WriteStream;
  stderr: NodeJS.WriteStream;
}

// The alternate screen: the dashboard draws on a screen of its own, and quitting puts back the
// shell's screen exactly as it was. The cursor is shown again on the way out.
const ENTER_SCREEN = "\x1b[?1049h\x1b[H\x1b[2J";
const LEAVE_SCREEN = "\x1b[?25h\x1b[?1049l";

const TONES: Record<Tone, string> = {
  running: "cyan",
  success: "green",
  failed: "red",
  skipped: "yellow",
  waiting: "magenta",
  pending: "gray",
  accent: "blue",
  muted: "gray",
};

/**
 * Ink and React are loaded here, on demand, so that no other command pays their start-up time
 * (scripts/bundle.js keeps them out of the bundle). Ink decides once, while it loads, whether it
 * runs under CI (the CI or CONTINUOUS_INTEGRATION variable) and then prints only a last frame at
 * exit; the dashboard only starts on a terminal, where that guess is wrong, so those variables
 * are hidden while Ink loads.
 */
async function loadUi(): Promise<{ ink: Ink; React: ReactLib }> {
  const hidden: Record<string, string | undefined> = {};
  for (const name of ["CI", "CONTINUOUS_INTEGRATION"]) {
    hidden[name] = process.env[name];
    delete process.env[name];
  }
  try {
    const [ink, React] = await Promise.all([import("ink"), import("react")]);
    return { ink, React: (React as { default?: ReactLib }).default ?? React };
  } finally {
    for (const [name, value] of Object.entries(hidden)) if (value !== undefined) process.env[name] = value;
  }
}

function screenApp(ink: Ink, React: ReactLib, board: Board, color: boolean) {
  const h = React.createElement;
  const style = (s: Segment) => {
    if (!color)
      return {
        bold: s.bold ?? false,
        inverse: (s.bar || s.selected) ?? false,
        // Grey text would be a colour: dim is an attribute, like bold.
        dimColor: s.tone === "muted" && !s.selected,
      };
    if (s.bar) return { bold: true, color: "whiteBright", backgroundColor: "blue" };
    // Grey on the selection's grey would not show: the default colour there.
    const tone = s.selected && s.tone === "muted" ? undefined : s.tone;
    return {
      bold: s.bold ?? false,
      ...(tone ? { color: TONES[tone] } : {}),
      ...(s.selected ? { backgroundColor: "blackBright" } : {}),
    };
  };
  return function Screen(): ReactNode {
    const { exit } = ink.useApp();
    const { stdout } = ink.useStdout();
    const [, redraw] = React.useState(0);
    React.useEffect(() => board.onChange(() => redraw((n) => n + 1)), []);
    React.useEffect(() => {
      const resized = (): void => redraw((n) => n + 1);
      stdout.on("resize", resized);
      return () => {
        stdout.off("resize", resized);
      };
    }, [stdout]);
    React.useEffect(() => {
      board.onQuit((code) => exit({ kind: "quit", code } satisfies Handoff));
      return () => board.onQuit(null);
    }, [exit]);
    ink.useInput((input: string, key: Key) => {
      const handoff = board.key({ ...key, input }, stdout.rows || 24);
      if (handoff) exit(handoff);
    });
    // One row less than the terminal: a frame as tall as the screen makes Ink clear the whole
    // terminal at every redraw, which flickers (over SSH most of all).
    const rows = Math.max(6, (stdout.rows || 24) - 1);
    const { lines } = board.render(stdout.columns || 80, rows);
    return h(
      ink.Box,
      { flexDirection: "column", width: stdout.columns || 80, height: rows },
      lines.map((line, i) =>
        h(
          ink.Text,
          { key: i, wrap: "truncate-end" },
          line.every((s) => s.text === "")
            ? " "
            : line.map((s, j) => h(ink.Text, { key: j, ...style(s) }, s.text)),
        ),
      ),
    );
  };
}

/**
 * The full-screen dashboard (`termorch watch` on a terminal): draws the board with Ink until `q`,
 * handing the terminal to tmux (enter) or a pager (l) and taking it back when they end.
 * Resolves with the exit code (0 after q, 130 after Ctrl-C or a signal).
 */
export async function runDashboard(o: DashboardOptions): Promise<number> {
  const { ink, React } = await loadUi();
  const board = new Board(o.feed, { env: o.env, cwd: o.cwd, scope: o.scope });
  const App = screenApp(ink, React, board, o.color);
  const signals: NodeJS.Signals[] = ["SIGINT", "SIGTERM", "SIGHUP"];
  const onSignal = (): void => board.quit(130);
  for (const s of signals) process.on(s, onSignal);
  o.stdout.write(ENTER_SCREEN);
  try {
    for (;;) {
      // Raw at once, not when Ink's input hook mounts a moment after the first frame: a key
      // typed in between would be echoed, and an Enter would arrive as a newline.
      if (o.stdin.isTTY) o.stdin.setRawMode(true);
      const instance = ink.render(React.createElement(App), {
        stdin: o.stdin,
        stdout: o.stdout,
        stderr: o.stderr,
        exitOnCtrlC: false,
        patchConsole: false,
      });
      const handoff = ((await instance.waitUntilExit()) as Handoff | undefined) ?? { kind: "quit", code: 0 };
      if (handoff.kind === "quit") return handoff.code;
      // Whatever the agent or pager reads from the terminal must not be read by us too.
      o.stdin.pause();
      o.stdout.write(LEAVE_SCREEN);
      try {
        await handOff(handoff, board, o);
      } finally {
        o.stdout.write(ENTER_SCREEN);
      }
      if (board.quitRequested !== null) return board.quitRequested;
    }
  } finally {
    for (const s of signals) process.off(s, onSignal);
    board.close();
    o.stdout.write(LEAVE_SCREEN);
  }
}

async function handOff(handoff: Exclude<Handoff, { kind: "quit" }>, board: Board, o: DashboardOptions) {
  const found = board.task(handoff.key);
  if (!found) {
    board.say(`task ${handoff.key.task} of run ${handoff.key.run} is no longer in view`, "muted");
    return;
  }
  const { run, task } = found;
  if (handoff.kind === "log") {
    if (!existsSync(handoff.path)) {
      board.say(`${task.id}: its log ${handoff.path} is not there (yet)`, "muted");
      return;
    }
    const [command = "less", ...args] = pagerArgv(o.env);
    const code = await inherit(command, [...args, handoff.path], o.env);
    if (code === null) board.say(`pager ${command} was not found (set PAGER)`, "failed");
    return;
  }
  if (!task.session) return;
  const socketPath = run.socket_path || (await serverFor(run.socket, o.env).socketPath());
  const plan = attachPlan({
    socket: run.socket,
    socketPath,
    session: task.session,
    readOnly: false,
    env: o.env,
  });
  try {
    const code = await runAttach(plan, false);
    board.say(
      plan.mode === "switch"
        ? `your tmux client is on ${task.session} now (task ${task.id}); switch back to this window to see the dashboard`
        : code === 0
          ? `detached from ${task.id} (${task.session})`
          : `tmux attach to ${task.session} ended with exit code ${code}`,
      code === 0 ? "muted" : "failed",
    );
  } catch (error) {
    board.say(`cannot attach to ${task.session}: ${(error as Error).message}`, "failed");
  }
}

/**
 * $PAGER as words (the operator's own setting, split on blanks rather than given to a shell),
 * or `less -R`, which keeps the colours an agent printed.
 */
function pagerArgv(env: Env): string[] {
  const words = (env.PAGER ?? "").trim().split(/\s+/).filter(Boolean);
  return words.length > 0 ? words : ["less", "-R"];
}

/** Runs a program on this terminal until it exits; null when it does not exist. */
function inherit(command: string, args: string[], env: Env): Promise<number | null> {
  return new Promise((resolve) => {
    const child = spawn(command, args, { stdio: "inherit", env: { ...env } as NodeJS.ProcessEnv });
    child.once("error", () => resolve(null));
    child.once("exit", (code) => resolve(code ?? 1));
  });
}
