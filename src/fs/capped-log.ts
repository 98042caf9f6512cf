import { createWriteStream, type WriteStream } from "node:fs";
import { LINE_MAX, type LineState, type Redactor } from "../redact/redactor.js";

/**
 * A log file fed by a stream, by the rules of src/redact/RULES.md that the pane supervisor
 * follows too: bytes, redacted line by line (a secret is never split between two writes; a
 * partial line waits for its end unless it grows past LINE_MAX), capped at `maxBytes` with one
 * marker line, after which input is still drained but no longer written, so the producer never
 * blocks or dies of a full pipe. The file starts empty, so the cap counts from 0.
 */
export class CappedLog {
  private readonly out: WriteStream;
  /** Bytes of the partial line, one character per byte (latin1): nothing is decoded. */
  private pending = "";
  private readonly state: LineState = { inKey: false };
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
    this.pending += (typeof chunk === "string" ? Buffer.from(chunk) : chunk).toString("latin1");
    let cut = this.pending.lastIndexOf("\n") + 1;
    if (this.pending.length - cut > LINE_MAX) cut = this.pending.length;
    if (cut > 0) {
      this.emit(this.pending.slice(0, cut));
      this.pending = this.pending.slice(cut);
    }
  }

  /** Flushes the last partial line and closes the file. */
  async close(): Promise<void> {
    if (this.pending) this.emit(this.pending);
    this.pending = "";
    await new Promise<void>((done) => this.out.end(() => done()));
  }

  private emit(text: string): void {
    if (this.truncated) return;
    let data = this.redactor.redactLines(text, this.state, true);
    const room = this.maxBytes > 0 ? this.maxBytes - this.written : data.length;
    if (data.length > room) {
      data = `${data.slice(0, Math.max(0, room))}\n[termorch: log truncated at ${this.maxBytes} bytes]\n`;
      this.truncated = true;
    }
    this.written += data.length;
    this.out.write(Buffer.from(data, "latin1"));
  }
}
