import type { TaskRun } from "../task/task-run.js";

/** One line of live progress for a TTY: done/running/failed and elapsed time. */
export function progressLine(tasks: readonly TaskRun[], elapsedMs: number): string {
  let done = 0;
  let running = 0;
  let failed = 0;
  let skipped = 0;
  for (const t of tasks) {
    if (t.state === "success") done++;
    else if (t.state === "running") running++;
    else if (t.state === "failed") failed++;
    else if (t.state === "skipped") skipped++;
  }
  const live = tasks
    .filter((t) => t.state === "running")
    .map((t) => t.id)
    .slice(0, 4);
  const secs = (elapsedMs / 1000).toFixed(1);
  return `[${secs}s] ${done}/${tasks.length} done, ${running} running${live.length ? ` (${live.join(", ")}${running > live.length ? ", ..." : ""})` : ""}, ${failed} failed${skipped ? `, ${skipped} skipped` : ""}`;
}
