import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { lastLogLine, plainText } from "../../src/ops/last-line.js";

const dir = mkdtempSync(join(tmpdir(), "termorch-last-line-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("plainText", () => {
  it("turns cursor-forward escapes into the gap they leave (Claude Code's footer)", () => {
    // As Claude Code 2.1 draws its footer: words separated by ESC [ 1 C, not spaces.
    expect(plainText("\x1b[2m⏵⏵\x1b[1Caccept\x1b[1Cedits\x1b[1Con\x1b[22m")).toBe("⏵⏵ accept edits on");
    expect(plainText("a\x1b[Cb\x1b[3Cc")).toBe("a b   c");
  });

  it("drops colours, titles and other controls", () => {
    expect(plainText("\x1b[31mred\x1b[0m \x1b]0;title\x07done\x07")).toBe("red done");
  });

  it("caps an absurd gap", () => {
    expect(plainText("a\x1b[99999999Cb").length).toBeLessThan(1100);
  });
});

describe("lastLogLine", () => {
  it("keeps the spaces of a TUI's last line", async () => {
    const log = join(dir, "tty.out");
    writeFileSync(
      log,
      "first\r\n\x1b[2K\x1b[1G? for shortcuts\x1b[1C·\x1b[1Cesc\x1b[1Cto\x1b[1Cinterrupt\r\n",
    );
    expect(await lastLogLine(log)).toBe("? for shortcuts · esc to interrupt");
  });
});

describe("plainText, column moves", () => {
  it("places words drawn at columns (CHA) where the terminal shows them", () => {
    // Claude Code 2.1.197's permission footer, as its log holds it.
    const raw =
      "\x1b[2G\x1b[38;5;246mEsc\x1b[6Gto\x1b[9Gcancel\x1b[16G·\x1b[18GTab\x1b[22Gto\x1b[25Gamend\x1b[39m";
    expect(plainText(raw)).toBe(" Esc to cancel · Tab to amend");
  });
});

describe("lastLogLine of a log that grows", () => {
  it("shows a long last line from its start, as a whole, though only the log's end is read first", async () => {
    const path = join(dir, "long.log");
    const long = `START ${"x".repeat(10 * 1024)} END`;
    writeFileSync(path, `${"earlier line\n".repeat(8000)}${long}`);
    expect(await lastLogLine(path)).toBe(`START ${"x".repeat(191)}...`);
  });

  it("reads a log again once it changed, and gives the line it found while it did not", async () => {
    const path = join(dir, "growing.log");
    writeFileSync(path, "one\n");
    expect(await lastLogLine(path)).toBe("one");
    writeFileSync(path, "one\ntwo\n");
    expect(await lastLogLine(path)).toBe("two");
    expect(await lastLogLine(path)).toBe("two");
  });
});
