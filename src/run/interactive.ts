import { existsSync, rmSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { finishFileOf } from "../fs/private-dir.js";
import type { RunningAttempt } from "../runner/task-runner.js";
import type { RunContext } from "./context.js";
import type { InteractivePlan, TaskPlan } from "./task-plan.js";
import type { TaskRun } from "./task-run.js";
import { markWaiting } from "./transition.js";

/**
 * Interactive tasks (README: Interactive tasks): the agent owns the pane's terminal; termorch
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

  constructor(private readonly ctx: RunContext) {}

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
      const screens = await this.ctx.runner.capture([...new Set(subs.map((s) => s.session))]);
      const at = this.ctx.now();
      for (const s of subs) if (this.subs.has(s)) s.onScreen(screens.get(s.session) ?? null, at);
    } catch (error) {
      this.ctx.log.warn(
        { err: error instanceof Error ? error.message : String(error) },
        "screen sample failed",
      );
    } finally {
      this.busy = false;
      this.schedule();
    }
  }
}

const samplers = new WeakMap<RunContext, Sampler>();

function samplerOf(ctx: RunContext): Sampler {
  let s = samplers.get(ctx);
  if (!s) {
    s = new Sampler(ctx);
    samplers.set(ctx, s);
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
 * Watches one attempt of an interactive task until dispose(): pastes the prompt once (a marker in
 * the attempt folder keeps an adopted attempt from getting it twice), marks the task waiting for
 * input and not, and ends the agent as done on `termorch finish` or `done_when`.
 */
export function watchInteractive(
  ctx: RunContext,
  t: TaskRun,
  p: TaskPlan & { interactive: InteractivePlan },
  running: RunningAttempt,
): InteractiveWatch {
  const plan = p.interactive;
  const pastedMarker = join(t.attemptDir!, "pasted");
  const finishFile = finishFileOf(ctx.privateDir, t.id);
  const ready = new ReadyDetector(SETTLE_MS, plan.waiting);
  const waiting = new WaitingDetector({
    afterMs: plan.waitingAfterS * 1000,
    waiting: plan.waiting,
    busy: plan.busy,
  });
  const startedAt = ctx.now();
  let pasted = existsSync(pastedMarker);
  let pasting = false;
  let endedAsDone: string | null = null;
  // Events go out in order, one at a time.
  let chain: Promise<void> = Promise.resolve();
  const queue = (f: () => Promise<void>): void => {
    chain = chain.then(f).catch((error: unknown) => {
      ctx.log.warn(
        { task: t.id, err: error instanceof Error ? error.message : String(error) },
        "interactive watch",
      );
    });
  };

  const end = (why: string): void => {
    if (endedAsDone !== null) return;
    endedAsDone = why;
    rmSync(finishFile, { force: true });
    queue(async () => {
      await ctx.ledger.append("task.finish_requested", { attempt: t.attempts, by: why }, t.id);
    });
    void running.stop(ctx.killGraceMs);
  };

  const paste = (readyScreen: boolean): void => {
    pasting = true;
    sub.fast = false;
    queue(async () => {
      try {
        await ctx.runner.paste(running.session, p.prompt.file);
      } catch (error) {
        // The session went (the agent exited first): its exit says the rest.
        ctx.log.warn(
          { task: t.id, err: error instanceof Error ? error.message : String(error) },
          "could not paste the prompt",
        );
        pasted = true;
        return;
      }
      pasted = true;
      await ctx.ledger.append("task.prompt_pasted", { attempt: t.attempts, screen_ready: readyScreen }, t.id);
      try {
        writeFileSync(pastedMarker, "", { mode: 0o600 });
      } catch {
        // A runner without an attempt folder of this name (the middle tier's): a resume would paste again.
      }
    });
  };

  const sub: Subscriber = {
    session: running.session,
    fast: !pasted,
    onScreen(screen, at) {
      if (endedAsDone !== null || screen === null) return;
      if (existsSync(finishFile)) return end("finish");
      if (plan.doneWhen !== null && doneWhenAppeared(plan.doneWhen, t.attemptStartedAt ?? startedAt))
        return end("done_when");
      if (!pasted) {
        if (pasting) return;
        if (ready.observe(screen, at)) paste(true);
        else if (at - startedAt >= READY_TIMEOUT_MS) paste(false);
        return;
      }
      const change = waiting.observe(screen, at);
      if (change) queue(() => markWaiting(ctx, t, change.waiting ? change.since : null));
    },
  };
  const remove = samplerOf(ctx).add(sub);

  return {
    get endedAsDone() {
      return endedAsDone;
    },
    dispose() {
      remove();
      t.waitingSince = null;
    },
  };
}
