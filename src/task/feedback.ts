import type { FeedbackBlock } from "../contract/feedback-block.js";

/** The fence of the machine-readable block (`termorch schema feedback-block`). */
export const FEEDBACK_BLOCK_INFO = "json termorch-feedback";

/** At most this much of a failed command's output goes into a prompt: its end, where test runners sum up. */
export const TAIL_LINES = 200;
export const TAIL_BYTES = 16 * 1024;
const FAILURE_LINES = 20;
const FAILURE_LINE_CHARS = 300;
// Words test runners, compilers and interpreters print where they fail.
const LOOKS_FAILED =
  /\b(fail(ed|ure|s)?|errors?|assert(ion)?(error)?|expected|panic(ked)?|traceback|exception|not ok)\b|✗|✕|×/i;

/** The end of a command's output, bounded by lines and bytes, cut at a line boundary where it can be. */
export function tailOf(text: string): { tail: string; truncated: boolean } {
  let lines = text.split("\n");
  if (lines.at(-1) === "") lines = lines.slice(0, -1);
  let truncated = lines.length > TAIL_LINES;
  let tail = lines.slice(-TAIL_LINES).join("\n");
  if (Buffer.byteLength(tail) > TAIL_BYTES) {
    truncated = true;
    const bytes = Buffer.from(tail);
    tail = bytes.subarray(bytes.length - TAIL_BYTES).toString("utf8");
    // The first line is cut in the middle (and maybe a character too): drop it when another follows.
    const newline = tail.indexOf("\n");
    if (newline >= 0 && newline < tail.length - 1) tail = tail.slice(newline + 1);
    tail = tail.replace(/^\uFFFD+/, "");
  }
  return { tail, truncated };
}

/** The first lines that look like a failure, each bounded: where a long log says what broke. */
export function failureLines(text: string): string[] {
  const found: string[] = [];
  for (const line of text.split("\n")) {
    if (!LOOKS_FAILED.test(line)) continue;
    const trimmed = line.trimEnd();
    found.push(trimmed.length > FAILURE_LINE_CHARS ? `${trimmed.slice(0, FAILURE_LINE_CHARS)}…` : trimmed);
    if (found.length === FAILURE_LINES) break;
  }
  return found;
}

/** A fenced block whose fence no line of `text` can close. */
export function fenced(text: string, info = "text"): string[] {
  const longest = Math.max(2, ...[...text.matchAll(/^`{3,}/gm)].map((m) => m[0].length));
  const fence = "`".repeat(longest + 1);
  return [`${fence}${info}`, text, fence];
}

const list = (items: readonly string[]): string[] => items.map((i) => `- ${i}`);

const STARTS_FROM: Record<FeedbackBlock["next_starts_from"], string> = {
  base: "Your working tree starts again from the task's start: the failed attempt's changes are not in it. Do the task again, avoiding what went wrong.",
  last_work:
    "Your working tree holds the failed attempt's work as it left it: fix it, rather than starting over. The gates check the task's whole change from its start.",
  integration:
    "Your working tree holds the run's integration of the tasks merged before yours, and none of your earlier changes: do your task again on top of it so that the run's gate passes.",
};

/** What a reviewer asked to change, comment by comment, where it applies. */
function reviewPart(r: NonNullable<FeedbackBlock["review"]>): string[] {
  if (r.verdict === null)
    return [
      "",
      "### The review did not happen",
      "",
      `Its reviewer (${r.reviewer}) wrote no valid verdict, so the work was not approved. Nothing of this is yours to fix: do the task as asked, so that a reviewer can approve it.`,
      "",
      ...list(r.problems),
    ];
  const where = (c: { file: string | null; line: number | null }): string =>
    c.file ? `\`${c.file}${c.line ? `:${c.line}` : ""}\`: ` : "";
  return [
    "",
    "### The reviewer requested changes",
    "",
    `Its reviewer (${r.reviewer}) read the change and did not approve it.${r.summary ? ` Its summary: ${r.summary}` : ""} Make each of these changes:`,
    "",
    ...list(r.comments.map((c) => `${where(c)}${c.body.replace(/\n/g, "\n  ")}`)),
  ];
}

/**
 * The section appended to the prompt of the attempt after a failed one: what failed and why, in
 * Markdown for the agent, then the same facts as a JSON block for tools. Pure: the facts arrive
 * redacted and bounded (feedback-facts.ts).
 */
export function feedbackSection(f: FeedbackBlock, where: { runDir?: string } = {}): string {
  // The agent works in its worktree: a log is named where it is, not by the run's relative path
  // (the JSON block keeps the report's relative paths, as its schema says).
  const at = (path: string): string => (where.runDir ? `${where.runDir}/${path}` : path);
  const logs = (paths: readonly string[]): string => paths.map(at).join(", ");
  const logsIn = (text: string): string => text.replace(/(?<=^|[\s(])logs\//g, () => at("logs/"));
  const out: string[] = [
    "",
    "",
    "---",
    "",
    `## What went wrong in attempt ${f.attempt}`,
    "",
    `(Written by termorch.) Attempt ${f.attempt} of this task ran ${f.agent} and failed: \`${f.reason}\`${f.detail ? `: ${logsIn(f.detail)}` : "."}`,
    "",
    STARTS_FROM[f.next_starts_from],
  ];
  if (f.decision)
    out.push(
      "",
      "### What the agent decided",
      "",
      `It wrote the decision \`${f.decision.status}\`: ${f.decision.reason}`,
      ...(f.decision.notes ? ["", `Its notes: ${f.decision.notes}`] : []),
    );
  if (f.timeout_s !== null)
    out.push("", "### Timed out", "", `It was ended after ${f.timeout_s} s, its timeout.`);
  if (f.agent_error) out.push("", "### The agent's CLI reported an error", "", ...fenced(f.agent_error));
  if (f.screen)
    out.push(
      "",
      "### The prompt was not taken",
      "",
      "Its screen, as termorch last saw it:",
      "",
      ...fenced(f.screen),
    );
  if (f.secrets.length)
    out.push(
      "",
      "### A secret's value was in its changes",
      "",
      "Nothing was committed. Never write a secret's value into a file; found in:",
      "",
      ...list(f.secrets),
    );
  if (f.tests) {
    const t = f.tests;
    out.push("", "### tests_cmd failed", "", `\`${t.command}\` ended with ${t.how}.`);
    if (t.failure_lines.length)
      out.push(
        "",
        "The first lines of its output that look like a failure:",
        "",
        ...fenced(t.failure_lines.join("\n")),
      );
    out.push(
      "",
      t.truncated
        ? `The end of its output (${logs(t.logs)} hold all of it):`
        : `Its output (${logs(t.logs) || "not kept"}):`,
      "",
      ...fenced(t.tail || "(no output)"),
    );
  }
  if (f.missing_artifacts.length)
    out.push("", "### Required artifacts missing", "", ...list(f.missing_artifacts));
  if (f.handoff) {
    const h = f.handoff;
    out.push("", "### The handoff", "");
    if (h.missing_sections.length) out.push(`- Sections not filled in: ${h.missing_sections.join(", ")}`);
    if (h.listed_not_changed.length)
      out.push(`- Listed under Files Touched but not changed: ${h.listed_not_changed.join(", ")}`);
    if (h.changed_not_listed.length) out.push(`- Changed but not listed: ${h.changed_not_listed.join(", ")}`);
  }
  if (f.outside_allowed_paths.length)
    out.push("", "### Files changed outside allowed_paths", "", ...list(f.outside_allowed_paths));
  if (f.plan_problems)
    out.push(
      "",
      "### termorch validate refused the plan",
      "",
      "It was not taken. Write the whole plan again (the assignments file and every context file), fixing each of these:",
      "",
      ...list(f.plan_problems.map((p) => p.replace(/\n/g, "\n  "))),
    );
  if (f.review) out.push(...reviewPart(f.review));
  if (f.rejection)
    out.push(
      "",
      "### A person rejected the result",
      "",
      f.rejection.reason
        ? `${f.rejection.by} rejected it, saying:\n\n${fenced(f.rejection.reason).join("\n")}`
        : `${f.rejection.by} rejected it without saying why.`,
    );
  const told = new Set([
    "review",
    "approval",
    "tests_cmd",
    "run.tests_cmd",
    "required_artifacts",
    "handoff",
    "allowed_paths",
    "secrets",
    "validate",
  ]);
  const others = f.failed_gates.filter((g) => !told.has(g.name));
  if (others.length)
    out.push(
      "",
      "### Other gates that failed",
      "",
      ...list(others.map((g) => `${g.name}: ${g.detail ? logsIn(g.detail) : "failed"}`)),
    );
  out.push(
    "",
    "### What it did",
    "",
    `- Its summary: ${f.summary?.trim() ? f.summary.trim().replace(/\n/g, "\n  ") : "(its agent reported none)"}`,
    `- Files it changed: ${f.changed_files.length ? f.changed_files.join(", ") : "none"}`,
    "",
    ...fenced(JSON.stringify(f, null, 2), FEEDBACK_BLOCK_INFO),
    "",
  );
  return out.join("\n");
}
