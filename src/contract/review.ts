import { z } from "zod";
import { Usage } from "./agent-result.js";

/**
 * `success_criteria.review`: a reviewer agent judges the task's change once its other gates
 * passed. A name is short for `{ "agent": name }`; `false` turns off a review the run's
 * success_criteria or the config's defaults ask for.
 */
export const ReviewSetting = z
  .union([
    z.literal(false),
    z.string().min(1).describe("The reviewer agent's name (a config agent or a preset)"),
    z.strictObject({
      agent: z
        .string()
        .min(1)
        .describe("The reviewer agent (a config agent or a preset); ideally another model than the task's"),
      timeout_s: z
        .number()
        .positive()
        .optional()
        .describe("Seconds the review may take; default: the reviewer agent's own timeout"),
      instructions: z
        .string()
        .max(16 * 1024)
        .optional()
        .describe("What the reviewer is to look for besides the task itself (added to its prompt)"),
    }),
  ])
  .describe(
    "A reviewer agent judges the task's change after its other gates passed: it reads the task, the diff, the handoff and the gates' results in a copy of the task's work it cannot change, and writes a verdict at $TERMORCH_VERDICT (`termorch schema review-verdict`). `request_changes` fails the attempt with reason `review`, its comments in the next attempt's feedback section; a missing or invalid verdict fails it too. At the run level: the default of every task; `false` on a task: no review",
  );
export type ReviewSetting = z.infer<typeof ReviewSetting>;

/** One remark of a reviewer, where it applies. */
export const ReviewComment = z.object({
  file: z.string().min(1).optional().describe("The file it is about, relative to the repository's root"),
  line: z
    .number()
    .int()
    .positive()
    .optional()
    .describe("The line it is about, in the file as the task left it"),
  body: z.string().min(1).describe("What is wrong, and what to do instead"),
});
export type ReviewComment = z.infer<typeof ReviewComment>;

/**
 * What a reviewer writes at $TERMORCH_VERDICT. Keys it does not know are ignored; what it knows
 * must be right, or the verdict is invalid (never an approval).
 */
export const ReviewVerdict = z
  .object({
    verdict: z.enum(["approve", "request_changes"]),
    summary: z.string().optional().describe("The review in a few sentences"),
    comments: z
      .array(ReviewComment)
      .default([])
      .describe(
        "What must change (request_changes: at least one); remarks that need no change are not comments",
      ),
  })
  .refine((v) => v.verdict === "approve" || v.comments.length > 0, {
    message: "request_changes needs at least one comment saying what to change",
    path: ["comments"],
  })
  .describe("A reviewer's verdict on a task's change ($TERMORCH_VERDICT)");
export type ReviewVerdict = z.infer<typeof ReviewVerdict>;

/** An attempt's review, as its record keeps it. */
export const ReviewRecord = z
  .strictObject({
    agent: z.string().describe("The reviewer agent"),
    verdict: z
      .enum(["approve", "request_changes", "invalid"])
      .describe("`invalid`: it wrote no verdict, or one that does not validate"),
    comments: z.number().int().min(0).describe("How many comments it made"),
    file: z
      .string()
      .nullable()
      .describe("The kept verdict (redacted), relative to the run directory; null: none written"),
    discarded: z
      .array(z.string())
      .describe(
        "What the reviewer changed in its copy of the work (discarded, never merged): files, or `HEAD`",
      ),
    usage: Usage.nullable().describe(
      "Its tokens and cost (counted in the task's usage and the run's budget)",
    ),
  })
  .describe("The review of the attempt's change (success_criteria.review); null: none ran");
export type ReviewRecord = z.infer<typeof ReviewRecord>;

/** A review as a task runs it. */
export interface ReviewAsked {
  agent: string;
  timeout_s?: number | undefined;
  instructions?: string | undefined;
}

/**
 * The review a task asks for: its own `success_criteria.review`, else the run's, else the
 * config's default; null: none (or turned off with `false`).
 */
export function reviewAsked(...settings: (ReviewSetting | undefined)[]): ReviewAsked | null {
  const setting = settings.find((s) => s !== undefined);
  if (setting === undefined || setting === false) return null;
  return typeof setting === "string" ? { agent: setting } : setting;
}
