// The pure halves of interactive tasks (src/run/interactive.ts): when a screen is ready for the
// prompt, and when an agent waits for input, from successive screens and their times.
import { describe, expect, it } from "vitest";
import { PRESETS } from "../../src/agent/presets.js";
import { ReadyDetector, WaitingDetector } from "../../src/task/interactive.js";

describe("ReadyDetector", () => {
  it("is ready once something is drawn and unchanged for the settle time", () => {
    const d = new ReadyDetector(500);
    expect(d.observe("", 0)).toBe(false);
    expect(d.observe("", 1000)).toBe(false); // nothing drawn yet
    expect(d.observe("loading", 1100)).toBe(false);
    expect(d.observe("loading...", 1300)).toBe(false); // still drawing
    expect(d.observe("loading...", 1700)).toBe(false);
    expect(d.observe("loading...", 1800)).toBe(true);
  });

  it("with a CLI's prompt pattern, waits for the prompt: a banner that stays still while it loads is not ready", () => {
    const d = new ReadyDetector(500, PRESETS.aider.interactive.waiting);
    expect(d.observe("Aider v0.86\nScanning repo...", 0)).toBe(false);
    expect(d.observe("Aider v0.86\nScanning repo...", 2000)).toBe(false);
    expect(d.observe("Aider v0.86\nScanning repo...\n> ", 2500)).toBe(false);
    expect(d.observe("Aider v0.86\nScanning repo...\n> ", 3000)).toBe(true);
  });
});

describe("WaitingDetector", () => {
  it("waits after an unchanged screen for afterMs, since it went still; a change ends the wait", () => {
    const d = new WaitingDetector({ afterMs: 3000, waiting: null, busy: null });
    expect(d.observe("working 1", 0)).toBeNull();
    expect(d.observe("working 2", 1000)).toBeNull();
    expect(d.observe("question?", 2000)).toBeNull();
    expect(d.observe("question?", 4000)).toBeNull();
    expect(d.observe("question?", 5000)).toEqual({ waiting: true, since: 2000 });
    // Said once.
    expect(d.observe("question?", 9000)).toBeNull();
    expect(d.observe("question? yes", 9500)).toEqual({ waiting: false });
    expect(d.observe("question? yes", 10_000)).toBeNull();
    expect(d.observe("question? yes", 12_500)).toEqual({ waiting: true, since: 9500 });
  });

  it("with a preset's patterns: only when its prompt shows and its busy text does not", () => {
    const aider = PRESETS.aider.interactive;
    const d = new WaitingDetector({ afterMs: 1000, waiting: aider.waiting, busy: aider.busy });
    d.observe("Tokens: 1k sent\nthinking", 0);
    expect(d.observe("Tokens: 1k sent\nthinking", 5000)).toBeNull(); // still, but no prompt
    d.observe("Tokens: 1k sent\ndiff> ", 6000);
    expect(d.observe("Tokens: 1k sent\ndiff> ", 7000)).toEqual({ waiting: true, since: 6000 });

    const claude = PRESETS.claude.interactive;
    const c = new WaitingDetector({ afterMs: 1000, waiting: claude.waiting, busy: claude.busy });
    c.observe("✻ Thinking… (esc to interrupt)", 0);
    expect(c.observe("✻ Thinking… (esc to interrupt)", 5000)).toBeNull(); // busy
    // Its empty input line: ❯ and a no-break space (2.1); a plain "> " is not its prompt.
    c.observe("> ", 6000);
    expect(c.observe("> ", 7000)).toBeNull();
    c.observe("● Done.\n❯\u00a0\n  ⏵⏵ accept edits on", 8000);
    expect(c.observe("● Done.\n❯\u00a0\n  ⏵⏵ accept edits on", 9000)).toEqual({ waiting: true, since: 8000 });
  });
});
