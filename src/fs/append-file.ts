import { closeSync, openSync, readFileSync, writeSync } from "node:fs";

/**
 * A file opened O_APPEND on first use and kept open, each append one synchronous write() of
 * whole lines: a line is a few hundred bytes, and a write() costs microseconds where the
 * promise API cost ~0.1 ms of CPU apiece. A short write (disk full) goes on rather than tear.
 */
export class AppendFile {
  private fd: number | null = null;

  constructor(readonly path: string) {}

  /** Whether the file ends a line (or is empty or missing): false after a crash mid-append. */
  endsWithNewline(): boolean {
    let text: Buffer;
    try {
      text = readFileSync(this.path);
    } catch {
      return true;
    }
    return text.length === 0 || text[text.length - 1] === 0x0a;
  }

  append(text: string): void {
    this.fd ??= openSync(this.path, "a", 0o600);
    const data = Buffer.from(text);
    for (let off = 0; off < data.length; ) off += writeSync(this.fd, data, off);
  }

  /** Closes the file; a later append opens it again. */
  close(): void {
    if (this.fd !== null) closeSync(this.fd);
    this.fd = null;
  }
}
