import { relative, resolve, sep } from "node:path";
import type { Usage } from "../contract/agent-result.js";
import { type AttemptRecord, attemptSummary } from "../contract/attempt-record.js";
import type { Gate, Report } from "../contract/report.js";
import { redoSteps } from "../shell/redo-command.js";
import { shellWord } from "../shell/word.js";
import { budgetMeter, budgetShare, usd } from "../spend/budget.js";
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
  conflicted: "succeeded, conflicted in the merge, redone",
  broke_gate: "succeeded, its merge turned the run-level tests_cmd red, run again to fix it",
  cancelled: "cancelled",
  running: "running",
};

/** Waits narrower than this (% of the chart) are not drawn. */
const MIN_WAIT_PCT = 0.5;

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
      `<div class="tl-tick" style="left:${pct(timeline.start + t).toFixed(3)}%"><span>${escapeHtml(t === 0 ? "0s" : formatDuration(t))}</span></div>`,
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
        `<span class="tl-note" style="left:${pct(end).toFixed(3)}%">${escapeHtml(m.result ?? "merging…")}</span></div></div>` +
        bisectRowHtml(m, { pos, pct }) +
        "</div>",
    );
  }

  const nowLine = timeline.live
    ? `<div class="tl-now" style="left:${pct(timeline.now).toFixed(3)}%" title="now"></div>`
    : "";
  const empty =
    timeline.rows.length === 0
      ? `<p class="tl-empty">No attempt is recorded in the run's ledger (events.jsonl): no timeline to draw.</p>`
      : "";
  const html =
    `<div class="tl${timeline.live ? " tl-live" : ""}" data-start="${timeline.start}" data-end="${timeline.end}">` +
    `<div class="tl-head"><div class="tl-label"></div><div class="tl-axis">${ticks.join("")}</div></div>` +
    `<div class="tl-body"><div class="tl-grid">${ticks.map((t) => t.replace(/<span>.*<\/span>/, "")).join("")}${nowLine}</div>` +
    `${parts.join("")}</div>${empty}${legendHtml()}</div>`;
  return { html, css: TIMELINE_CSS };
}

/**
 * The bisects' gate runs under the merge: each probe where it ran (green passed, red failed;
 * its title says how many tasks it merged), and what they found.
 */
function bisectRowHtml(
  m: NonNullable<Timeline["merge"]>,
  o: { pos: (start: number, end: number) => string; pct: (t: number) => number },
): string {
  if (m.probes.length === 0) return "";
  const marks = m.probes.map((p) => {
    const merged =
      p.k === 0 ? "the base (no task merged)" : `the first ${p.k} of ${p.of} tasks, up to ${p.task}`;
    const title = `probe of ${merged}: run.tests_cmd ${p.passed ? "passed" : "failed"} (${formatDuration(p.durationMs)})`;
    return `<div class="tl-probe ${p.passed ? "passed" : "failed"}" data-k="${p.k}" style="${o.pos(p.at - p.durationMs, p.at)}" title="${escapeHtml(title)}"></div>`;
  });
  const last = m.probes.at(-1)!.at;
  const found = m.redOnBase
    ? "red on the base: no task broke it"
    : m.culprit
      ? `culprit: ${m.culprit}`
      : "bisecting…";
  return (
    `<div class="tl-row tl-bisect"><div class="tl-label"><span class="tl-name">bisect</span> <span class="tl-attempt">${m.probes.length} runs</span></div>` +
    `<div class="tl-track">${marks.join("")}<span class="tl-note" style="left:${o.pct(last).toFixed(3)}%">${escapeHtml(found)}</span></div></div>`
  );
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
    row.bar?.redo != null
      ? ` <span class="tl-attempt tl-redo">${row.bar.redoCause === "gate" ? "fix" : "redo"} ${row.bar.redo}</span>`
      : row.attempt !== null &&
          (row.attempt > 1 ||
            row.bar?.outcome === "retried" ||
            row.bar?.outcome === "conflicted" ||
            row.bar?.outcome === "broke_gate")
        ? ` <span class="tl-attempt">#${row.attempt}</span>`
        : "";
  const star = row.critical
    ? ` <span class="tl-crit" title="on the critical path: the longest chain of dependencies">★</span>`
    : "";
  const inner: string[] = [];
  // A wait too short to see (the few ms between a slot and the worktree) is left out.
  for (const w of row.waits)
    if (o.pct(o.endOf(w.end)) - o.pct(w.start) >= MIN_WAIT_PCT) inner.push(waitHtml(w, o));
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
  const redo =
    bar.redo === null
      ? ""
      : bar.redoCause === "gate"
        ? ` (fix ${bar.redo} of the run-level tests_cmd its merge turned red)`
        : ` (redo ${bar.redo} of its conflict with ${bar.conflict?.with.join(", ") || "the tasks before it"})`;
  const title = `${bar.task} attempt ${bar.attempt}${bar.agent ? ` (${bar.agent})` : ""}${redo}: ${OUTCOME_TEXT[bar.outcome]}${why}, ${duration}${
    bar.exitCode === null ? "" : `, exit code ${bar.exitCode}`
  }${bar.host ? `, on ${bar.host}` : ""}${bar.feedback ? `; it was told what went wrong before: ${bar.feedback}` : ""}${
    bar.decision
      ? `; its agent decided ${bar.decision.status}${bar.decision.reason ? `: ${bar.decision.reason}` : ""}`
      : ""
  }`;
  const classes = ["bar", bar.outcome, ...(bar.critical ? ["critical"] : [])].join(" ");
  const note =
    bar.outcome === "success"
      ? duration
      : bar.outcome === "conflicted"
        ? `${duration} · conflicted with ${bar.conflict?.with.join(", ") ?? "?"}`
        : bar.outcome === "broke_gate"
          ? `${duration} · its merge turned the gate red`
          : `${duration} · ${bar.outcome === "retried" ? "retried" : bar.outcome}${bar.reason && bar.outcome !== "running" ? `: ${bar.reason}` : ""}`;
  return (
    `<div class="${classes}" data-task="${escapeHtml(bar.task)}" data-attempt="${bar.attempt}" data-outcome="${bar.outcome}"` +
    `${bar.critical ? ' data-critical="true"' : ""}${bar.reason ? ` data-reason="${escapeHtml(bar.reason)}"` : ""}` +
    `${bar.redo === null ? "" : ` data-redo="${bar.redo}"`}` +
    `${bar.decision ? ` data-decision="${escapeHtml(bar.decision.status)}"` : ""}` +
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
  // A skip's detail says it all ("a dependency failed: …"); an attempt that never launched needs its reason too.
  const why =
    m.kind === "skipped" && m.detail
      ? m.detail
      : `${m.reason ?? ""}${m.detail ? `${m.reason ? ": " : ""}${m.detail}` : ""}`;
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
    item(`<i class="sw sw-success"></i>`, "succeeded") +
    item(`<i class="sw sw-failed"></i>`, "failed") +
    item(`<i class="sw sw-retried"></i>`, "failed, then retried") +
    item(`<i class="sw sw-conflicted"></i>`, "conflicted in the merge, then redone") +
    item(`<i class="sw sw-broke_gate"></i>`, "its merge turned the run-level gate red, then fixed") +
    item(`<i class="sw sw-cancelled"></i>`, "cancelled") +
    item(`<i class="sw sw-running"></i>`, "running") +
    item(`<i class="sw sw-success sw-critical"></i>`, "critical path ★ (the longest chain of dependencies)") +
    item(`<i class="sw sw-queued"></i>`, "waiting for a slot") +
    item(`<i class="sw sw-input"></i>`, "waiting for input") +
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
.tl .bar.success,.tl .sw-success{background:#2da44e}
.tl .bar.failed,.tl .sw-failed{background:#cf222e}
.tl .bar.retried,.tl .sw-retried{background:repeating-linear-gradient(135deg,#fb8f44 0 6px,#e16f24 6px 12px)}
.tl .bar.conflicted,.tl .sw-conflicted{background:repeating-linear-gradient(135deg,#2da44e 0 6px,#8250df 6px 12px)}
.tl .bar.broke_gate,.tl .sw-broke_gate{background:repeating-linear-gradient(135deg,#2da44e 0 6px,#bf8700 6px 12px)}
.tl .tl-probe{position:absolute;top:4px;height:12px;min-width:3px;border-radius:2px}
.tl .tl-probe.passed{background:#2da44e}
.tl .tl-probe.failed{background:#cf222e}
.tl .bar.cancelled,.tl .sw-cancelled{background:#8c959f}
.tl-redo{color:#8250df;font-weight:600}
.tl .bar.running,.tl .sw-running{background:repeating-linear-gradient(135deg,#54aeff 0 6px,#218bff 6px 12px)}
.tl .bar.critical{box-shadow:0 0 0 2px #bf8700;top:3px;bottom:3px}
.tl .wait{top:9px;bottom:9px;border-radius:2px}
.tl .wait.queued,.tl .sw-queued{background:repeating-linear-gradient(90deg,#afb8c1 0 3px,transparent 3px 6px)}
.tl .wait.input{top:2px;bottom:auto;height:4px;z-index:1}
.tl .wait.input,.tl .sw-input{background:#d4a72c}
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
.tl-legend .sw{display:inline-block;width:22px;height:12px;border-radius:3px}
.tl-legend .sw-queued{height:6px}
.tl-legend .sw-input{height:4px}
.tl-legend .sw-critical{width:18px;height:8px;box-shadow:0 0 0 2px #bf8700}
.tl-legend .sw-mark{font-style:normal;font-size:14px}
.tl-legend .sw-mark.skipped{color:#6e7781}
.tl-legend .sw-mark.not_launched{color:#cf222e;font-weight:700}
`;

/** Where the page's links start from. */
export interface ReportHtmlOptions {
  /** The run's folder: the report's log paths are relative to it. */
  runDir: string;
  /** The folder the HTML file goes to (default: the run's folder); links are made relative to it. */
  outDir?: string;
}

/**
 * The whole run on one self-contained page (report.html): summary, timeline, tasks with their
 * gates, usage and log links, the merge with its order, conflicts and run-level gates. Inline
 * CSS only: no script, no font, no URL outside the run's own files. Every string from the run
 * (ids, details, argv, paths) is escaped.
 */
export function renderReportHtml(report: Report, timeline: Timeline, o: ReportHtmlOptions): string {
  const fragment = renderTimeline(timeline);
  const link: LinkFn = (path, text) =>
    path === null ? "" : `<a class="log" href="${escapeHtml(hrefOf(path, o))}">${escapeHtml(text)}</a>`;
  const title = `termorch run ${report.run_id ?? "(not started)"}`;
  const body = [
    headerHtml(report),
    report.error ? errorHtml(report.error) : "",
    summaryHtml(report),
    `<section><h2>Timeline</h2>${fragment.html}</section>`,
    tasksHtml(report, link),
    mergeHtml(report, link, o.runDir),
    `<footer>Rendered by termorch from <code>execution_report.json</code> and <code>events.jsonl</code>${
      report.workspace ? ` · workspace <code>${escapeHtml(report.workspace)}</code>` : ""
    }${report.tmux_socket ? ` · tmux socket <code>${escapeHtml(report.tmux_socket)}</code>` : ""}</footer>`,
  ].join("\n");
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; img-src data:">
<title>${escapeHtml(title)}</title>
<style>${PAGE_CSS}${fragment.css}</style>
</head>
<body>
<main>
${body}
</main>
</body>
</html>
`;
}

/** A link from the HTML file's folder to a file of the run, as a relative URL. */
function hrefOf(path: string, o: ReportHtmlOptions): string {
  const target = resolve(o.runDir, path);
  const rel = relative(resolve(o.outDir ?? o.runDir), target).split(sep);
  // Each segment encoded, and a leading ./ so that no name (say `javascript:…`) reads as a scheme.
  const encoded = rel.map((s) => (s === ".." ? s : encodeURIComponent(s))).join("/");
  return encoded.startsWith("..") ? encoded : `./${encoded}`;
}

function headerHtml(r: Report): string {
  const ok = r.exit_code === 0;
  const verdict = r.dry_run
    ? "dry run"
    : ok
      ? "succeeded"
      : r.error
        ? `stopped: ${r.error.kind}`
        : r.merge.result === "conflict"
          ? "merge conflict"
          : "failed";
  return (
    `<header><h1>termorch run <code>${escapeHtml(r.run_id ?? "(not started)")}</code></h1>` +
    `<span class="badge ${ok ? "ok" : "bad"}">${escapeHtml(verdict)} · exit ${r.exit_code}</span>` +
    `<p class="when">${escapeHtml(localTime(r.started_at))} → ${escapeHtml(localTime(r.finished_at))}` +
    `${r.merge.target ? ` · target <code>${escapeHtml(r.merge.target)}</code>` : ""}</p></header>`
  );
}

function errorHtml(e: NonNullable<Report["error"]>): string {
  const problems = e.problems.map((p) => {
    const where = [p.file, p.field, p.task ? `task ${p.task}` : undefined].filter(Boolean).join(", ");
    return `<li>${where ? `<code>${escapeHtml(where)}</code>: ` : ""}${escapeHtml(p.message)}</li>`;
  });
  return (
    `<section class="error"><h2>Error: ${escapeHtml(e.kind)}</h2><p>${escapeHtml(e.message)}</p>` +
    `${e.hint ? `<p class="hint">${escapeHtml(e.hint)}</p>` : ""}${problems.length ? `<ul>${problems.join("")}</ul>` : ""}</section>`
  );
}

function summaryHtml(r: Report): string {
  const m = r.summary.metrics;
  const byStatus = m?.tasks_by_status ?? countBy(r.tasks.map((t) => t.status));
  const cancelled = r.summary.cancelled_tasks.length;
  const cards: string[] = [
    card("Tasks", String(m?.tasks_total ?? r.tasks.length), statusChips(byStatus, cancelled)),
    card(
      "Wall time",
      formatDuration(m?.wall_time_ms ?? Date.parse(r.finished_at) - Date.parse(r.started_at)),
    ),
  ];
  if (m) {
    cards.push(
      card(
        "Parallelism",
        `${m.parallelism_achieved.toFixed(2)}×`,
        `peak ${m.peak_parallelism} of max_parallel ${m.max_parallel}`,
      ),
      card(
        "Critical path",
        `${m.critical_path_length} task${m.critical_path_length === 1 ? "" : "s"}`,
        m.critical_path.map((id) => `<code>${escapeHtml(id)}</code>`).join(" → "),
      ),
    );
  }
  cards.push(
    card(
      "Merge",
      r.merge.result,
      `validation ${r.summary.validation}${r.summary.conflicts.length ? ` · ${r.summary.conflicts.length} conflict(s)` : ""}`,
      r.merge.result === "success" ? "ok" : r.merge.result === "skipped" ? "" : "bad",
    ),
    card("Exit code", String(r.exit_code), "", r.exit_code === 0 ? "ok" : "bad"),
  );
  const u = r.summary.usage;
  if (u) cards.push(card("Cost", costText(u) || "–", usageText(u)));
  const b = r.summary.budget;
  if (b)
    cards.push(
      card(
        "Budget",
        `${Math.floor(budgetShare(b) * 100)} %`,
        escapeHtml(`${budgetMeter(b)}${b.exhausted ? ": exhausted, later attempts did not start" : ""}`),
        b.exhausted ? "bad" : b.warning ? "" : "ok",
      ),
    );
  const lists = [
    ["Failed", r.summary.failed_tasks],
    ["Skipped", r.summary.skipped_tasks],
    ["Cancelled", r.summary.cancelled_tasks],
  ]
    .filter(([, ids]) => ids!.length > 0)
    .map(
      ([label, ids]) =>
        `<p class="list"><b>${escapeHtml(label)}:</b> ${(ids as string[])
          .map((id) => `<a href="#task-${escapeHtml(anchorOf(id))}"><code>${escapeHtml(id)}</code></a>`)
          .join(", ")}</p>`,
    );
  return `<section class="summary"><div class="cards">${cards.join("")}</div>${lists.join("")}</section>`;
}

/** A task's attempts when there was more than one: agent, start, feedback, decision, end of each. */
function attemptsHtml(history: readonly AttemptRecord[], link: LinkFn): string {
  if (history.length < 2) return "";
  const items = history.map((a) => {
    const feedback = a.feedback
      ? ` · ${link(a.feedback, "what went wrong before") || escapeHtml(a.feedback)}`
      : "";
    const decision = a.decision
      ? ` · decided <b>${escapeHtml(a.decision.status)}</b>${a.decision.reason ? `: ${escapeHtml(a.decision.reason)}` : ""}`
      : "";
    const end = a.finished_at
      ? ` → <b>${escapeHtml(a.reason ?? "passed")}</b>${a.detail ? `: ${escapeHtml(a.detail)}` : ""}`
      : "";
    const spent = a.usage ? ` · ${usageCell(a.usage)}` : "";
    return `<li data-attempt="${a.n}">${escapeHtml(attemptSummary({ ...a, feedback: null, decision: null }))}${feedback}${decision}${end}${spent}</li>`;
  });
  return `<tr class="attempts"><td></td><td colspan="7"><details><summary>${history.length} attempts</summary><ol>${items.join("")}</ol></details></td></tr>`;
}

function tasksHtml(r: Report, link: LinkFn): string {
  if (r.tasks.length === 0) return "";
  const rows = r.tasks.map((t) => {
    const usage = t.usage ? usageCell(t.usage) : `<span class="muted">–</span>`;
    const logs = [link(t.logs.stdout, "stdout"), link(t.logs.stderr, "stderr")].filter(Boolean).join(" ");
    const why = t.reason
      ? `<div class="why"><b>${escapeHtml(t.reason)}</b>${t.detail ? `: ${escapeHtml(t.detail)}` : ""}</div>`
      : "";
    return (
      `<tr id="task-${escapeHtml(anchorOf(t.id))}" class="status-${escapeHtml(t.status)}">` +
      `<td><code class="id">${escapeHtml(t.id)}</code><div class="muted small">${escapeHtml(t.agent)}</div></td>` +
      `<td><span class="status ${escapeHtml(t.status)}">${escapeHtml(t.status)}</span>${why}</td>` +
      `<td class="num">${t.attempts}</td>` +
      `<td class="num">${t.duration_ms === null ? "–" : escapeHtml(formatDuration(t.duration_ms))}</td>` +
      `<td class="num">${t.exit_code ?? "–"}</td>` +
      `<td>${gatesHtml(t.gates, false, link)}</td>` +
      `<td class="num">${usage}</td>` +
      `<td class="logs">${logs || `<span class="muted">–</span>`}</td>` +
      `</tr>` +
      `<tr class="argv"><td></td><td colspan="7"><details><summary>argv${
        t.dependencies.length ? ` · after ${t.dependencies.map((d) => escapeHtml(d)).join(", ")}` : ""
      }${t.branch ? ` · ${escapeHtml(t.branch)}` : ""}</summary><code>${t.argv.map((a) => escapeHtml(shellWord(a))).join(" ")}</code></details></td></tr>` +
      attemptsHtml(t.attempt_history ?? [], link)
    );
  });
  return (
    `<section><h2>Tasks</h2><table class="tasks"><thead><tr><th>Task</th><th>Status</th><th>Attempts</th>` +
    `<th>Duration</th><th>Exit</th><th>Gates</th><th>Usage</th><th>Logs</th></tr></thead>` +
    `<tbody>${rows.join("")}</tbody></table></section>`
  );
}

function mergeHtml(r: Report, link: LinkFn, runDir: string): string {
  const m = r.merge;
  const order = m.order.length
    ? `<ol class="order">${m.order.map((id) => `<li><code>${escapeHtml(id)}</code></li>`).join("")}</ol>`
    : `<p class="muted">No task branch was merged.</p>`;
  const conflicts = [...r.summary.conflicts, ...m.conflicts.filter((c) => !r.summary.conflicts.includes(c))];
  const conflictRows = conflicts.map(
    (c) =>
      `<li><b>${c.tasks.map((t) => escapeHtml(t)).join(" × ")}</b>${
        c.files.length ? ` in ${c.files.map((f) => `<code>${escapeHtml(f)}</code>`).join(", ")}` : ""
      }<div class="muted">${escapeHtml(c.detail)}</div></li>`,
  );
  const facts = [
    ["Result", `<span class="status ${escapeHtml(m.result)}">${escapeHtml(m.result)}</span>`],
    ...(m.reason ? [["Reason", escapeHtml(m.reason)]] : []),
    ["On conflict", escapeHtml(m.on_conflict)],
    ["On gate failure", escapeHtml(m.on_gate_failure)],
    ...(m.target ? [["Target", `<code>${escapeHtml(m.target)}</code>`]] : []),
    ...(m.base_commit ? [["Base", `<code>${escapeHtml(m.base_commit.slice(0, 12))}</code>`]] : []),
    ...(m.result_commit
      ? [["Result commit", `<code>${escapeHtml(m.result_commit.slice(0, 12))}</code>`]]
      : []),
    ...(m.target_moved
      ? [["Target moved", `to <code>${escapeHtml((m.target_moved_to ?? "").slice(0, 12))}</code>`]]
      : []),
  ];
  const redone = m.redone.map(
    (x) =>
      `<li><b>${escapeHtml(x.task)}</b> ${x.cause === "gate" ? "fix" : "redo"} ${x.redo} (attempt ${x.attempt}): <span class="status ${x.outcome === "resolved" ? "success" : "failed"}">${escapeHtml(x.outcome)}</span>` +
      (x.cause === "gate"
        ? ` — its merge turned the run-level tests_cmd red${x.run_gate ? `; on the merge with this attempt it ${x.run_gate.passed ? "passed" : "failed"}` : ""}`
        : ` — conflicted with ${escapeHtml(x.conflicted_with.join(", ") || "the tasks before it")} in ${x.files.map((f) => `<code>${escapeHtml(f)}</code>`).join(", ")}`) +
      `${x.reason ? `<div class="muted">${escapeHtml(x.reason)}${x.reason_detail ? `: ${detailHtml(x.reason_detail, link)}` : ""}</div>` : ""}` +
      `<div>${link(x.conflict_section, x.cause === "gate" ? "what it was told" : "its conflict section")}${x.logs ? ` · ${link(x.logs.stdout, "stdout")} · ${link(x.logs.stderr, "stderr")}` : ""}</div></li>`,
  );
  const bisects = m.bisects.map((b) => {
    const runs = [
      `base ${b.base.passed ? "✓" : "✗"}`,
      ...b.probes.map((p) => `${p.k} (${escapeHtml(p.task)}) ${p.passed ? "✓" : "✗"}`),
    ].join(" · ");
    const found =
      b.outcome === "red_on_base"
        ? "red on the base itself: no task broke it"
        : `culprit <b>${escapeHtml(b.culprit ?? "?")}</b>`;
    return `<li>${found} — ${b.gate_runs} gate runs, ${escapeHtml(formatDuration(b.time_ms))}<div class="muted">${runs}</div></li>`;
  });
  const culprit = m.culprit
    ? `<p><b>${escapeHtml(m.culprit.task)}</b>'s merge turns <code>${escapeHtml(m.culprit.gate)}</code> red${
        m.culprit.fixed === true ? " (fixed)" : m.culprit.fixed === false ? " (its fixes did not pass)" : ""
      }: ${detailHtml(m.culprit.detail, link)}</p><pre class="tail">${escapeHtml(m.culprit.output_tail)}</pre>`
    : "";
  const redoFiles = redoSteps(runDir, m.redo_assignments).map(
    (step, i) =>
      `<li>${link(m.redo_assignments[i]!, step.task)}: <code>${escapeHtml(step.command)}</code></li>`,
  );
  const refs = m.refs_changed.map(
    (c) =>
      `<li><code>${escapeHtml(c.ref)}</code> ${escapeHtml(c.old?.slice(0, 12) ?? "(new)")} → ${escapeHtml(
        c.new?.slice(0, 12) ?? "(deleted)",
      )}${c.task ? ` by ${escapeHtml(c.task)}` : ""}</li>`,
  );
  return (
    `<section class="merge"><h2>Merge</h2><div class="merge-grid"><div><dl>${facts
      .map(([k, v]) => `<dt>${escapeHtml(k)}</dt><dd>${v}</dd>`)
      .join("")}</dl></div><div><h3>Order</h3>${order}</div><div><h3>Run-level gates</h3>${
      m.gates.length ? gatesHtml(m.gates, true, link) : `<p class="muted">None ran.</p>`
    }</div></div>` +
    `${conflictRows.length ? `<h3>Conflicts</h3><ul class="conflicts">${conflictRows.join("")}</ul>` : ""}` +
    `${bisects.length ? `<h3>Bisect of the run-level gate</h3><ul class="bisects">${bisects.join("")}</ul>${culprit}` : ""}` +
    `${redone.length ? `<h3>Redone</h3><ul class="redone">${redone.join("")}</ul>` : ""}` +
    `${redoFiles.length ? `<h3>To redo them</h3><ul>${redoFiles.join("")}</ul>` : ""}` +
    `${refs.length ? `<h3>Refs changed during the run</h3><ul>${refs.join("")}</ul>` : ""}</section>`
  );
}

/** A link to a file of the run (a path relative to its folder), or "" for none. */
type LinkFn = (path: string | null, text: string) => string;

/** Escapes a gate's detail, linking the run's log files it names (`logs/…`: a setup_cmd's, a tests_cmd's). */
function detailHtml(text: string, link: LinkFn): string {
  return text
    .split(/(\blogs\/[\w.@+-]+(?:\/[\w.@+-]+)*)/)
    .map((part, i) =>
      i % 2 === 1
        ? link(part.replace(/\.$/, ""), part.replace(/\.$/, "")) + (part.endsWith(".") ? "." : "")
        : escapeHtml(part),
    )
    .join("");
}

function gatesHtml(gates: readonly Gate[], long: boolean, link: LinkFn): string {
  if (gates.length === 0) return `<span class="muted">–</span>`;
  return `<ul class="gates${long ? " long" : ""}">${gates
    .map((g) => {
      const state = g.passed === null ? "skip" : g.passed ? "pass" : "fail";
      const mark = g.passed === null ? "–" : g.passed ? "✓" : "✗";
      const title = `${g.name}${g.required ? "" : " (optional)"}: ${g.detail}`;
      return `<li class="gate ${state}" title="${escapeHtml(title)}"><span class="mark">${mark}</span> ${escapeHtml(g.name)}${
        long || state === "fail" ? `<span class="gate-detail"> — ${detailHtml(g.detail, link)}</span>` : ""
      }</li>`;
    })
    .join("")}</ul>`;
}

function card(label: string, value: string, sub = "", tone = ""): string {
  return `<div class="card${tone ? ` ${tone}` : ""}"><div class="label">${escapeHtml(label)}</div><div class="value">${escapeHtml(
    value,
  )}</div>${sub ? `<div class="sub">${sub}</div>` : ""}</div>`;
}

function statusChips(byStatus: Record<string, number>, cancelled: number): string {
  const order = ["success", "failed", "skipped", "running"];
  const keys = [
    ...order.filter((k) => k in byStatus),
    ...Object.keys(byStatus).filter((k) => !order.includes(k)),
  ];
  const chips = keys.map(
    (k) => `<span class="status ${escapeHtml(k)}">${byStatus[k]} ${escapeHtml(k)}</span>`,
  );
  // Cancelled is a reason, not a status: those tasks are already counted as failed or skipped.
  if (cancelled > 0) chips.push(`<span class="status cancelled">${cancelled} of them cancelled</span>`);
  return chips.join(" ");
}

function usageText(u: Usage): string {
  const parts: string[] = [];
  if (u.input_tokens !== null) parts.push(`${formatCount(u.input_tokens)} in`);
  if (u.output_tokens !== null) parts.push(`${formatCount(u.output_tokens)} out`);
  if (u.cache_read_tokens !== null) parts.push(`${formatCount(u.cache_read_tokens)} cache read`);
  if (u.cache_write_tokens !== null) parts.push(`${formatCount(u.cache_write_tokens)} cache write`);
  return parts.length ? `tokens: ${escapeHtml(parts.join(" · "))}` : "";
}

function usageCell(u: Usage): string {
  const tokens = [u.input_tokens, u.output_tokens].some((t) => t !== null)
    ? `${formatCount(u.input_tokens ?? 0)} / ${formatCount(u.output_tokens ?? 0)} tok`
    : "";
  return escapeHtml([costText(u), tokens].filter(Boolean).join(" · ") || "–");
}

/** The cost, and whether termorch computed it from the config's prices rather than the CLI's report. */
function costText(u: Usage): string {
  if (u.cost_usd === null) return "";
  const how = { cli: "", prices: " from prices", mixed: " partly from prices" }[u.cost_source ?? "cli"];
  return `${usd(u.cost_usd)}${how}`;
}

function formatCount(n: number): string {
  return n >= 1_000_000
    ? `${(n / 1_000_000).toFixed(1)}M`
    : n >= 10_000
      ? `${Math.round(n / 1000)}k`
      : String(n);
}

function countBy(values: readonly string[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const v of values) out[v] = (out[v] ?? 0) + 1;
  return out;
}

/** A fragment id from a task id (ids are validated, but the page does not rely on it). */
function anchorOf(id: string): string {
  return id.replace(/[^A-Za-z0-9_.-]/g, "_");
}

/** The report's ISO time, shown as is (UTC): the page is the same wherever it is rendered. */
function localTime(iso: string): string {
  return iso
    .replace("T", " ")
    .replace(/\.\d+Z$/, " UTC")
    .replace(/Z$/, " UTC");
}

const PAGE_CSS = `
*{box-sizing:border-box}
body{margin:0;background:#f6f8fa;color:#1f2328;font:14px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif}
main{max-width:1280px;margin:0 auto;padding:24px 28px 40px}
code{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:12.5px}
header{display:flex;flex-wrap:wrap;align-items:baseline;gap:4px 14px;margin-bottom:16px}
header h1{font-size:22px;margin:0;font-weight:600}
header h1 code{font-size:20px}
.when{flex-basis:100%;margin:0;color:#57606a;font-size:13px}
.badge{display:inline-block;padding:2px 10px;border-radius:999px;font-size:13px;font-weight:600}
.badge.ok{background:#dafbe1;color:#116329}
.badge.bad{background:#ffebe9;color:#a40e26}
section{background:#fff;border:1px solid #d0d7de;border-radius:8px;padding:14px 18px;margin:0 0 16px}
section h2{font-size:16px;margin:0 0 12px}
section h3{font-size:13px;margin:0 0 6px;color:#57606a;text-transform:uppercase;letter-spacing:.04em}
section.summary{background:none;border:none;padding:0}
.cards{display:grid;grid-template-columns:repeat(auto-fit,minmax(160px,1fr));gap:12px}
.card{background:#fff;border:1px solid #d0d7de;border-radius:8px;padding:10px 14px;min-width:0;overflow-wrap:anywhere}
.card .label{font-size:12px;color:#57606a;text-transform:uppercase;letter-spacing:.04em}
.card .value{font-size:22px;font-weight:600}
.card.ok .value{color:#1a7f37}
.card.bad .value{color:#cf222e}
.card .sub{font-size:12px;color:#57606a}
.list{margin:10px 0 0}
.error{border-color:#ff8182;background:#fff5f5}
.error h2{color:#a40e26}
.hint{color:#57606a}
.status{display:inline-block;padding:0 8px;border-radius:999px;font-size:12px;font-weight:600;background:#eaeef2;color:#424a53;white-space:nowrap}
.status.success{background:#dafbe1;color:#116329}
.status.failed,.status.conflict,.status.rolled_back{background:#ffebe9;color:#a40e26}
.status.skipped,.status.cancelled{background:#eaeef2;color:#57606a}
.status.running{background:#ddf4ff;color:#0550ae}
table.tasks{width:100%;border-collapse:collapse;font-size:13px}
table.tasks th{text-align:left;font-size:12px;color:#57606a;font-weight:600;border-bottom:1px solid #d0d7de;padding:6px 8px}
table.tasks td{padding:7px 8px;vertical-align:top;border-top:1px solid #eaeef2}
table.tasks tr.argv td{border-top:none;padding-top:0}
table.tasks .num{text-align:right;white-space:nowrap}
table.tasks .why{margin-top:3px;font-size:12px;color:#a40e26;max-width:380px}
table.tasks details summary{cursor:pointer;color:#57606a;font-size:12px}
table.tasks details code{display:block;white-space:pre-wrap;word-break:break-all;background:#f6f8fa;padding:6px 8px;border-radius:6px;margin-top:4px}
.logs{white-space:nowrap}
.logs a{margin-right:8px}
pre.tail{white-space:pre-wrap;word-break:break-all;background:#f6f8fa;padding:6px 8px;border-radius:6px;font-size:12px;max-height:320px;overflow:auto}
a{color:#0969da;text-decoration:none}
a:hover{text-decoration:underline}
.muted{color:#6e7781}
.small{font-size:11px}
ul.gates{list-style:none;margin:0;padding:0;display:flex;flex-wrap:wrap;gap:3px 10px;font-size:12px}
ul.gates.long{display:block}
ul.gates.long li{margin-bottom:4px}
.gate .mark{font-weight:700}
.gate.pass .mark{color:#1a7f37}
.gate.fail{color:#a40e26}
.gate.skip{color:#8c959f}
.gate-detail{color:#57606a}
.merge-grid{display:grid;grid-template-columns:minmax(200px,1fr) minmax(160px,1fr) minmax(260px,2fr);gap:16px}
dl{display:grid;grid-template-columns:auto 1fr;gap:2px 12px;margin:0}
dt{color:#57606a}
dd{margin:0}
ol.order{margin:0;padding-left:22px}
ul.conflicts li{margin-bottom:6px}
footer{color:#6e7781;font-size:12px;text-align:center}
`;
