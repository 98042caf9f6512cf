import { z } from "zod";
import { Usage } from "./agent-result.js";
import { Budget } from "./assignments.js";
import { PredictedCollision } from "./collision.js";

/** One try of the planner: what termorch found wrong in what it wrote (none: the try was taken). */
export const PlanTry = z.strictObject({
  try: z.number().int().min(1),
  problems: z
    .array(z.string())
    .describe("What `termorch validate` (and termorch's own checks of a plan) found; empty: valid"),
  /** Its usage as its CLI reported it; null: none reported. */
  usage: Usage.nullable(),
  duration_ms: z.number().int().min(0),
});
export type PlanTry = z.infer<typeof PlanTry>;

/**
 * `termorch plan`'s answer (its `--json`, and MCP `plan`): the assignments file the planner wrote
 * and termorch validated, and its plan as `validate` shows it.
 */
export const PlanAnswer = z
  .strictObject({
    valid: z.literal(true),
    file: z.string().describe("The assignments file written"),
    plan_dir: z
      .string()
      .describe(
        "The folder beside it that holds each task's context file (tasks/<id>.md) and the planner's milestones.md and decisions.md",
      ),
    run_id: z.string(),
    tasks: z.array(
      z.strictObject({
        id: z.string(),
        agent: z.string(),
        dependencies: z.array(z.string()),
        allowed_paths: z.array(z.string()).describe("The files it expects to own; empty: any"),
        context_path: z.string(),
      }),
    ),
    waves: z.array(z.array(z.string())),
    critical_path: z.array(z.string()),
    collisions: z.array(PredictedCollision),
    tests_cmd: z.string().nullable().describe("The run's tests_cmd the planner gave; null: none"),
    milestones: z.string().nullable().describe("milestones.md in plan_dir; null: the planner wrote none"),
    decisions: z.string().nullable().describe("decisions.md in plan_dir; null: the planner wrote none"),
    planner: z.strictObject({
      agent: z.string(),
      tries: z.array(PlanTry).describe("Every try, the feedback each was given after it"),
      usage: Usage.nullable().describe("Its tries' usage summed (its cost); null: its CLI reported none"),
      budget: Budget.nullable().describe(
        "What its tries may spend (--max-cost-usd, --max-tokens, else its config entry's budget): no try starts once it is spent; null: no limit",
      ),
      duration_ms: z.number().int().min(0),
      prompt_bytes: z.number().int().min(0).describe("The size of its first prompt"),
      logs: z.string().describe("The planning session's folder: its prompts, logs and ledger"),
    }),
  })
  .describe("termorch plan's answer: a validated assignments file from an objective");
export type PlanAnswer = z.infer<typeof PlanAnswer>;
