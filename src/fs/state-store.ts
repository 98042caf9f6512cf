import { writeFileAtomic } from "./atomic.js";

/**
 * Writes a JSON snapshot atomically whenever asked, coalescing bursts: while one write is in
 * flight or the last one is less than `minIntervalMs` old, further requests collapse into a
 * single later write of the newest snapshot. Every `save()` resolves once a snapshot taken
 * after the call is on disk. `finish()` writes a last snapshot and accepts no more.
 */
export class SnapshotWriter<T> {
  private running: Promise<void> | null = null;
  private queued: Promise<void> | null = null;
  private lastWrite = 0;
  private done = false;

  constructor(
    readonly path: string,
    private readonly snapshot: () => T,
    private readonly minIntervalMs = 0,
  ) {}

  save(): Promise<void> {
    if (this.done) return Promise.resolve();
    if (this.queued) return this.queued;
    const wait = Math.max(0, this.lastWrite + this.minIntervalMs - Date.now());
    if (!this.running && wait === 0) return this.start();
    const before = this.running ?? Promise.resolve();
    this.queued = before
      .catch(() => {})
      .then(
        () =>
          new Promise<void>((r) =>
            setTimeout(r, Math.max(0, this.lastWrite + this.minIntervalMs - Date.now())),
          ),
      )
      .then(() => {
        this.queued = null;
        return this.done ? undefined : this.start();
      });
    return this.queued;
  }

  /** Waits for what is pending, then writes `last` (default: a fresh snapshot) as the final state. */
  async finish(last?: T): Promise<void> {
    this.done = true;
    await this.queued?.catch(() => {});
    await this.running?.catch(() => {});
    await writeFileAtomic(this.path, compact(last ?? this.snapshot()), 0o600, false);
  }

  private start(): Promise<void> {
    const write = writeFileAtomic(this.path, compact(this.snapshot()), 0o600, false).finally(() => {
      this.lastWrite = Date.now();
      if (this.running === write) this.running = null;
    });
    this.running = write;
    return write;
  }
}

/** One line: the snapshot is rewritten at every transition, so it is kept small and cheap. */
function compact(value: unknown): string {
  return `${JSON.stringify(value)}\n`;
}
