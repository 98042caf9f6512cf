import { createWriteStream, type WriteStream } from "node:fs";
import { StringDecoder } from "node:string_decoder";
import type { Redactor } from "../redact/redactor.js";

/** A partial line longer than this is redacted and written without waiting for its end. */
const MAX_PENDING = 1024 * 1024;

/**
 * A log file fed by a stream: redacted line by line (a secret is never split between two
 * writes), capped at `maxBytes` with one marker line, after which input is still drained but
 * no longer written, so the producer never blocks or dies of a full pipe.
 */
export class CappedLog {
  private readonly out: WriteStream;
  /** Keeps the bytes of a UTF-8 character split between two chunks until the rest arrives. */
  private readonly decoder = new StringDecoder("utf8");
  private pending = "";
  private written = 0;
  private truncated = false;

  constructor(
    path: string,
    private readonly redactor: Redactor,
    private readonly maxBytes: number,
  ) {
    this.out = createWriteStream(path, { flags: "w", mode: 0o600 });
  }

  write(chunk: Buffer | string): void {
    this.pending += typeof chunk === "string" ? chunk : this.decoder.write(chunk);
    const cut = this.pending.length > MAX_PENDING ? this.pending.length : this.pending.lastIndexOf("\n") + 1;
    if (cut > 0) {
      this.emit(this.pending.slice(0, cut));
      this.pending = this.pending.slice(cut);
    }
  }

  /** Flushes the last partial line and closes the file. */
  async close(): Promise<void> {
    // A character the stream cut short is written as U+FFFD, not dropped.
    this.pending += this.decoder.end();
    if (this.pending) this.emit(this.pending);
    this.pending = "";
    await new Promise<void>((done) => this.out.end(() => done()));
  }

  private emit(text: string): void {
    if (this.truncated) return;
    const data = Buffer.from(this.redactor.redact(text));
    const room = this.maxBytes > 0 ? this.maxBytes - this.written : data.length;
    if (data.length <= room) {
      this.out.write(data);
      this.written += data.length;
      return;
    }
    this.out.write(data.subarray(0, Math.max(0, room)));
    this.out.write(`\n[termorch: log truncated at ${this.maxBytes} bytes]\n`);
    this.truncated = true;
  }
}
