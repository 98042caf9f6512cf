import { statSync } from "node:fs";
import { open } from "node:fs/promises";

/** Enough of the end of a log to hold its last line in practice, without reading 100 MB logs whole. */
const TAIL_BYTES = 64 * 1024;
/** What is read first: a log's last line is usually short (a live view reads several logs a second). */
const FIRST_BYTES = 4 * 1024;
const MAX_CHARS = 200;

/**
 * CSI and OSC sequences, other escapes, and control characters but tab: a tty agent's log is
 * what its pane showed, colours and cursor moves included.
 */
const TERMINAL_CONTROL =
  // biome-ignore lint/suspicious/noControlCharactersInRegex: matching terminal control sequences is the point
  /\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-_]|[\x00-\x08\x0b-\x1f\x7f]/g;

/**
 * Cursor moves along the line: forward (CUF, `ESC [ n C`) and to a column (CHA, `ESC [ n G`).
 * TUIs draw with them instead of spaces (Claude Code 2.1 places each word of its footers with
 * CHA), so dropping them would glue the words together: they become the gap they leave.
 */
// biome-ignore lint/suspicious/noControlCharactersInRegex: matching terminal control sequences is the point
const CURSOR_MOVE = /\x1b\[(\d*)([CG])/g;
/** More columns than a line shown in a terminal can use; a larger move is an agent's nonsense. */
const MAX_GAP = 1000;

/** Removes terminal control sequences from a line meant for display; a cursor move becomes the gap it leaves. */
export function plainText(line: string): string {
  let out = "";
  let last = 0;
  for (const m of line.matchAll(CURSOR_MOVE)) {
    out += line.slice(last, m.index).replace(TERMINAL_CONTROL, "");
    last = m.index + m[0].length;
    const n = Math.min(MAX_GAP, Math.max(1, Number(m[1]) || 1));
    // CHA counts columns from 1; a move back (a redraw over the line) leaves the text as it is.
    const gap = m[2] === "C" ? n : n - 1 - [...out].length;
    if (gap > 0) out += " ".repeat(gap);
  }
  return out + line.slice(last).replace(TERMINAL_CONTROL, "");
}

/** The last lines found, by log path, with the size and time of the log they were read from. */
const found = new Map<string, { size: number; mtimeMs: number; line: string | null }>();
/** Logs remembered at most (a live view of many runs): the oldest are forgotten first. */
const FOUND_MAX = 4096;

/**
 * The last non-empty line of a log file, made plain and shortened for display; null when there is
 * none. A log unchanged since its last line was found (same size and time) is not read again. A
 * live view asks for every task's line several times a second: the look at its size is a plain
 * stat (a promise's stat cost it several times as much).
 */
export async function lastLogLine(path: string): Promise<string | null> {
  const known = found.get(path);
  const st = statSync(path, { throwIfNoEntry: false });
  if (!st) return null;
  if (known && known.size === st.size && known.mtimeMs === st.mtimeMs) return known.line;
  const line = await readLastLine(path);
  found.delete(path);
  found.set(path, { size: st.size, mtimeMs: st.mtimeMs, line });
  if (found.size > FOUND_MAX) found.delete(found.keys().next().value as string);
  return line;
}

/** The last visible line in the last FIRST_BYTES of the log, else in its last TAIL_BYTES. */
async function readLastLine(path: string): Promise<string | null> {
  let handle: Awaited<ReturnType<typeof open>>;
  try {
    handle = await open(path, "r");
  } catch {
    return null;
  }
  try {
    const { size } = await handle.stat();
    for (const want of size > FIRST_BYTES ? [FIRST_BYTES, TAIL_BYTES] : [size]) {
      const length = Math.min(size, want);
      const buffer = Buffer.alloc(length);
      await handle.read(buffer, 0, length, size - length);
      // Read from inside the log, its first line may be the end of a longer one: that counts only
      // in the whole log or the most that is read (as it always did).
      const last = length === size || want === TAIL_BYTES;
      const line = lastVisible(buffer.toString("utf8"), last);
      if (line !== null || last) return line;
    }
    return null;
  } finally {
    await handle.close();
  }
}

/** The last line with something visible, made plain and shortened; null when there is none. */
function lastVisible(text: string, firstIsWhole: boolean): string | null {
  // A carriage return redraws the line: what stays visible is what came after the last one.
  const lines = text.split("\n");
  for (let i = lines.length - 1; i >= (firstIsWhole ? 0 : 1); i--) {
    const raw = lines[i] ?? "";
    const visible = plainText(raw.slice(raw.lastIndexOf("\r", raw.length - 2) + 1)).trim();
    if (visible) return visible.length > MAX_CHARS ? `${visible.slice(0, MAX_CHARS - 3)}...` : visible;
  }
  return null;
}
