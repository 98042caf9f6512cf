import { existsSync } from "node:fs";
import { join } from "node:path";

/** UTC yyyyMMddTHHmmssSSSZ, as docs/contract.md names log files. */
export function compactTimestamp(ms: number): string {
  return new Date(ms).toISOString().replace(/[-:]/g, "").replace(".", "");
}

/**
 * Hands out `logs/<agent>-<ts>` stems that are unique per task: when two tasks of one agent
 * start in the same millisecond, the later one takes the next free millisecond.
 */
export class LogNames {
  private readonly taken = new Set<string>();

  constructor(readonly dir: string) {}

  next(agent: string, nowMs: number): string {
    const safeAgent = agent.replace(/[^A-Za-z0-9_.-]/g, "_").replace(/^\.+/, "_") || "agent";
    for (let ms = nowMs; ; ms++) {
      const stem = `${safeAgent}-${compactTimestamp(ms)}`;
      if (this.taken.has(stem) || existsSync(join(this.dir, `${stem}.out`))) continue;
      this.taken.add(stem);
      return stem;
    }
  }
}
