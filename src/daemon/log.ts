import { createWriteStream } from "node:fs";
import { mkdir } from "node:fs/promises";
import { join } from "node:path";
import { Writable } from "node:stream";
import pino, { type Logger } from "pino";
import { prettyLine } from "../log/pretty.js";
import type { Redactor } from "../redact/redactor.js";

/**
 * The daemon's structured log: JSON lines in `<home>/logs/termorch.log` (owner-only), and a
 * short human line per event on stderr when that is a terminal. Every line passes the redactor
 * first, so no secret reaches the file.
 */
export async function daemonLogger(opts: {
  logsDir: string;
  redactor: Redactor;
  tty: NodeJS.WritableStream | null;
  level?: string;
}): Promise<{ log: Logger; close: () => Promise<void> }> {
  await mkdir(opts.logsDir, { recursive: true });
  const file = createWriteStream(join(opts.logsDir, "termorch.log"), { flags: "a", mode: 0o600 });
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      const line = opts.redactor.redact(chunk.toString("utf8"));
      file.write(line);
      if (opts.tty) opts.tty.write(prettyLine(line));
      done();
    },
  });
  const log = pino({ level: opts.level ?? "info", base: { pid: process.pid } }, sink);
  return {
    log,
    close: () => new Promise<void>((done) => file.end(() => done())),
  };
}
