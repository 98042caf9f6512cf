import { z } from "zod";

/** A diff the section quotes, cut at a bound, and the git command that shows all of it. */
const Excerpt = z.strictObject({
  diff: z.string().describe("The diff (unified, `a/` and `b/` prefixes); empty when there is none"),
  truncated: z.boolean().describe("Cut at termorch's bound: `see` shows all of it"),
  see: z.string().describe("The git command that shows the whole diff"),
});

/**
 * The machine-readable block at the end of a redo's conflict section (a fenced block whose info
 * string is `json termorch-conflict`): the same facts as the prose above it, for a tool or an
 * agent that parses rather than reads. In a redone task's prompt, in
 * `artifacts/<task>/redo-<n>/conflict.md` and in a halt's `artifacts/redo/<task>.md`.
 */
export const ConflictBlock = z
  .strictObject({
    schema_version: z.literal(1),
    task: z.string().describe("The task to redo"),
    redo: z.number().int().min(1).describe("Which of its redos this is"),
    of: z.number().int().min(1).describe("How many it may have (merge.redo_attempts)"),
    start_commit: z
      .string()
      .describe("Where it starts now: the integration of the tasks merged before it (its worktree's HEAD)"),
    before_commit: z.string().describe("Its earlier result, the one that conflicted"),
    merged_before: z.array(z.string()).describe("The tasks whose work start_commit holds, in merge order"),
    files: z.array(z.string()).describe("The conflicting files (both paths of a rename), sorted"),
    conflicts: z
      .array(
        z.strictObject({
          kind: z
            .string()
            .describe("What git said: content, content (binary), add/add, modify/delete, rename…"),
          paths: z.array(z.string()).describe("The paths of this conflict (a rename's: from, then to)"),
          with: z.array(z.string()).describe("The tasks merged before it whose changes it collides with"),
        }),
      )
      .describe("Each conflict git found"),
    others: z
      .array(
        z.strictObject({
          task: z.string(),
          summary: z.string().nullable().describe("What its agent reported it did; null when none"),
          changes: z
            .array(
              z.strictObject({
                status: z.string().describe("A added, M modified, D deleted, R renamed, T type changed"),
                path: z.string(),
                from: z.string().optional().describe("A rename's old path"),
              }),
            )
            .describe("Every file it changed"),
          handoff: z
            .string()
            .nullable()
            .describe("Its handoff, relative to the run directory; null when none"),
        }),
      )
      .describe("The tasks it conflicted with"),
    hunks: z
      .strictObject({
        theirs: Excerpt.describe(
          "What the tasks merged before it did to the conflicting files (its start to start_commit)",
        ),
        yours: Excerpt.describe("What its earlier result did to them (its start to before_commit)"),
      })
      .describe("Both sides' hunks of the conflicting files"),
    own_diff: z
      .strictObject({
        file: z.string().describe("Where its whole earlier diff is kept, relative to the run directory"),
        truncated: z.boolean().describe("The section quotes it cut"),
        see: z.string(),
      })
      .describe("Its whole earlier diff (quoted in the section above the block)"),
    previous: z
      .array(
        z.strictObject({
          redo: z.number().int().min(1),
          reason: z.string().nullable().describe("Why it failed (the report's reason)"),
          detail: z.string().nullable(),
          failed_gates: z.array(z.strictObject({ name: z.string(), detail: z.string() })),
        }),
      )
      .describe("Its earlier redos of this conflict that failed, and why"),
  })
  .describe("The `json termorch-conflict` block of a redo's conflict section");
export type ConflictBlock = z.infer<typeof ConflictBlock>;
