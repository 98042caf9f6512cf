import { join } from "node:path";
import { Report } from "../contract/report.js";
import type { RunView } from "../contract/status-view.js";
import { readJsonRecord } from "../fs/json-record.js";
import { readLedgerEvents } from "../ledger/ledger.js";
import { type HtmlFragment, renderTimeline } from "../report/html.js";
import { timelineOf } from "../report/timeline.js";

/**
 * A run's timeline as report.html draws it, from its ledger (read leniently: a live run may be
 * mid-append) and its report once written; null while the ledger has no event. A live run's
 * right edge is now; an interrupted one's is its last update.
 */
export async function runTimeline(run: RunView, now = Date.now()): Promise<HtmlFragment | null> {
  const events = await readLedgerEvents(join(run.run_dir, "events.jsonl"));
  if (events.length === 0) return null;
  // A half-written or foreign report draws the timeline from the ledger alone.
  const report = run.report ? await readJsonRecord(Report, run.report) : null;
  const edge = run.phase === "interrupted" ? Date.parse(run.updated_at) : now;
  return renderTimeline(timelineOf(events, report, Number.isFinite(edge) ? edge : now));
}
