import type { Timeline, TimelineBar, TimelineMarker, TimelineRow, TimelineWait } from "./timeline.js";

/** An HTML fragment and the CSS it needs (every rule scoped under `.tl`). */
export interface HtmlFragment {
  html: string;
  css: string;
}

/** Escapes text for HTML content and quoted attribute values alike. */
export function escapeHtml(value: unknown): string {
  return String(value ?? "")
    .replaceAll("&", "&amp;")
    .replaceAll("<", "&lt;")
    .replaceAll(">", "&gt;")
    .replaceAll('"', "&quot;")
    .replaceAll("'", "&#39;");
}

/** `1.2s`, `45s`, `3m 05s`, `1h 02m`. */
export function formatDuration(ms: number): string {
  if (!Number.isFinite(ms) || ms < 0) return "–";
  if (ms < 1000) return `${Math.round(ms)}ms`;
  if (ms < 10_000) return `${(ms / 1000).toFixed(1)}s`;
  const s = Math.round(ms / 1000);
  if (s < 60) return `${s}s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m}m ${String(s % 60).padStart(2, "0")}s`;
  return `${Math.floor(m / 60)}h ${String(m % 60).padStart(2, "0")}m`;
}

const OUTCOME_TEXT: Record<TimelineBar["outcome"], string> = {
  success: "succeeded",
  failed: "failed",
  retried: "failed, retried",
  cancelled: "cancelled",
  running: "running",
};

/** Tick steps for the time axis, in ms: the first that gives at most ~8 ticks is used. */
const TICK_STEPS = [
  100, 200, 500, 1000, 2000, 5000, 10_000, 15_000, 30_000, 60_000, 120_000, 300_000, 600_000, 900_000,
  1_800_000, 3_600_000, 7_200_000, 21_600_000, 43_200_000, 86_400_000,
];

/**
 * The Gantt chart of a run: a row per attempt grouped by wave, on a shared time axis, with the
 * critical path, failures, retries, skips and waits marked, and a legend. Positions are
 * percentages, so it fits any width; no script, no external resource. Each attempt's bar is
 * `.bar[data-task][data-attempt][data-outcome]` (with `data-critical` on the critical path),
 * in the timeline's row order (by wave, then start). `termorch serve` shows the same fragment
 * for live runs.
 */
export function renderTimeline(timeline: Timeline): HtmlFragment {
  const span = Math.max(1, timeline.end - timeline.start);
  const pct = (t: number): number => Math.min(100, Math.max(0, ((t - timeline.start) / span) * 100));
  const pos = (start: number, end: number): string => {
    const left = pct(start);
    const width = Math.max(pct(end) - left, 0);
    return `left:${left.toFixed(3)}%;width:${width.toFixed(3)}%`;
  };
  const endOf = (end: number | null): number => end ?? timeline.now;

  const step = TICK_STEPS.find((s) => span / s <= 8) ?? TICK_STEPS.at(-1)!;
  const ticks: string[] = [];
  for (let t = 0; t <= span; t += step)
    ticks.push(
      `<div class="tl-tick" style="left:${pct(timeline.start + t).toFixed(3)}%"><span>${escapeHtml(formatDuration(t))}</span></div>`,
    );

  const parts: string[] = [];
  let wave = -1;
  for (const row of timeline.rows) {
    if (row.wave !== wave) {
      if (wave !== -1) parts.push("</div>");
      wave = row.wave;
      const label = wave <= timeline.waves.length ? `Wave ${wave}` : "Not planned";
      parts.push(
        `<div class="tl-wave" data-wave="${wave}"><div class="tl-wave-title">${escapeHtml(label)}</div>`,
      );
    }
    parts.push(rowHtml(row, { pos, pct, endOf }));
  }
  if (wave !== -1) parts.push("</div>");

  if (timeline.merge) {
    const m = timeline.merge;
    const end = endOf(m.end);
    const title = `merge: ${m.result ?? "running"} (${formatDuration(end - m.start)})`;
    parts.push(
      `<div class="tl-wave tl-merge-group"><div class="tl-row"><div class="tl-label"><span class="tl-name">merge</span></div>` +
        `<div class="tl-track"><div class="tl-span merge merge-${escapeHtml(m.result ?? "running")}" style="${pos(m.start, end)}" title="${escapeHtml(title)}"></div>` +
        `<span class="tl-note" style="left:${pct(end).toFixed(3)}%">${escapeHtml(m.result ?? "merging…")}</span></div></div></div>`,
    );
  }

  const nowLine = timeline.live
    ? `<div class="tl-now" style="left:${pct(timeline.now).toFixed(3)}%" title="now"></div>`
    : "";
  const empty =
    timeline.rows.length === 0 ? `<p class="tl-empty">No task was started: the run has no timeline.</p>` : "";
  const html =
    `<div class="tl${timeline.live ? " tl-live" : ""}" data-start="${timeline.start}" data-end="${timeline.end}">` +
    `<div class="tl-head"><div class="tl-label"></div><div class="tl-axis">${ticks.join("")}</div></div>` +
    `<div class="tl-body"><div class="tl-grid">${ticks.map((t) => t.replace(/<span>.*<\/span>/, "")).join("")}${nowLine}</div>` +
    `${parts.join("")}</div>${empty}${legendHtml()}</div>`;
  return { html, css: TIMELINE_CSS };
}

function rowHtml(
  row: TimelineRow,
  o: {
    pos: (start: number, end: number) => string;
    pct: (t: number) => number;
    endOf: (end: number | null) => number;
  },
): string {
  const name = `<span class="tl-name">${escapeHtml(row.task)}</span>`;
  const attempt =
    row.attempt !== null && (row.attempt > 1 || row.bar?.outcome === "retried")
      ? ` <span class="tl-attempt">#${row.attempt}</span>`
      : "";
  const star = row.critical ? ` <span class="tl-crit" title="on the critical path">★</span>` : "";
  const inner: string[] = [];
  for (const w of row.waits) inner.push(waitHtml(w, o));
  if (row.bar) inner.push(barHtml(row.bar, o));
  if (row.marker) inner.push(markerHtml(row.marker, o.pct));
  if (!row.bar && !row.marker) inner.push(`<span class="tl-note tl-pending">not started</span>`);
  return (
    `<div class="tl-row${row.critical ? " critical" : ""}" data-row-task="${escapeHtml(row.task)}">` +
    `<div class="tl-label" title="${escapeHtml(row.task)}">${name}${attempt}${star}</div>` +
    `<div class="tl-track">${inner.join("")}</div></div>`
  );
}

function barHtml(
  bar: TimelineBar,
  o: {
    pos: (start: number, end: number) => string;
    pct: (t: number) => number;
    endOf: (end: number | null) => number;
  },
): string {
  const end = o.endOf(bar.end);
  const duration = formatDuration(end - bar.start);
  const why = bar.reason ? ` (${bar.reason}${bar.detail ? `: ${bar.detail}` : ""})` : "";
  const title = `${bar.task} attempt ${bar.attempt}: ${OUTCOME_TEXT[bar.outcome]}${why}, ${duration}${
    bar.exitCode === null ? "" : `, exit code ${bar.exitCode}`
  }${bar.host ? `, on ${bar.host}` : ""}`;
  const classes = ["bar", bar.outcome, ...(bar.critical ? ["critical"] : [])].join(" ");
  const note =
    bar.outcome === "success"
      ? duration
      : `${duration} · ${bar.outcome === "retried" ? "retried" : bar.outcome}${bar.reason && bar.outcome !== "running" ? `: ${bar.reason}` : ""}`;
  return (
    `<div class="${classes}" data-task="${escapeHtml(bar.task)}" data-attempt="${bar.attempt}" data-outcome="${bar.outcome}"` +
    `${bar.critical ? ' data-critical="true"' : ""}${bar.reason ? ` data-reason="${escapeHtml(bar.reason)}"` : ""}` +
    ` style="${o.pos(bar.start, end)}" title="${escapeHtml(title)}"></div>` +
    `<span class="tl-note" style="left:${o.pct(end).toFixed(3)}%">${escapeHtml(note)}</span>`
  );
}

function waitHtml(
  w: TimelineWait,
  o: { pos: (start: number, end: number) => string; endOf: (end: number | null) => number },
): string {
  const end = o.endOf(w.end);
  const title =
    w.kind === "queued"
      ? `${w.task} waited ${formatDuration(end - w.start)} for a free slot (max_parallel) after it was ready`
      : `${w.task} waited ${formatDuration(end - w.start)} for input`;
  return `<div class="wait ${w.kind}" data-task="${escapeHtml(w.task)}" data-wait="${w.kind}" style="${o.pos(w.start, end)}" title="${escapeHtml(title)}"></div>`;
}

function markerHtml(m: TimelineMarker, pct: (t: number) => number): string {
  const what = m.kind === "skipped" ? "skipped" : `attempt ${m.attempt} not launched`;
  const why = `${m.reason ?? ""}${m.detail ? `${m.reason ? ": " : ""}${m.detail}` : ""}`;
  const text = why ? `${what} — ${why}` : what;
  const left = pct(m.at);
  // Near the right edge the note goes to the marker's left, so it stays on the page.
  const side = left > 60 ? " tl-note-left" : "";
  return (
    `<div class="marker ${m.kind}" data-task="${escapeHtml(m.task)}" data-marker="${m.kind}" style="left:${left.toFixed(3)}%" title="${escapeHtml(
      `${m.task}: ${text}`,
    )}">${m.kind === "skipped" ? "⊘" : "✕"}</div>` +
    `<span class="tl-note tl-marker-note${side}" style="left:${left.toFixed(3)}%">${escapeHtml(text)}</span>`
  );
}

function legendHtml(): string {
  const item = (swatch: string, text: string): string =>
    `<span class="tl-legend-item">${swatch}<span>${escapeHtml(text)}</span></span>`;
  return (
    `<div class="tl-legend">` +
    item(`<i class="sw bar success"></i>`, "succeeded") +
    item(`<i class="sw bar failed"></i>`, "failed") +
    item(`<i class="sw bar retried"></i>`, "failed, then retried") +
    item(`<i class="sw bar cancelled"></i>`, "cancelled") +
    item(`<i class="sw bar running"></i>`, "running") +
    item(`<i class="sw bar success critical"></i>`, "critical path ★") +
    item(`<i class="sw wait queued"></i>`, "waiting for a slot") +
    item(`<i class="sw wait input"></i>`, "waiting for input") +
    item(`<i class="sw-mark skipped">⊘</i>`, "skipped") +
    item(`<i class="sw-mark not_launched">✕</i>`, "not launched") +
    `</div>`
  );
}

const TIMELINE_CSS = `
.tl{--tl-label:190px;--tl-row:26px;font:13px/1.35 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:#1f2328;position:relative}
.tl-head{display:flex;height:22px;border-bottom:1px solid #d0d7de;margin-bottom:4px}
.tl-head .tl-label{flex:0 0 var(--tl-label)}
.tl-axis{position:relative;flex:1;margin-right:150px}
.tl-tick{position:absolute;bottom:0;height:6px;border-left:1px solid #8c959f}
.tl-tick span{position:absolute;bottom:7px;left:0;transform:translateX(-50%);font-size:11px;color:#57606a;white-space:nowrap}
.tl-body{position:relative}
.tl-grid{position:absolute;top:0;bottom:0;left:var(--tl-label);right:150px;pointer-events:none}
.tl-grid .tl-tick{top:0;bottom:0;height:auto;border-left:1px dashed #eaeef2}
.tl-now{position:absolute;top:0;bottom:0;border-left:2px solid #0969da}
.tl-wave{position:relative;border-top:1px solid #eaeef2;padding:2px 0 4px}
.tl-wave-title{font-size:11px;font-weight:600;letter-spacing:.04em;text-transform:uppercase;color:#57606a;padding:3px 0 1px}
.tl-row{display:flex;align-items:center;height:var(--tl-row)}
.tl-row:hover{background:#f6f8fa}
.tl-label{flex:0 0 var(--tl-label);overflow:hidden;text-overflow:ellipsis;white-space:nowrap;padding-right:8px;box-sizing:border-box}
.tl-name{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:12px}
.tl-row.critical .tl-name{font-weight:700}
.tl-attempt{color:#57606a;font-size:11px}
.tl-crit{color:#bf8700}
.tl-track{position:relative;flex:1;height:100%;margin-right:150px}
.tl .bar,.tl .wait,.tl .tl-span{position:absolute;top:5px;bottom:5px;min-width:2px;border-radius:3px;box-sizing:border-box}
.tl .bar.success{background:#2da44e}
.tl .bar.failed{background:#cf222e}
.tl .bar.retried{background:repeating-linear-gradient(135deg,#fb8f44 0 6px,#e16f24 6px 12px)}
.tl .bar.cancelled{background:#8c959f}
.tl .bar.running{background:repeating-linear-gradient(135deg,#54aeff 0 6px,#218bff 6px 12px)}
.tl .bar.critical{box-shadow:0 0 0 2px #bf8700;top:3px;bottom:3px}
.tl .wait{top:9px;bottom:9px;border-radius:2px}
.tl .wait.queued{background:repeating-linear-gradient(90deg,#afb8c1 0 3px,transparent 3px 6px)}
.tl .wait.input{top:2px;bottom:auto;height:4px;background:#d4a72c;z-index:1}
.tl .tl-span.merge{background:#8250df}
.tl .tl-span.merge-conflict,.tl .tl-span.merge-failed,.tl .tl-span.merge-rolled_back{background:#cf222e}
.tl .tl-span.merge-skipped{background:#8c959f}
.tl .tl-span.merge-running{background:repeating-linear-gradient(135deg,#a475f9 0 6px,#8250df 6px 12px)}
.tl-note{position:absolute;top:50%;transform:translateY(-50%);padding-left:6px;font-size:11px;color:#57606a;white-space:nowrap;pointer-events:none}
.tl-pending{left:0;font-style:italic}
.tl .marker{position:absolute;top:50%;transform:translate(-50%,-50%);font-size:15px;line-height:1;cursor:default}
.tl .marker.skipped{color:#6e7781}
.tl .marker.not_launched{color:#cf222e;font-weight:700}
.tl-marker-note{padding-left:10px;max-width:none}
.tl-marker-note.tl-note-left{transform:translate(-100%,-50%);padding:0 10px 0 0}
.tl-merge-group{border-top:1px solid #d0d7de}
.tl-empty{color:#57606a;font-style:italic}
.tl-legend{display:flex;flex-wrap:wrap;gap:6px 16px;margin-top:10px;padding-top:8px;border-top:1px solid #d0d7de;font-size:12px;color:#57606a}
.tl-legend-item{display:inline-flex;align-items:center;gap:6px}
.tl-legend .sw{position:relative;display:inline-block;width:22px;height:12px;top:auto;bottom:auto}
.tl-legend .sw.wait{height:6px}
.tl-legend .sw.wait.input{height:4px}
.tl-legend .sw.bar.critical{width:18px;height:8px}
.tl-legend .sw-mark{font-style:normal;font-size:14px}
.tl-legend .sw-mark.skipped{color:#6e7781}
.tl-legend .sw-mark.not_launched{color:#cf222e;font-weight:700}
`;
