import {
  closeSync,
  existsSync,
  fstatSync,
  mkdirSync,
  openSync,
  readSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { dirname, join } from "node:path";
import type { TranscriptFormat } from "../agent/results.js";
import { findCodexRollout, findSession } from "../agent/session-files.js";
import {
  type AgentEvent,
  parseStateEvents,
  type StateEventFormat,
  TURN_FAILED,
} from "../agent/state-events.js";
import type { StateSource } from "../contract/agent-state.js";
import type { KeyAnswer } from "../contract/keys.js";
import { finishFileOf } from "../fs/private-dir.js";
import type { RunningAttempt } from "../runner/task-runner.js";
import type { Ports } from "./ports.js";
import type { TaskRecorder } from "./recorder.js";
import type { RunPlan } from "./run-plan.js";
import type { AgentPlan, InteractivePlan, TaskPlan } from "./task-plan.js";
import type { TaskRun } from "./task-run.js";

/**
 * Interactive tasks (docs/guides/interactive.md): the agent owns the pane's terminal; termorch
 * pastes its prompt once the screen is ready, watches the screen for the agent waiting for input,
 * and ends the agent on `termorch finish` or when the task's `done_when` file appears.
 */

/** How long a drawn screen must stay unchanged before the prompt is pasted. */
export const SETTLE_MS = 500;
/** The longest wait for a ready screen; then the prompt is pasted all the same. */
export const READY_TIMEOUT_MS = 30_000;
/** Sampling period while some agent's screen is awaited for the paste, and otherwise. */
const FAST_TICK_MS = 200;
const TICK_MS = 1000;

/** What an observation of the screen changed about waiting for input. */
export type WaitingChange = { waiting: true; since: number } | { waiting: false } | null;

/**
 * Pure: from successive screens and their times, whether the agent waits for input. It waits once
 * the screen has not changed for `afterMs` and, when the agent has them, the `waiting` pattern
 * matches and the `busy` pattern does not; it stops waiting when the screen changes.
 */
export class WaitingDetector {
  private last: string | null = null;
  private changedAt = 0;
  private waiting = false;
  private readonly waitingRe: RegExp | null;
  private readonly busyRe: RegExp | null;

  constructor(private readonly o: { afterMs: number; waiting: string | null; busy: string | null }) {
    this.waitingRe = o.waiting === null ? null : new RegExp(o.waiting);
    this.busyRe = o.busy === null ? null : new RegExp(o.busy);
  }

  observe(screen: string, at: number): WaitingChange {
    if (screen !== this.last) {
      this.last = screen;
      this.changedAt = at;
      if (!this.waiting) return null;
      this.waiting = false;
      return { waiting: false };
    }
    if (this.waiting || at - this.changedAt < this.o.afterMs) return null;
    if (this.waitingRe && !this.waitingRe.test(screen)) return null;
    if (this.busyRe?.test(screen)) return null;
    this.waiting = true;
    return { waiting: true, since: this.changedAt };
  }
}

/**
 * Pure: whether a screen is ready for the prompt: the agent has drawn something and it has not
 * changed for `settleMs`.
 */
export class ReadyDetector {
  private last: string | null = null;
  private changedAt = 0;
  private readonly prompt: RegExp | null;

  /**
   * @param prompt the CLI's input prompt (a preset's `waiting` pattern): when known, a screen is
   * ready only once it shows, since many CLIs draw a banner first and load for seconds before
   * they read input (and turn bracketed paste on); a paste then would be typed line by line.
   */
  constructor(
    private readonly settleMs = SETTLE_MS,
    prompt: string | null = null,
  ) {
    this.prompt = prompt === null ? null : new RegExp(prompt);
  }

  observe(screen: string, at: number): boolean {
    if (screen !== this.last) {
      this.last = screen;
      this.changedAt = at;
      return false;
    }
    if (this.prompt !== null && !this.prompt.test(screen)) return false;
    return screen.trim() !== "" && at - this.changedAt >= this.settleMs;
  }
}

/** A watched interactive attempt. */
export interface InteractiveWatch {
  /** Why termorch ended the agent as done (`termorch finish`, done_when), or null. */
  readonly endedAsDone: string | null;
  /** Why termorch ended the agent as failed (its prompt was never taken), or null. */
  readonly failure: { reason: "prompt_not_delivered"; detail: string } | null;
  /** The transcript its CLI keeps of the session, when its events named one and it is there. */
  transcript(): { format: TranscriptFormat; path: string } | null;
  /** Stops sampling (the attempt ended, or the run lets go of it). */
  dispose(): void;
}

interface Subscriber {
  session: string;
  /** Wants the fast period (its prompt is not pasted yet). */
  fast: boolean;
  onScreen(screen: string | null, at: number): void;
}

/**
 * One sampler per run: each tick asks the runner for every interactive task's screen at once (one
 * tmux client), so sampling costs the same for one task or twenty.
 */
class Sampler {
  private readonly subs = new Set<Subscriber>();
  private timer: NodeJS.Timeout | null = null;
  private busy = false;

  constructor(private readonly ports: SamplerPorts) {}

  add(sub: Subscriber): () => void {
    this.subs.add(sub);
    this.schedule();
    return () => {
      this.subs.delete(sub);
      if (this.subs.size === 0 && this.timer) {
        clearTimeout(this.timer);
        this.timer = null;
      }
    };
  }

  private schedule(): void {
    if (this.timer || this.busy || this.subs.size === 0) return;
    const period = [...this.subs].some((s) => s.fast) ? FAST_TICK_MS : TICK_MS;
    this.timer = setTimeout(() => {
      this.timer = null;
      void this.tick();
    }, period);
    // The attempts' own watchers keep the process alive while they run.
    this.timer.unref?.();
  }

  private async tick(): Promise<void> {
    this.busy = true;
    const subs = [...this.subs];
    try {
      const screens = await this.ports.runner.capture([...new Set(subs.map((s) => s.session))]);
      const at = this.ports.now();
      for (const s of subs) if (this.subs.has(s)) s.onScreen(screens.get(s.session) ?? null, at);
    } catch (error) {
      this.ports.log.warn(
        { err: error instanceof Error ? error.message : String(error) },
        "screen sample failed",
      );
    } finally {
      this.busy = false;
      this.schedule();
    }
  }
}

type SamplerPorts = Pick<Ports, "runner" | "now" | "log">;

/** Keyed by the runner: one tmux client samples every screen of the run's server. */
const samplers = new WeakMap<SamplerPorts["runner"], Sampler>();

function samplerOf(ports: SamplerPorts): Sampler {
  let s = samplers.get(ports.runner);
  if (!s) {
    s = new Sampler(ports);
    samplers.set(ports.runner, s);
  }
  return s;
}

/**
 * Whether the `done_when` file appeared during the attempt: a file (not a folder) written since
 * it launched. One the worktree already held (a tracked file, `.`) would end it before any work.
 */
function doneWhenAppeared(path: string, since: number): boolean {
  const st = statSync(path, { throwIfNoEntry: false });
  return st?.isFile() === true && st.mtimeMs >= since;
}

/**
 * How long a screen whose input box still holds the folded paste (InteractivePlan.pasteHeld)
 * must stay unchanged before Enter is pressed again, and how many times at most.
 */
const RESUBMIT_AFTER_MS = 2000;
const MAX_RESUBMITS = 2;

/** The longest wait, after the prompt's Enter, for the agent to show it took the prompt. */
export const DELIVERY_TIMEOUT_MS = 60_000;

/**
 * The screen's last non-empty lines, for a message that quotes it (what the operator would have
 * seen); the redactor runs over it where it is written.
 */
export function screenQuote(screen: string, lines = 12): string {
  const kept = screen
    .split("\n")
    .map((l) => l.trimEnd())
    .filter((l) => l.trim() !== "");
  return kept.slice(-lines).join(" ⏎ ").slice(-1500);
}

/** Reads the state events a CLI appended to its events file since the last read. */
class EventsReader {
  private offset = 0;
  private partial = "";

  constructor(
    private readonly file: string,
    private readonly format: StateEventFormat,
  ) {}

  read(): AgentEvent[] {
    let fd: number;
    try {
      fd = openSync(this.file, "r");
    } catch {
      return [];
    }
    try {
      const size = fstatSync(fd).size;
      if (size <= this.offset) return [];
      const buf = Buffer.alloc(size - this.offset);
      readSync(fd, buf, 0, buf.length, this.offset);
      this.offset = size;
      const text = this.partial + buf.toString("utf8");
      const cut = text.lastIndexOf("\n");
      this.partial = cut < 0 ? text : text.slice(cut + 1);
      return cut < 0 ? [] : parseStateEvents(this.format, text.slice(0, cut));
    } finally {
      closeSync(fd);
    }
  }
}

/**
 * Watches one attempt of an interactive task until dispose(). Never answers for the user: the
 * prompt is pasted once (a marker in the attempt folder keeps an adopted attempt from getting it
 * twice) and only over the CLI's own input prompt; a question of the CLI's (trust, a notice, a
 * permission), or a screen a preset's patterns do not recognise, is reported as waiting for input,
 * saying what is asked. After the paste, the agent must show it took the prompt (a hook, its busy
 * screen, or its input prompt back on a changed screen), else the attempt fails quoting the screen.
 * Its state comes from its CLI's own events where it sends them, else from its screen.
 */
export function watchInteractive(
  run: Pick<RunPlan, "privateDir" | "killGraceMs">,
  ports: Pick<Ports, "runner" | "now" | "log" | "ledger">,
  recorder: TaskRecorder,
  t: Readonly<TaskRun>,
  p: Pick<TaskPlan, "prompt" | "workspace">,
  agent: Pick<AgentPlan, "name" | "env" | "sessions"> & { interactive: InteractivePlan },
  running: RunningAttempt,
): InteractiveWatch {
  const plan = agent.interactive;
  const pastedMarker = join(t.current.dir!, "pasted");
  const finishFile = finishFileOf(run.privateDir, t.id);
  const ready = new ReadyDetector(SETTLE_MS, plan.waiting);
  const waiting = new WaitingDetector({
    afterMs: plan.waitingAfterS * 1000,
    waiting: plan.waiting,
    busy: plan.busy,
  });
  const busyRe = plan.busy === null ? null : new RegExp(plan.busy);
  const heldRe = plan.pasteHeld === null ? null : new RegExp(plan.pasteHeld);
  const promptRe = plan.waiting === null ? null : new RegExp(plan.waiting);
  const dialogs = plan.dialogs.map((d) => ({ re: new RegExp(d.screen), asks: d.asks, answers: d.answers }));
  const events = plan.events ? new EventsReader(plan.events.file, plan.events.format) : null;
  // A fresh attempt reads only its own events (an adopted one reads them all again: harmless).
  if (plan.events) {
    mkdirSync(dirname(plan.events.file), { recursive: true, mode: 0o700 });
    if (!existsSync(pastedMarker)) rmSync(plan.events.file, { force: true });
  }
  const startedAt = ports.now();
  let phase: "before" | "delivering" | "delivered" = existsSync(pastedMarker) ? "delivered" : "before";
  let pasting = false;
  let enterAt = 0;
  let screenAtEnter = "";
  let resubmits = 0;
  let endedAsDone: string | null = null;
  let failure: InteractiveWatch["failure"] = null;
  /** What the task is marked waiting for now (null: not waiting), whether hooks said so, and the keys that answer it. */
  let asked: { asks: string; by: StateSource; since: number; answers: readonly KeyAnswer[] } | null = null;
  /** What the CLI's events said of a turn that ended on an error, until its next prompt. */
  let failedTurn: string | null = null;
  /** Whether the CLI's last event was a question of its (not a prompt taken or a turn's end). */
  let hookQuestion = false;
  /** Whether the screen has shown something other than busy since its events last said it waits. */
  let quietSinceAsked = false;
  let lastScreen: string | null = null;
  /** The session's transcript, as the CLI's events named it (codex's by its thread's id). */
  let transcript: { format: TranscriptFormat; path: string } | null = null;
  let codexThread: string | null = null;
  let changedAt = startedAt;
  // Events go out in order, one at a time.
  let chain: Promise<void> = Promise.resolve();
  const queue = (f: () => Promise<void>): void => {
    chain = chain.then(f).catch((error: unknown) => {
      ports.log.warn(
        { task: t.id, err: error instanceof Error ? error.message : String(error) },
        "interactive watch",
      );
    });
  };

  const decided = (by: StateSource): void => {
    if (t.waiting.stateFrom === "hooks" || t.waiting.stateFrom === by) return;
    recorder.stateFrom(t.id, by);
  };
  const ask = (asks: string, by: StateSource, since: number, answers: readonly KeyAnswer[] = []): void => {
    if (asked?.asks === asks && JSON.stringify(asked.answers) === JSON.stringify(answers)) return;
    if (by === "hooks" && asked?.asks !== asks) quietSinceAsked = false;
    asked = { asks, by, since, answers };
    decided(by);
    queue(() => recorder.markWaiting(t.id, since, asks, by, answers));
  };
  const unask = (): void => {
    if (asked === null) return;
    asked = null;
    queue(() => recorder.markWaiting(t.id, null));
  };

  const end = (why: string): void => {
    if (endedAsDone !== null || failure !== null) return;
    endedAsDone = why;
    rmSync(finishFile, { force: true });
    queue(async () => {
      await ports.ledger.append("task.finish_requested", { attempt: t.attempts, by: why }, t.id);
    });
    void running.stop(run.killGraceMs);
  };

  const undelivered = (screen: string): void => {
    if (endedAsDone !== null || failure !== null) return;
    failure = {
      reason: "prompt_not_delivered",
      detail: `its prompt was pasted into ${agent.name}'s input prompt and the agent did not take it within ${DELIVERY_TIMEOUT_MS / 1000} s (no hook, no busy screen); its screen: ${screenQuote(screen)}`,
    };
    void running.stop(run.killGraceMs);
  };

  const delivered = (by: StateSource): void => {
    phase = "delivered";
    decided(by);
    queue(async () => {
      await ports.ledger.append("task.prompt_delivered", { attempt: t.attempts, by }, t.id);
    });
  };

  const paste = (screen: string, readyScreen: boolean): void => {
    pasting = true;
    sub.fast = false;
    unask();
    queue(async () => {
      try {
        await ports.runner.paste(running.session, p.prompt.file);
      } catch (error) {
        // The session went (the agent exited first): its exit says the rest.
        ports.log.warn(
          { task: t.id, err: error instanceof Error ? error.message : String(error) },
          "could not paste the prompt",
        );
        phase = "delivered";
        return;
      }
      phase = "delivering";
      enterAt = ports.now();
      screenAtEnter = screen;
      await ports.ledger.append(
        "task.prompt_pasted",
        { attempt: t.attempts, screen_ready: readyScreen },
        t.id,
      );
      try {
        writeFileSync(pastedMarker, "", { mode: 0o600 });
      } catch {
        // A runner without an attempt folder of this name (the middle tier's): a resume would paste again.
      }
    });
  };

  /** termorch's paste is still in the input box, unsent: Enter again, which finishes it (never an answer of the user's). */
  const resubmit = (screen: string): void => {
    resubmits += 1;
    enterAt = ports.now();
    screenAtEnter = screen;
    const n = resubmits;
    queue(async () => {
      await ports.runner.submit(running.session);
      await ports.ledger.append("task.prompt_resubmitted", { attempt: t.attempts, n }, t.id);
    });
  };

  /** What shows that the agent took its prompt: a hook, its busy screen or a question of its, or its input prompt back on a changed screen; null: nothing yet. */
  const deliveredBy = (
    news: AgentEvent[],
    screen: string,
    asking: boolean,
    at: number,
  ): StateSource | null => {
    // A question of its events too: its events of this sample are not read again.
    if (news.some((e) => e.kind === "prompt" || e.kind === "turn_done" || e.kind === "waiting"))
      return "hooks";
    if (busyRe?.test(screen) || asking) return "screen";
    // An agent of the user's own, with no patterns: all its screen can say is that it moved on.
    if (promptRe === null && busyRe === null && screen !== screenAtEnter) return "screen";
    // A turn quicker than a sample shows only as the prompt back on a new screen.
    if (promptRe?.test(screen) && screen !== screenAtEnter && at - changedAt >= SETTLE_MS) return "screen";
    return null;
  };

  const onScreen = (screen: string, at: number) => {
    if (screen !== lastScreen) {
      lastScreen = screen;
      changedAt = at;
    }
    const news = events?.read() ?? [];
    for (const e of news)
      if (e.kind === "transcript") transcript = { format: "claude-transcript", path: e.path };
      else if (e.kind === "thread") codexThread = e.id;
    const dialog = dialogs.find((d) => d.re.test(screen)) ?? null;
    if (phase === "before") {
      if (pasting) return;
      if (dialog) return ask(dialog.asks, "screen", changedAt, dialog.answers);
      // An agent of the user's own (no known input prompt): a ready screen, or the prompt anyway after 30 s.
      if (promptRe === null) {
        if (ready.observe(screen, at)) paste(screen, true);
        else if (at - startedAt >= READY_TIMEOUT_MS) paste(screen, false);
        return;
      }
      if (ready.observe(screen, at) && !busyRe?.test(screen)) return paste(screen, true);
      // Still blank: the CLI is starting, it asks nothing yet.
      if (screen.trim() !== "" && at - changedAt >= plan.waitingAfterS * 1000 && !promptRe.test(screen))
        return ask(
          `a screen termorch does not recognise as ${agent.name}'s input prompt (nothing was typed): ${screenQuote(screen, 4)}`,
          "screen",
          changedAt,
        );
      if (asked && screen !== "" && at === changedAt) unask();
      return;
    }
    if (phase === "delivering") {
      const by = deliveredBy(news, screen, dialog !== null, at);
      if (by === null) {
        const held =
          heldRe?.test(screen) &&
          resubmits < MAX_RESUBMITS &&
          Math.min(at - changedAt, at - enterAt) >= RESUBMIT_AFTER_MS;
        if (held) resubmit(screen);
        else if (at - enterAt >= DELIVERY_TIMEOUT_MS) undelivered(screen);
        return;
      }
      delivered(by);
    }
    for (const e of news) {
      if (e.kind === "prompt" || e.kind === "waiting" || e.kind === "turn_done")
        hookQuestion = e.kind === "waiting";
      if (e.kind === "prompt") {
        failedTurn = null;
        unask();
      } else if (e.kind === "waiting") {
        if (e.asks.startsWith(TURN_FAILED)) failedTurn = e.asks;
        // The question on screen is the one its hook names: its keys answer it.
        ask(e.asks, "hooks", at, dialog?.answers ?? []);
      } else if (e.kind === "turn_done")
        // A failed turn's end (opencode reports it idle after its error) keeps the failure's words.
        ask(
          failedTurn ??
            `its turn is done: it waits for its next message (termorch send ${t.id} TEXT) or termorch finish ${t.id}`,
          "hooks",
          at,
        );
    }
    // The question the CLI's events name says more than the dialog's pattern; the dialog's keys
    // answer it (its screen may come a moment after the hook).
    if (dialog) {
      if (!(asked?.by === "hooks" && hookQuestion))
        return ask(dialog.asks, "screen", changedAt, dialog.answers);
      ask(asked.asks, "hooks", asked.since, dialog.answers);
      quietSinceAsked = true;
      return;
    }
    // Hooks say when it waits; a busy screen says it works again (an answer typed in the pane),
    // once the screen showed something else since: a sample taken with the question's event may
    // still show the busy screen from before it (Kilo Code's footer, its permission prompt not
    // drawn yet).
    if (asked?.by === "hooks") {
      if (!busyRe?.test(screen)) quietSinceAsked = true;
      else if (quietSinceAsked) unask();
      return;
    }
    // The screen, for a CLI without events and for what a CLI's events do not tell (codex's
    // notify is silent on a failed turn): its input prompt, still, and not busy.
    const change = waiting.observe(screen, at);
    if (change?.waiting) ask("input: its screen has not changed for a while", "screen", change.since);
    else if (change) unask();
  };

  const sub: Subscriber = {
    session: running.session,
    fast: phase === "before",
    onScreen(screen, at) {
      if (endedAsDone !== null || failure !== null || screen === null) return;
      if (existsSync(finishFile)) return end("finish");
      if (plan.doneWhen !== null && doneWhenAppeared(plan.doneWhen, t.current.startedAt ?? startedAt))
        return end("done_when");
      onScreen(screen, at);
    },
  };
  const remove = samplerOf(ports).add(sub);

  return {
    get endedAsDone() {
      return endedAsDone;
    },
    get failure() {
      return failure;
    },
    transcript() {
      if (transcript) return transcript;
      // What termorch's plugin recorded is the session's account.
      if (plan.events?.format === "opencode-plugin")
        return { format: "opencode-events", path: plan.events.file };
      if (codexThread !== null) return findCodexRollout(agent.env, codexThread);
      // The session the CLI keeps for its user, found by the worktree it ran in.
      return agent.sessions === null
        ? null
        : findSession(agent.sessions, {
            env: agent.env,
            cwd: p.workspace.cwd,
            since: t.current.startedAt ?? startedAt,
          });
    },
    dispose() {
      remove();
      recorder.stopWaiting(t.id);
    },
  };
}
