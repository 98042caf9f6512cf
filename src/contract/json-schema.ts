import { z } from "zod";
import { Assignments } from "./assignments.js";
import { Config } from "./config.js";
import { ConflictBlock } from "./conflict-block.js";
import { DecisionFile } from "./decision.js";
import { FeedbackBlock } from "./feedback-block.js";
import { LedgerEntry } from "./ledger-events.js";
import { NotifyEvent } from "./notify.js";
import { PlanAnswer } from "./plan.js";
import { Report } from "./report.js";
import { ReviewVerdict } from "./review.js";
import { SessionHandoff } from "./session-handoff.js";
import { RunState } from "./state.js";
import { StatusFile } from "./status.js";
import { StatusView } from "./status-view.js";

export const schemas = {
  report: Report,
  assignments: Assignments,
  config: Config,
  status: StatusFile,
  state: RunState,
  "status-view": StatusView,
  "notify-event": NotifyEvent,
  /** One event of events.jsonl: its `type` and `data` (each line also has the chain's fields). */
  "ledger-event": LedgerEntry,
  /** The `json termorch-conflict` block of a redo's conflict section. */
  "conflict-block": ConflictBlock,
  /** The `json termorch-feedback` block of a feedback section (what went wrong in an attempt). */
  "feedback-block": FeedbackBlock,
  /** What an agent may write at $TERMORCH_DECISION: the ledgerflow decision envelope. */
  decision: DecisionFile,
  /** What a reviewer writes at $TERMORCH_VERDICT (success_criteria.review). */
  "review-verdict": ReviewVerdict,
  /** handoff.json beside the report: where the run stands and how to go on (the seed's session handoff). */
  "session-handoff": SessionHandoff,
  /** `termorch plan --json`'s answer: the plan written, and how the planner came to it. */
  plan: PlanAnswer,
} as const;
export type SchemaName = keyof typeof schemas;

/** JSON Schema generated from the zod schemas, which stay the single source of truth. */
export function jsonSchemaOf(name: SchemaName): unknown {
  return z.toJSONSchema(schemas[name], { io: "input", target: "draft-2020-12" });
}
