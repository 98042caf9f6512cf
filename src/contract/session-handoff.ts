import { z } from "zod";

/** Why a run stopped, in the words of the seed (autonomous-orchestration-spec.md, 3.3). */
export const SessionStopReason = z.enum([
  "context_limit",
  "wave_complete",
  "hitl_gate",
  "budget",
  "error",
  "scope_complete",
]);
export type SessionStopReason = z.infer<typeof SessionStopReason>;

/** Why a run stopped at a wave boundary: `termorch stop --at-boundary`, or an approval's timeout. */
export const BoundaryWhy = SessionStopReason.extract(["wave_complete", "hitl_gate"]);
export type BoundaryWhy = z.infer<typeof BoundaryWhy>;

/**
 * `handoff.json`, beside the report: where a run stands when it ends, and how to go on, in the
 * seed's session handoff shape (autonomous-orchestration-spec.md, 3.2); its names are the seed's.
 */
export const SessionHandoff = z
  .strictObject({
    type: z.literal("session_handoff"),
    schema_version: z.literal(1),
    timestamp: z.string().describe("When the run ended (ISO 8601)"),
    session_id: z.string().describe("The run's id: `termorch resume` takes its directory"),
    run_dir: z.string(),
    stop_reason: SessionStopReason.describe(
      "`wave_complete`: stopped at a wave boundary (`termorch stop --at-boundary`); `hitl_gate`: a person's approval did not come within its timeout_s (on_timeout stop); `budget`: its budget stopped it; `error`: tasks failed or termorch could not go on; `scope_complete`: every task is done. (`context_limit` is the seed's, never termorch's.)",
    ),
    progress: z.strictObject({
      completed_tasks: z.array(z.string()).describe("Tasks that succeeded: a resume runs none of them again"),
      current_wave: z
        .number()
        .int()
        .min(0)
        .describe("The first wave (1-based) with a task not done; 0: none"),
      total_waves: z.number().int().min(0),
      waves_remaining: z.number().int().min(0).describe("Waves with a task not done"),
    }),
    resume: z.strictObject({
      command: z.string().nullable().describe("What goes on from here; null: nothing to resume"),
      next_tasks: z
        .array(z.string())
        .describe("The tasks a resume starts first: not started, their dependencies done"),
      blockers: z
        .array(z.string())
        .describe("What holds the run besides: waits for a person, failed tasks, a spent budget"),
    }),
    context_snapshot: z.strictObject({
      usage_percent: z
        .number()
        .nullable()
        .describe("Tokens used of the run's max_tokens, in percent; null without one"),
      tokens_used: z
        .number()
        .int()
        .min(0)
        .describe("Input and output tokens of every attempt and review so far"),
      tokens_remaining: z.number().nullable().describe("What max_tokens leaves; null without one"),
    }),
  })
  .describe("Where a run stands when it ends, and how to go on (the seed's session handoff)");
export type SessionHandoff = z.infer<typeof SessionHandoff>;

/** `<private>/stop`, written by `termorch stop --at-boundary` (or MCP `stop`): the driver stops at its boundary. */
export const StopRequest = z.strictObject({
  at: z.literal("boundary"),
  /** Who: the OS user, or "mcp". */
  by: z.string(),
  requested_at: z.string(),
});
export type StopRequest = z.infer<typeof StopRequest>;
