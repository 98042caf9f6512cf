import { z } from "zod";
import { jsonPath } from "./parse.js";

/**
 * The decision an agent may leave at `$TERMORCH_DECISION` for one attempt: the ledgerflow
 * protocol's decision envelope (../shared/seeds/ledgerflow-protocol.md, sections 4 to 6, v1.1).
 * termorch acts on `decision.status`: `completed` lets the gates decide, `escalate_to_max` hands
 * the task to the next agent of its escalation list, `blocked` ends it. An envelope that breaks
 * the section 6 rules is quarantined and counts as blocked (reason `invalid_decision`).
 *
 * Unknown fields are ignored (the seed expects new ones: `agent_profile`, hashes); an unknown
 * `schema_version` is not (the seed quarantines what it cannot read).
 */

/** The version this termorch reads; an envelope without one is read as it. */
export const DECISION_SCHEMA_VERSION = "1.1";

/** A string with something in it besides white space (the seed's "non-empty"). */
const Filled = (what: string) =>
  z
    .string()
    .min(1, { error: `${what} is empty`, abort: true })
    .refine((s) => s.trim() !== "", { error: `${what} is empty` });

const Confidence = z.number().min(0).max(1);

export const DecisionStatus = z
  .enum(["completed", "escalate_to_max", "blocked"])
  .describe(
    "completed: the work is done, termorch's gates decide as they would without a decision. escalate_to_max: this needs a stronger agent: the attempt ends without counting as a failure of this agent, and the next agent of the task's escalation list takes over (with none left, the task fails with reason `escalated`). blocked: the task cannot go on: it ends with reason `blocked` and this reason, it is not retried and its dependents are skipped",
  );
export type DecisionStatus = z.infer<typeof DecisionStatus>;

export const NextActor = z
  .enum(["worker", "planner", "human"])
  .describe("Who should act next: `human` on a blocked task reports it as needing a person (`needs_human`)");
export type NextActor = z.infer<typeof NextActor>;

const Verdict = {
  status: DecisionStatus,
  reason: Filled("reason").describe("Why, in a sentence or two (not empty)"),
  confidence: Confidence.describe("How sure the agent is, from 0 to 1"),
};

export const Evidence = z.object({
  type: z.enum(["file", "text", "uri", "line_ref"]).describe("What `ref` is"),
  ref: Filled("ref").describe("The file, text, URI or `path:line` it points at (not empty)"),
  note: z.string().optional(),
});

/** Everything of the envelope but status, reason and confidence, which the two forms place differently. */
const Rest = {
  schema_version: z
    .literal(DECISION_SCHEMA_VERSION, {
      error: (issue) =>
        `unknown version ${JSON.stringify(issue.input)}: termorch reads "${DECISION_SCHEMA_VERSION}" (or none)`,
    })
    .optional()
    .describe(`"${DECISION_SCHEMA_VERSION}", or absent; any other version is quarantined as invalid`),
  task_id: z.string().optional().describe("The task it is about (informative: termorch knows which)"),
  source: z.string().optional().describe("The agent or model that wrote it"),
  timestamp: z.string().optional().describe("When it was written (ISO 8601)"),
  trace: z
    .object({
      claim: Filled("claim").describe("The outcome in one sentence (not empty)"),
      evidence: z
        .array(Evidence)
        .describe("Typed anchors of the claim: files changed, lines, texts, URIs (may be empty)"),
      protocols: z.array(z.string()).optional(),
      confidence: Confidence.optional(),
    })
    .describe("What the agent claims and what it rests on"),
  result: z
    .object({
      output: z
        .string()
        .optional()
        .describe("Optional for a coding task: its diff is its output (termorch keeps it as changes.patch)"),
      notes: z.string().optional().describe("Guidance for the next agent or person"),
      sensitive: z.boolean().optional(),
    })
    .optional(),
  routing: z
    .object({
      recommended_next_actor: NextActor.optional(),
      urgency: z.enum(["low", "medium", "high"]).optional(),
    })
    .optional(),
};

/** The envelope in the seed's shape: status, reason and confidence under `decision`. */
export const Decision = z
  .object({ ...Rest, decision: z.object(Verdict).describe("The agent's verdict on its attempt") })
  .describe("The ledgerflow decision envelope (v1.1), as termorch keeps it");
export type Decision = z.infer<typeof Decision>;

/** The same with status, reason and confidence at the top level, as agents often write it. */
const FlatDecision = z.object({ ...Rest, ...Verdict });

/**
 * What an agent may write at `$TERMORCH_DECISION` (`termorch schema decision`): the seed's
 * envelope, or the same with `status`, `reason` and `confidence` at the top level instead of
 * under `decision` (read as if they were under it).
 */
export const DecisionFile = z
  .union([Decision, FlatDecision])
  .describe(
    "An agent's decision about its attempt, at $TERMORCH_DECISION: the ledgerflow decision envelope (v1.1). `status`, `reason` and `confidence` go under `decision`, or at the top level instead",
  );

/** A decision file's content read: the envelope in the seed's shape, or what is wrong with it (each problem with its JSON path). */
export type ParsedDecision = { ok: true; decision: Decision } | { ok: false; problems: string[] };

const VERDICT_KEYS = ["status", "reason", "confidence"] as const;

/** Reads a parsed JSON value as a decision, the top-level form put in the seed's shape. */
export function parseDecision(value: unknown): ParsedDecision {
  if (typeof value !== "object" || value === null || Array.isArray(value))
    return { ok: false, problems: ["the decision is not a JSON object"] };
  const flat = VERDICT_KEYS.filter((k) => k in value);
  const nested = "decision" in value;
  if (nested && flat.length > 0)
    return {
      ok: false,
      problems: [`${flat.join(", ")} given both at the top level and under decision: give them in one place`],
    };
  if (!nested && flat.length > 0) {
    const parsed = FlatDecision.safeParse(value, { error: missing });
    if (!parsed.success) return { ok: false, problems: problemsOf(parsed.error) };
    const { status, reason, confidence, ...rest } = parsed.data;
    return { ok: true, decision: { ...rest, decision: { status, reason, confidence } } };
  }
  const parsed = Decision.safeParse(value, { error: missing });
  return parsed.success
    ? { ok: true, decision: parsed.data }
    : { ok: false, problems: problemsOf(parsed.error) };
}

/** A required field left out is "missing", rather than of the wrong type (undefined). */
function missing(issue: z.core.$ZodRawIssue): string | undefined {
  if (issue.code !== "invalid_type" || issue.input !== undefined) return undefined;
  return issue.path?.length === 1 && issue.path[0] === "decision"
    ? "missing (status, reason and confidence go under decision, or at the top level)"
    : "missing";
}

/** Each issue as `path: message`, the path as the input files' problems name it. */
function problemsOf(error: z.ZodError): string[] {
  return error.issues.map((issue) => `${jsonPath(issue.path)}: ${issue.message}`);
}
