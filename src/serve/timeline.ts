import type { RunView } from "../contract/status-view.js";

/** A run's timeline, HTML and CSS; null until the report's timeline renderer is merged. */
export async function runTimeline(_run: RunView): Promise<{ html: string; css: string } | null> {
  return null;
}
