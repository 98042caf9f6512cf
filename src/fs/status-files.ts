import { unlinkSync } from "node:fs";
import { readdir, rm } from "node:fs/promises";
import { join } from "node:path";
import type { TaskState } from "../contract/reason.js";
import type { StatusFile } from "../contract/status.js";
import { writeFileAtomicSync } from "./atomic.js";

const STATES: readonly TaskState[] = ["running", "success", "failed", "skipped"];

/** `status/<task_id>.<state>`: exactly one file per task at a time. */
export class StatusFiles {
  /** The state each task's file has now, when this process wrote it ("none": known to have none). */
  private readonly current = new Map<string, TaskState | "none">();

  constructor(readonly dir: string) {}

  pathOf(taskId: string, state: TaskState): string {
    return join(this.dir, `${taskId}.${state}`);
  }

  /**
   * Writes the new state before removing the old one, so a reader never finds a task
   * without a status file (at worst it briefly sees two and takes the newer state).
   */
  set(status: StatusFile): void {
    writeFileAtomicSync(
      this.pathOf(status.task_id, status.state),
      `${JSON.stringify(status, null, 2)}\n`,
      0o644,
      false,
    );
    const previous = this.current.get(status.task_id);
    this.current.set(status.task_id, status.state);
    // Only the file this process wrote last needs to go; after a resume, any of them might exist,
    // and so they might at a task's end: its agent may have written one (the run directory is
    // reachable from its artifacts folder), and a forged state must not outlive the real one.
    const final = status.state !== "running";
    for (const s of previous && !final ? [previous] : STATES) {
      if (s === status.state || s === "none") continue;
      try {
        unlinkSync(this.pathOf(status.task_id, s));
      } catch {
        // Not there: nothing to remove.
      }
    }
  }

  /** Removes the status files of tasks from an earlier run in the same folder. */
  async clear(taskIds: Iterable<string>): Promise<void> {
    const ids = new Set(taskIds);
    let names: string[];
    try {
      names = await readdir(this.dir);
    } catch {
      return; // no folder, no files
    }
    const stale = names.filter((n) => {
      const dot = n.lastIndexOf(".");
      return dot > 0 && ids.has(n.slice(0, dot)) && (STATES as readonly string[]).includes(n.slice(dot + 1));
    });
    await Promise.all(stale.map((n) => rm(join(this.dir, n), { force: true })));
    // Their first transition then has nothing to remove (failed unlinks cost an exception each).
    for (const id of ids) this.current.set(id, "none");
  }
}
