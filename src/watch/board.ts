import { isLive, type StatusView } from "../contract/status-view.js";
import { requestCancel } from "../ops/cancel.js";
import { driverAlive } from "../ops/liveness.js";
import { resolveRun } from "../ops/runs.js";
import { findTask, frame, moveSelection, type Screen, type TaskKey, type Tone } from "./model.js";
import type { ViewSource } from "./plain.js";

type Env = Readonly<Record<string, string | undefined>>;

/** What the dashboard leaves the screen for: the terminal goes to tmux or a pager, then comes back. */
export type Handoff =
  | { kind: "quit"; code: number }
  | { kind: "attach"; key: TaskKey }
  | { kind: "log"; key: TaskKey; path: string };

/** The keys the board understands, as Ink reports them. */
export interface KeyPress {
  input: string;
  upArrow?: boolean;
  downArrow?: boolean;
  pageUp?: boolean;
  pageDown?: boolean;
  return?: boolean;
  escape?: boolean;
  ctrl?: boolean;
}

export const KEY_HELP = [
  ["↑↓/jk", "move"],
  ["enter", "attach"],
  ["l", "log"],
  ["c", "cancel run"],
  ["q", "quit"],
] as const;
const CLOCK_MS = 1000;

/**
 * The dashboard's state, apart from the drawing: the latest view, the selected task, the scroll
 * position, a message or question for the operator. Keys come in, frames and hand-offs go out.
 * It outlives each Ink instance (one per stay on screen, between attaches and pagers).
 */
export class Board {
  private view: StatusView;
  private selected: TaskKey | null = null;
  private offset = 0;
  private message: { text: string; tone: Tone } | null = null;
  /** The run a `c` asks about, until y or anything else. */
  private confirming: { runId: string; runDir: string } | null = null;
  private readonly listeners = new Set<() => void>();
  private quitWith: ((code: number) => void) | null = null;
  private pendingQuit: number | null = null;
  private readonly stopFeed: () => void;
  private clock: NodeJS.Timeout | null = null;

  constructor(
    private readonly feed: ViewSource & { refresh(): void },
    private readonly o: { env: Env; cwd: string; scope: string; now?: () => number },
  ) {
    this.view = feed.current();
    this.selected = this.firstSelection();
    this.stopFeed = feed.subscribe((view) => {
      this.view = view;
      if (!findTask(view, this.selected)) this.selected = moveSelection(view, this.selected, 0);
      this.tickWhileRunning();
      this.changed();
    });
    this.tickWhileRunning();
  }

  /** The task a dashboard starts on: the first one running, else the first one. */
  private firstSelection(): TaskKey | null {
    for (const run of this.view.runs)
      for (const t of run.tasks) if (isLive(t.state)) return { run: run.run_id, task: t.id };
    return moveSelection(this.view, null, 0);
  }

  /** Elapsed times move while something runs: redraw each second then, and only then. */
  private tickWhileRunning(): void {
    const running = this.view.runs.some((r) => r.phase === "running");
    if (running && !this.clock) this.clock = setInterval(() => this.changed(), CLOCK_MS).unref();
    if (!running && this.clock) {
      clearInterval(this.clock);
      this.clock = null;
    }
  }

  close(): void {
    this.stopFeed();
    if (this.clock) clearInterval(this.clock);
    this.listeners.clear();
  }

  onChange(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  private changed(): void {
    for (const l of this.listeners) l();
  }

  /** The screen on stage registers how to leave it; a quit asked while off stage waits for it. */
  onQuit(quit: ((code: number) => void) | null): void {
    this.quitWith = quit;
    if (quit && this.pendingQuit !== null) quit(this.pendingQuit);
  }

  /** A signal (SIGTERM, SIGHUP...) ends the dashboard as `q` would, with `code`. */
  quit(code: number): void {
    this.pendingQuit ??= code;
    this.quitWith?.(code);
  }

  get quitRequested(): number | null {
    return this.pendingQuit;
  }

  say(text: string, tone: Tone = "accent"): void {
    this.message = { text, tone };
    this.changed();
  }

  render(width: number, height: number): Screen {
    const screen = frame({
      view: this.view,
      selected: this.selected,
      offset: this.offset,
      width,
      height,
      now: (this.o.now ?? Date.now)(),
      scope: this.o.scope,
      message: this.message,
      keys: KEY_HELP,
    });
    this.offset = screen.offset;
    return screen;
  }

  /** Handles a key; a hand-off means the screen must be left (and the board shown again after). */
  /**
   * Keys that arrive in one read (a held key, fast typing, a slow SSH link) come as one string:
   * each is taken in turn, until one hands the terminal over.
   */
  key(k: KeyPress, rows: number): Handoff | null {
    const chars = [...k.input];
    if (chars.length <= 1 || k.ctrl) return this.oneKey(k, rows);
    for (const ch of chars) {
      const handoff = this.oneKey({ input: ch === "\r" ? "" : ch, return: ch === "\r" }, rows);
      if (handoff) return handoff;
    }
    return null;
  }

  private oneKey(k: KeyPress, rows: number): Handoff | null {
    if (k.ctrl && k.input === "c") return { kind: "quit", code: 130 };
    if (this.confirming) {
      const run = this.confirming;
      this.confirming = null;
      if (k.input === "y" || k.input === "Y") void this.cancel(run);
      else this.say(`run ${run.runId} not cancelled`, "muted");
      return null;
    }
    this.message = null;
    const page = Math.max(1, rows - 5);
    if (k.input === "q") return { kind: "quit", code: 0 };
    if (k.upArrow || k.input === "k") this.move(-1);
    else if (k.downArrow || k.input === "j") this.move(1);
    else if (k.pageUp) this.move(-page);
    else if (k.pageDown) this.move(page);
    else if (k.input === "g") this.move(-Infinity);
    else if (k.input === "G") this.move(Infinity);
    else if (k.return) return this.attach();
    else if (k.input === "l") return this.log();
    else if (k.input === "c") this.askCancel();
    this.changed();
    return null;
  }

  private move(delta: number): void {
    const keys = this.view.runs.flatMap((r) => r.tasks).length;
    const step = Number.isFinite(delta) ? delta : Math.sign(delta) * keys;
    this.selected = moveSelection(this.view, this.selected, step);
  }

  private attach(): Handoff | null {
    const found = findTask(this.view, this.selected);
    if (!found) return null;
    const { run, task } = found;
    if (task.remote && isLive(task.state)) {
      this.say(`${task.id} runs on worker ${task.remote.worker}: ${task.remote.attach}`);
      return null;
    }
    // A running task's session may be newer than the view's last look at the sessions: tmux says.
    if (!task.session || !(task.session_exists || isLive(task.state))) {
      this.say(
        task.state === "pending"
          ? `${task.id} has not started: no tmux session yet`
          : `${task.id} has no tmux session any more (${task.state}); press l for its log`,
        "muted",
      );
      return null;
    }
    return { kind: "attach", key: { run: run.run_id, task: task.id } };
  }

  private log(): Handoff | null {
    const found = findTask(this.view, this.selected);
    if (!found) return null;
    const { run, task } = found;
    if (!task.logs) {
      this.say(
        task.state === "skipped" ? `${task.id} was skipped: it never ran` : `${task.id} has no log yet`,
        "muted",
      );
      return null;
    }
    return { kind: "log", key: { run: run.run_id, task: task.id }, path: task.logs.stdout };
  }

  private askCancel(): void {
    const found = findTask(this.view, this.selected);
    if (!found) return;
    const { run } = found;
    if (run.phase === "reported") {
      this.message = { text: `run ${run.run_id} already finished: nothing to cancel`, tone: "muted" };
      return;
    }
    const busy = run.tasks.filter((t) => isLive(t.state)).length;
    this.confirming = { runId: run.run_id, runDir: run.run_dir };
    this.message = {
      text: `cancel run ${run.run_id} (${busy} task${busy === 1 ? "" : "s"} running)? y/n`,
      tone: "failed",
    };
  }

  /** As `termorch cancel --no-wait`: the cancel file for the run's driver; the view shows the rest. */
  private async cancel(run: { runId: string; runDir: string }): Promise<void> {
    try {
      const found = await resolveRun(run.runDir, this.o.env, this.o.cwd);
      const state = found.state;
      if (!state || state.run_id !== run.runId) {
        this.say(`run ${run.runId}: ${found.problem ?? "its directory now holds another run"}`, "failed");
        return;
      }
      if (state.phase === "reported") {
        this.say(`run ${run.runId} already finished (exit ${state.exit_code ?? "unknown"})`, "muted");
        return;
      }
      const live = driverAlive(state.pid, state.updated_at);
      await requestCancel(state, { pid: process.pid, now: Date.now() });
      this.say(
        live
          ? `cancel requested for run ${run.runId}: its tasks are stopping, then its report is written`
          : `cancel recorded for run ${run.runId}, but its driver (pid ${state.pid}) is gone: termorch resume ${state.run_dir}`,
        live ? "accent" : "failed",
      );
      this.feed.refresh();
    } catch (error) {
      this.say(`cancel of run ${run.runId} failed: ${(error as Error).message}`, "failed");
    }
  }

  /** The task a hand-off is about, as the latest view has it. */
  task(key: TaskKey): ReturnType<typeof findTask> {
    return findTask(this.view, key);
  }
}
