import type { Usage } from "../contract/agent-result.js";
import { approvalLine, approvalView } from "../contract/approval.js";
import type { Budget } from "../contract/assignments.js";
import type { SessionHandoff, SessionStopReason } from "../contract/session-handoff.js";
import type { TaskRun } from "../contract/state.js";

/** What a run's session handoff is made from, once it ended. */
export interface HandoffInput {
  runId: string;
  runDir: string;
  now: number;
  tasks: readonly TaskRun[];
  /** Each task's wave (0-based), and how many waves there are. */
  level: ReadonlyMap<string, number>;
  totalWaves: number;
  stopReason: SessionStopReason;
  budget: Budget | undefined;
  /** Everything the run's agents and reviewers used. */
  usage: Usage | null;
}

/**
 * The seed's session handoff (contract/session-handoff.ts) of a run that ended: what is done,
 * which wave it is at, what a resume starts with, and what holds it besides. Pure.
 */
export function sessionHandoff(i: HandoffInput): SessionHandoff {
  const done = new Set(i.tasks.filter((t) => t.state === "success").map((t) => t.id));
  const open = i.tasks.filter((t) => !done.has(t.id));
  const waves = [...new Set(open.map((t) => i.level.get(t.id) ?? 0))].sort((a, b) => a - b);
  const next = i.tasks.filter((t) => t.state === "pending" && t.dependencies.every((d) => done.has(d)));
  const resume = `termorch resume ${i.runDir}`;
  const blockers: string[] = [];
  for (const t of i.tasks) {
    if (t.waiting.approval && !t.waiting.approval.approved)
      blockers.push(`${t.id}: ${approvalLine(approvalView(t.waiting.approval)).replace("<run>", i.runId)}`);
    else if (t.state === "failed" || (t.state === "skipped" && t.reason !== "dependency_failed"))
      blockers.push(`${t.id} ${t.state}: ${t.reason ?? "?"}${t.detail ? ` (${t.detail})` : ""}`);
  }
  const used = (i.usage?.input_tokens ?? 0) + (i.usage?.output_tokens ?? 0);
  const max = i.budget?.max_tokens ?? null;
  const command =
    i.stopReason === "wave_complete" || i.stopReason === "hitl_gate"
      ? resume
      : i.stopReason === "budget"
        ? `${resume} ${i.budget?.max_cost_usd !== undefined ? "--max-cost-usd" : "--max-tokens"} <more>`
        : null;
  return {
    type: "session_handoff",
    schema_version: 1,
    timestamp: new Date(i.now).toISOString(),
    session_id: i.runId,
    run_dir: i.runDir,
    stop_reason: i.stopReason,
    progress: {
      completed_tasks: [...done],
      current_wave: waves.length ? waves[0]! + 1 : 0,
      total_waves: i.totalWaves,
      waves_remaining: waves.length,
    },
    resume: { command, next_tasks: next.map((t) => t.id), blockers },
    context_snapshot: {
      usage_percent: max ? Math.round((used / max) * 1000) / 10 : null,
      tokens_used: used,
      tokens_remaining: max === null ? null : Math.max(0, max - used),
    },
  };
}
