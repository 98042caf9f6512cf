import { writeFileAtomicSync } from "./atomic.js";

/**
 * Writes a JSON snapshot atomically whenever asked, coalescing bursts: every request made in
 * one turn of the event loop (say, several tasks finishing together) is served by a single
 * write of the newest snapshot, in the loop's check phase. Every `save()` resolves once a
 * snapshot taken after the call is on disk. `finish()` writes a last snapshot and accepts no more.
 */
export class SnapshotWriter<T> {
  private queued: Promise<void> | null = null;
  private done = false;

  constructor(
    readonly path: string,
    private readonly snapshot: () => T,
  ) {}

  save(): Promise<void> {
    if (this.done) return Promise.resolve();
    this.queued ??= new Promise<void>((resolve, reject) => {
      setImmediate(() => {
        this.queued = null;
        if (this.done) return resolve();
        try {
          this.write(this.snapshot());
          resolve();
        } catch (error) {
          reject(error);
        }
      });
    });
    return this.queued;
  }

  /** Waits for what is pending, then writes `last` (default: a fresh snapshot) as the final state. */
  async finish(last?: T): Promise<void> {
    await this.queued?.catch(() => {});
    this.done = true;
    this.write(last ?? this.snapshot());
  }

  // Synchronous: a few syscalls, cheaper than the promise API's machinery (see writeFileAtomicSync).
  private write(value: T): void {
    writeFileAtomicSync(this.path, compact(value), 0o600, false);
  }
}

/** One line: the snapshot is rewritten at every transition, so it is kept small and cheap. */
function compact(value: unknown): string {
  return `${JSON.stringify(value)}\n`;
}
