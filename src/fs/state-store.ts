import { writeJsonAtomic } from "./atomic.js";

/**
 * Writes a JSON snapshot atomically whenever asked, coalescing bursts: while one write is in
 * flight, further requests collapse into a single follow-up write of the newest snapshot. Every
 * `save()` resolves only once a snapshot taken after the call is on disk.
 */
export class SnapshotWriter<T> {
  private writing: Promise<void> | null = null;
  private queued: Promise<void> | null = null;

  constructor(
    readonly path: string,
    private readonly snapshot: () => T,
  ) {}

  save(): Promise<void> {
    if (this.queued) return this.queued;
    if (!this.writing) {
      this.writing = this.write().finally(() => {
        this.writing = null;
      });
      return this.writing;
    }
    const after = this.writing;
    this.queued = after
      .catch(() => {})
      .then(() => {
        this.queued = null;
        return this.save();
      });
    return this.queued;
  }

  private async write(): Promise<void> {
    await writeJsonAtomic(this.path, this.snapshot(), 0o600);
  }
}
