import stringWidth from "string-width";
import { approvalLine } from "../contract/approval.js";
import { attemptSummary } from "../contract/attempt-record.js";
import {
  isLive,
  needsHumanText,
  type RunView,
  type StatusView,
  type TaskView,
} from "../contract/status-view.js";
import { budgetMeter } from "../spend/budget.js";

/**
 * What the dashboard shows, as plain data: lines of styled segments, computed from a StatusView,
 * the selection and the terminal's size. No terminal code here (the Ink components only draw
 * these lines), so the layout can be reasoned about, and tested, without a terminal.
 */

/** A colour role; the drawing side maps it to a colour, or to nothing under NO_COLOR. */
export type Tone = "running" | "success" | "failed" | "skipped" | "waiting" | "pending" | "accent" | "muted";

export interface Segment {
  text: string;
  tone?: Tone;
  bold?: boolean;
  /** The title bar: a coloured bar, or reverse video under NO_COLOR (which is not a colour). */
  bar?: boolean;
  /** The selected row: a grey background, or reverse video under NO_COLOR. */
  selected?: boolean;
}

export type Line = Segment[];

/** Which task is selected: by ids, so that the selection survives runs appearing or reordering. */
export interface TaskKey {
  run: string;
  task: string;
}

export interface Screen {
  lines: Line[];
  /** First body row shown (the scroll position), kept by the caller for the next frame. */
  offset: number;
}

/**
 * A task as the dashboard names its state: its view's state (`redo` included: run again because
 * its result conflicted in the merge), or `waiting` for a live one whose agent waits for input,
 * `quota` for one that waits for a rate limit to lift.
 */
export function shownState(t: TaskView): string {
  if (t.waiting_approval) return "approval";
  if (!isLive(t.state)) return t.state;
  return t.waiting_quota_until ? "quota" : t.waiting_since ? "waiting" : t.state;
}

function toneOf(state: string): Tone {
  switch (state) {
    case "running":
    case "success":
    case "failed":
    case "skipped":
    case "waiting":
      return state;
    case "quota":
    case "approval":
      return "waiting";
    case "pending":
      return state;
    default:
      // retrying, launching...: on their way, shown like running.
      return "running";
  }
}

/** 850 ms -> 0.8s, 75 s -> 1m15s, 2 h -> 2h00m (as `termorch status`). */
export function duration(ms: number): string {
  if (ms < 60_000) return `${(Math.floor(ms / 100) / 10).toFixed(ms < 10_000 ? 1 : 0)}s`;
  const s = Math.floor(ms / 1000);
  if (s < 3600) return `${Math.floor(s / 60)}m${String(s % 60).padStart(2, "0")}s`;
  return `${Math.floor(s / 3600)}h${String(Math.floor((s % 3600) / 60)).padStart(2, "0")}m`;
}

/** Time it ran (finished) or has been running (`+`: still going), from the clock of this frame. */
export function taskTime(t: TaskView, now: number): string {
  if (isLive(t.state) && t.started_at) return `${duration(Math.max(0, now - Date.parse(t.started_at)))}+`;
  if (t.duration_ms !== null) return duration(t.duration_ms);
  return "-";
}

export function cost(usd: number | null | undefined): string {
  if (usd === null || usd === undefined) return "-";
  return `$${usd.toFixed(usd < 10 ? 3 : 2)}`;
}

/** The run's known cost: the sum over the tasks that reported one; null when none did. */
export function runCost(run: RunView): number | null {
  const known = run.tasks.flatMap((t) => (t.usage?.cost_usd != null ? [t.usage.cost_usd] : []));
  return known.length === 0 ? null : known.reduce((a, b) => a + b, 0);
}

function runElapsed(run: RunView, now: number): number {
  const end = run.phase === "running" ? now : Date.parse(run.updated_at);
  return Math.max(0, end - Date.parse(run.started_at));
}

function phaseLabel(run: RunView): { text: string; tone: Tone } {
  if (run.phase === "running") return { text: "running", tone: "running" };
  if (run.phase === "interrupted") return { text: "interrupted", tone: "failed" };
  const code = run.exit_code;
  return { text: `reported, exit ${code ?? "?"}`, tone: code === 0 ? "success" : "failed" };
}

/** Every task of the view in display order, as keys. */
export function taskKeys(view: StatusView): TaskKey[] {
  return view.runs.flatMap((r) => r.tasks.map((t) => ({ run: r.run_id, task: t.id })));
}

export function findTask(view: StatusView, key: TaskKey | null): { run: RunView; task: TaskView } | null {
  if (!key) return null;
  const run = view.runs.find((r) => r.run_id === key.run);
  const task = run?.tasks.find((t) => t.id === key.task);
  return run && task ? { run, task } : null;
}

/** The key `delta` tasks away from `key` (clamped); the first task when `key` is gone. */
export function moveSelection(view: StatusView, key: TaskKey | null, delta: number): TaskKey | null {
  const keys = taskKeys(view);
  if (keys.length === 0) return null;
  const at = key ? keys.findIndex((k) => k.run === key.run && k.task === key.task) : -1;
  if (at < 0) return keys[0]!;
  return keys[Math.min(keys.length - 1, Math.max(0, at + delta))]!;
}

/**
 * Cuts `text` to `width` columns, ending in `…` when cut; pads it when `pad`. Control characters
 * (a tab in a log line, a newline in a folder's name) become spaces: they would move the cursor.
 */
export function clip(text: string, width: number, pad = true): string {
  if (width <= 0) return "";
  const clean = text.replace(/\p{Cc}/gu, " ");
  // Terminal columns, not characters: a CJK character or an emoji takes two, a combining mark
  // none. Counting characters let such a line wrap and push the title off an 80x24 screen.
  let cut = clean;
  let used = stringWidth(clean);
  if (used > width) {
    cut = "";
    used = 0;
    for (const { segment } of graphemes.segment(clean)) {
      const w = stringWidth(segment);
      if (used + w > width - 1) break;
      cut += segment;
      used += w;
    }
    cut += "…";
    used += 1;
  }
  return pad ? cut + " ".repeat(Math.max(0, width - used)) : cut;
}

const graphemes = new Intl.Segmenter(undefined, { granularity: "grapheme" });

interface Columns {
  id: number;
  state: number;
  wave: number;
  attempts: number;
  time: number;
  cost: number;
  last: number;
}

/** Column widths for a terminal `width` wide: the last log line gets what is left. */
function columns(view: StatusView, width: number): Columns {
  const longest = Math.max(4, ...view.runs.flatMap((r) => r.tasks.map((t) => t.id.length)));
  const fixed = { state: 8, wave: 4, attempts: 3, time: 8, cost: 7 };
  // Marker (2) and one space after each column but the last.
  const others = 2 + fixed.state + fixed.wave + fixed.attempts + fixed.time + fixed.cost + 6;
  const id = Math.max(6, Math.min(longest, 24, width - others - 12));
  return { id, ...fixed, last: Math.max(0, width - others - id) };
}

function header(cols: Columns, width: number): Line {
  const text = [
    "  ",
    "TASK".padEnd(cols.id),
    " ",
    "STATE".padEnd(cols.state),
    " ",
    "WAVE".padStart(cols.wave),
    " ",
    "ATT".padStart(cols.attempts),
    " ",
    "TIME".padStart(cols.time),
    " ",
    "COST".padStart(cols.cost),
    " ",
    "LAST LOG LINE",
  ].join("");
  return [{ text: clip(text, width), bold: true, tone: "muted" }];
}

function runLine(run: RunView, width: number, now: number): Line {
  const phase = phaseLabel(run);
  const done = run.tasks.filter((t) => ["success", "failed", "skipped"].includes(t.state)).length;
  const total = runCost(run);
  let rest = width;
  const take = (text: string): string => {
    const cut = clip(text, rest, false);
    rest -= [...cut].length;
    return cut;
  };
  return [
    { text: take(`run ${run.run_id}  `), bold: true, tone: "accent" },
    { text: take(phase.text), tone: phase.tone, bold: true },
    {
      text: take(
        `  ${done}/${run.tasks.length} done  ${duration(runElapsed(run, now))}${total === null ? "" : `  ${cost(total)}`}  `,
      ),
    },
    ...(run.budget
      ? [
          {
            text: take(`budget ${budgetMeter(run.budget)}  `),
            tone: run.budget.exhausted ? "failed" : run.budget.warning ? "waiting" : "muted",
          } satisfies Segment,
        ]
      : []),
    { text: take(run.run_dir), tone: "muted" },
  ];
}

function taskLine(t: TaskView, cols: Columns, selected: boolean, width: number, now: number): Line {
  const state = shownState(t);
  const cell = (text: string, w: number, right = false): string =>
    right ? clip(text, w).trimEnd().padStart(w) : clip(text, w);
  const segs: Line = [
    { text: selected ? "> " : "  ", bold: true, selected },
    { text: `${cell(t.id, cols.id)} `, bold: selected, selected },
    { text: `${cell(state, cols.state)} `, tone: toneOf(state), bold: true, selected },
    {
      text: [
        cell(t.wave === null ? "-" : String(t.wave), cols.wave, true),
        cell(String(t.attempts), cols.attempts, true),
        cell(taskTime(t, now), cols.time, true),
        cell(cost(t.usage?.cost_usd), cols.cost, true),
        "",
      ].join(" "),
      selected,
    },
    // A person is needed: said where the eye goes, instead of its last log line.
    t.needs_human
      ? { text: clip(needsHumanText(t), cols.last), tone: "waiting", selected }
      : { text: clip(t.last_line ?? "", cols.last), tone: "muted", selected },
  ];
  const used = segs.reduce((n, s) => n + s.text.length, 0);
  if (used < width && selected) segs.push({ text: " ".repeat(width - used), selected });
  return segs;
}

/** The line under the list: what the selected task is and how to reach it. */
function detailLine(view: StatusView, key: TaskKey | null, width: number, now: number): Line {
  const found = findTask(view, key);
  if (!found) return [{ text: clip(view.runs.length === 0 ? "" : "no task selected", width), tone: "muted" }];
  const { run, task: t } = found;
  const parts = [`${t.id} (${t.agent}) of ${run.run_id}`];
  if (t.waiting_since)
    parts.push(
      `waiting for input for ${duration(Math.max(0, now - Date.parse(t.waiting_since)))}${t.waiting_for ? `: ${t.waiting_for}` : ""}`,
    );
  if (t.waiting_quota_until) parts.push(`waiting for a rate limit to lift at ${t.waiting_quota_until}`);
  if (t.waiting_approval) parts.push(approvalLine(t.waiting_approval));
  const last = t.attempt_history.at(-1);
  if (last && last.n > 1) parts.push(attemptSummary(last));
  if (t.redo)
    parts.push(
      t.redo.cause === "gate"
        ? `fix ${t.redo.n}/${t.redo.of}: its merge turned run.tests_cmd red`
        : `redo ${t.redo.n}/${t.redo.of}: its result conflicted with ${t.redo.with.join(", ")} in ${t.redo.files.join(", ")}`,
    );
  if (t.reason) parts.push(`${t.reason}${t.exit_code !== null ? ` ${t.exit_code}` : ""}`);
  if (t.needs_human) parts.push("needs a person");
  if (t.detail) parts.push(t.detail);
  if (t.remote) parts.push(`on ${t.remote.worker}@${t.remote.host}`);
  else if (t.session)
    parts.push(
      `session ${t.session}${t.session_live ? "" : t.session_exists ? " (agent exited)" : " (closed)"}`,
    );
  return [
    {
      text: clip(parts.join(" · "), width),
      tone:
        t.waiting_since || t.waiting_quota_until || t.waiting_approval || t.needs_human ? "waiting" : "muted",
    },
  ];
}

function humans(tasks: readonly TaskView[]): number {
  return tasks.filter((t) => t.needs_human).length;
}

function titleLine(view: StatusView, width: number, scope: string): Line {
  const tasks = view.runs.flatMap((r) => r.tasks);
  const count = (s: string): number => tasks.filter((t) => shownState(t) === s).length;
  const costs = view.runs.flatMap((r) => {
    const c = runCost(r);
    return c === null ? [] : [c];
  });
  const facts = [
    `${view.runs.length} run${view.runs.length === 1 ? "" : "s"}`,
    `${count("running")} running`,
    ...(count("redo") > 0 ? [`${count("redo")} redo`] : []),
    ...(count("waiting") > 0 ? [`${count("waiting")} waiting`] : []),
    `${count("success")} ok`,
    ...(count("failed") > 0 ? [`${count("failed")} failed`] : []),
    ...(humans(tasks) > 0 ? [`${humans(tasks)} need a person`] : []),
    ...(costs.length > 0 ? [cost(costs.reduce((a, b) => a + b, 0))] : []),
  ].join(" · ");
  const left = ` termorch watch  ${facts}`;
  const right = `${clip(scope, Math.floor(width / 2), false)} `;
  const gap = width - left.length - right.length;
  return [
    {
      text: gap >= 1 ? `${left}${" ".repeat(gap)}${right}` : clip(left, width),
      bar: true,
      bold: true,
    },
  ];
}

export interface FrameInput {
  view: StatusView;
  selected: TaskKey | null;
  offset: number;
  width: number;
  /** Rows available to the whole frame. */
  height: number;
  now: number;
  /** What the title bar says the scope is (a run id, a home, the registry). */
  scope: string;
  /** A message or a question for the operator, shown instead of the selected task's details. */
  message: { text: string; tone: Tone } | null;
  /** The key help: each key and what it does. */
  keys: readonly (readonly [string, string])[];
}

/** The key help line: keys in bold, what they do in grey, cut to `width`. */
function keysLine(keys: FrameInput["keys"], width: number): Line {
  const line: Line = [{ text: " " }];
  let rest = width - 1;
  for (const [key, what] of keys) {
    for (const [text, bold] of [
      [key, true],
      [` ${what}   `, false],
    ] as const) {
      const cut = clip(text, rest, false);
      rest -= [...cut].length;
      if (cut) line.push(bold ? { text: cut, bold: true } : { text: cut, tone: "muted" });
    }
  }
  return line;
}

/** The whole frame: title, column header, the runs and their tasks (scrolled), details, key help. */
export function frame(f: FrameInput): Screen {
  const width = Math.max(20, f.width);
  const cols = columns(f.view, width);
  const body: { line: Line; task: boolean; selected: boolean }[] = [];
  for (const run of f.view.runs) {
    body.push({ line: runLine(run, width, f.now), task: false, selected: false });
    // Where its merge is (a bisect's probe, the culprit), under the run's line.
    if (run.merge)
      body.push({
        line: [
          { text: clip(`  merge: ${run.merge.line}`, width), tone: run.merge.culprit ? "waiting" : "muted" },
        ],
        task: false,
        selected: false,
      });
    for (const t of run.tasks) {
      const selected = f.selected?.run === run.run_id && f.selected.task === t.id;
      body.push({ line: taskLine(t, cols, selected, width, f.now), task: true, selected });
    }
  }
  for (const q of f.view.queued)
    body.push({
      line: [
        {
          text: clip(`run ${q.run_id}  queued: the daemon starts it when its workspace is free`, width),
          tone: "pending",
        },
      ],
      task: false,
      selected: false,
    });
  for (const p of f.view.problems)
    body.push({
      line: [{ text: clip(`run ${p.run_id ?? p.run_dir ?? "?"}: ${p.message}`, width), tone: "muted" }],
      task: false,
      selected: false,
    });
  if (body.length === 0)
    body.push({
      line: [{ text: clip("no runs yet: this view shows them as they start", width), tone: "muted" }],
      task: false,
      selected: false,
    });
  // Title, column header, details and key help take four rows; the body scrolls in the rest.
  const rows = Math.max(1, f.height - 4);
  const at = body.findIndex((b) => b.selected);
  let offset = Math.min(Math.max(0, f.offset), Math.max(0, body.length - rows));
  if (at >= 0) {
    // Keep the selected task in sight, with its run's line when it is the run's first task.
    const top = at > 0 && !body[at - 1]!.task ? at - 1 : at;
    if (top < offset) offset = top;
    if (at >= offset + rows) offset = at - rows + 1;
  }
  const shown = body.slice(offset, offset + rows).map((b) => b.line);
  const more = body.length - offset - rows;
  const head = header(cols, width);
  if (offset > 0 || more > 0) {
    const note = `${offset > 0 ? `↑${offset}` : ""}${offset > 0 && more > 0 ? " " : ""}${more > 0 ? `↓${more}` : ""}`;
    const text = head[0]!.text;
    head[0] = { ...head[0]!, text: `${text.slice(0, Math.max(0, width - note.length - 1))} ${note}` };
  }
  while (shown.length < rows) shown.push([{ text: "" }]);
  const bottom: Line = f.message
    ? [{ text: clip(f.message.text, width), tone: f.message.tone, bold: true }]
    : detailLine(f.view, f.selected, width, f.now);
  return {
    lines: [titleLine(f.view, width, f.scope), head, ...shown, bottom, keysLine(f.keys, width)],
    offset,
  };
}
