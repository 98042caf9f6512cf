import { Writable } from "node:stream";
import pino, { type Logger } from "pino";

/** One pino JSON line as a short human line: time, level, message, fields. */
export function prettyLine(line: string): string {
  try {
    const { time, level, msg, pid: _pid, ...rest } = JSON.parse(line) as Record<string, unknown>;
    const name =
      (
        { 10: "TRACE", 20: "DEBUG", 30: "INFO", 40: "WARN", 50: "ERROR", 60: "FATAL" } as Record<
          string,
          string
        >
      )[String(level)] ?? String(level);
    const fields = Object.entries(rest)
      .map(([k, v]) => `${k}=${typeof v === "string" ? v : JSON.stringify(v)}`)
      .join(" ");
    return `${new Date(Number(time)).toISOString().slice(11, 23)} ${name.padEnd(5)} ${msg ?? ""}${fields ? `  ${fields}` : ""}\n`;
  } catch {
    return line;
  }
}

/**
 * A logger for a terminal: readable lines on `out`, nothing below `level`. Every line passes
 * `redact` first, as the daemon's log does: an error's text can carry a secret.
 */
export function terminalLogger(
  out: NodeJS.WritableStream,
  level: string,
  redact: (text: string) => string,
): Logger {
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      out.write(prettyLine(redact(chunk.toString("utf8"))));
      done();
    },
  });
  return pino({ level, base: null }, sink);
}
