import type { Gate } from "../contract/report.js";
import { fenced } from "./feedback.js";

/** What a reviewer is told: the work asked for, its change, its handoff, its gates, and where to answer. */
export interface ReviewBrief {
  /** `Review of task a, attempt 2`, `Review of run r: ...`. */
  heading: string;
  /** Whose work it is, in a sentence. */
  intro: string;
  /** What was asked: the task's context file as its agent was given it (the tasks' for a run). */
  context: string;
  change: { from: string; to: string; stat: string; patch: string; cut: boolean };
  /** Its ALTO handoff as its agent filled it in; null: none asked for. */
  handoff: string | null;
  gates: readonly Gate[];
  /** Absolute path of the verdict file ($TERMORCH_VERDICT). */
  verdict: string;
  /** The review's own instructions (`success_criteria.review.instructions`); null: none. */
  instructions: string | null;
}

const EXAMPLE = JSON.stringify(
  {
    verdict: "request_changes",
    summary: "The endpoint works, but an empty name is accepted.",
    comments: [{ file: "src/users.ts", line: 42, body: "Reject an empty name with a 400, and test it." }],
  },
  null,
  2,
);

/** The reviewer's prompt. Pure: the brief arrives redacted and bounded (review.ts). */
export function reviewPrompt(b: ReviewBrief): string {
  const gates = b.gates
    .map(
      (g) =>
        `- ${g.name}: ${g.passed === true ? "passed" : g.passed === false ? "failed" : "not checked"}${g.detail ? ` (${g.detail})` : ""}`,
    )
    .join("\n");
  return [
    `# ${b.heading}`,
    "",
    `(Written by termorch.) You are the reviewer of other agents' work. ${b.intro} Judge whether the change does what was asked, correctly and completely, without breaking what was there.`,
    "",
    "Your working directory is a copy of the repository with the change applied. Read any file you need there, and run `git diff " +
      `${b.change.from} ${b.change.to}\` for the whole change. Do not change, create or delete any file but your verdict: whatever you change is discarded, and named in the report.`,
    ...(b.instructions ? ["", "## What to look for", "", b.instructions] : []),
    "",
    "## What was asked",
    "",
    ...fenced(b.context, "markdown"),
    "",
    "## The change",
    "",
    ...fenced(b.change.stat || "(no files changed)", ""),
    "",
    ...(b.change.cut
      ? [
          `The patch is longer than termorch quotes: its start is below; \`git diff ${b.change.from} ${b.change.to}\` shows all of it.`,
          "",
        ]
      : []),
    ...fenced(b.change.patch, "diff"),
    ...(b.handoff === null ? [] : ["", "## Its handoff", "", ...fenced(b.handoff, "markdown")]),
    "",
    "## termorch's checks",
    "",
    gates || "- none",
    "",
    "## Your verdict",
    "",
    `Write your verdict as JSON to the file ${b.verdict} (also in $TERMORCH_VERDICT), then stop. Either \`{"verdict": "approve", "summary": "..."}\`, or \`"verdict": "request_changes"\` with at least one comment saying what must change, each with the file (relative to the repository's root) and line it is about where there is one:`,
    "",
    ...fenced(EXAMPLE, "json"),
    "",
    "Request changes only for what must change before the work is merged: each comment is given to the agent that does the task again. A verdict that is missing or not valid JSON of this shape counts as no approval.",
    "",
  ].join("\n");
}
