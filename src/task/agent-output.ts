import { join } from "node:path";
import { limitOf } from "../agent/rate-limits.js";
import {
  type OutputFormat,
  parseAgentOutput,
  parseTranscript,
  SIDE_OUTPUTS,
  type TranscriptFormat,
} from "../agent/results.js";
import { findSession } from "../agent/session-files.js";
import type { AgentResult, Usage } from "../contract/agent-result.js";
import { readPartsSync } from "../fs/file-range.js";
import type { Redactor } from "../redact/redactor.js";
import { withCost } from "../spend/pricing.js";
import type { AttemptOutcome } from "./outcome.js";
import type { AgentPlan } from "./task-plan.js";
import type { TaskRun } from "./task-run.js";

/**
 * What the agent's CLI said of one attempt's work: its result, and its usage with the cost known
 * where it can be (kept on the attempt's record, and added to the task's).
 */
export interface AgentAccount {
  agentResult: AgentResult | null;
  usage: Usage | null;
}

/**
 * What the agent's CLI said about its work (a preset's JSON on stdout, read from the log, which
 * is redacted already), and an error it reported while exiting 0, which fails the attempt with
 * reason agent_error.
 */
export function agentOutcome(
  runDir: string,
  redactor: Redactor,
  /** Its logs, and when it started (its sessions are those since). */
  t: { result: Pick<TaskRun["result"], "logs">; current: Pick<TaskRun["current"], "startedAt"> },
  agent: Pick<AgentPlan, "usageFile" | "sessions" | "env" | "price">,
  /** Where it ran (its sessions are found by it). */
  cwd: string,
  format: OutputFormat,
  attempt: AttemptOutcome & { record: { exit_code: number | null } | null },
  now: number,
): { outcome: AttemptOutcome; account: AgentAccount } {
  const stdout = readLogTail(join(runDir, t.result.logs!.stdout));
  let stderr: string | null = null;
  const stderrText = (): string => {
    stderr ??= readLogTail(join(runDir, t.result.logs!.stderr));
    return stderr;
  };
  const parsed = parseAgentOutput(format, stdout, {
    // Up to 16 MiB each: only what the CLI's parser reads.
    stderr: SIDE_OUTPUTS[format].includes("stderr") ? stderrText() : "",
    usageFile: SIDE_OUTPUTS[format].includes("usageFile") ? readLogTail(agent.usageFile) : "",
  });
  let { result, usage } = parsed;
  // What its output leaves out (cn prints neither tokens nor a session id), from the session its
  // CLI kept.
  const found =
    agent.sessions !== null && (usage === null || result?.session_id === null)
      ? findSession(agent.sessions, { env: agent.env, cwd, since: t.current.startedAt ?? 0 })
      : null;
  if (found) {
    const session = parseTranscript(found.format, redactor.redact(readLogTail(found.path)));
    usage = usage ?? session.usage;
    if (result && result.session_id === null)
      result = { ...result, session_id: session.result?.session_id ?? null };
  }
  const account = { agentResult: result, usage: withCost(usage, agent.price) };
  // Its CLI kept the budget termorch gave it (the preset's budget_flag): what is left is spent.
  if (parsed.atBudgetCap && attempt.reason !== "timeout" && attempt.reason !== "cancelled")
    return {
      outcome: {
        reason: "budget",
        detail: `its CLI stopped at the budget it was given${result?.summary ? `: ${result.summary.slice(0, 500)}` : ""}`,
      },
      account,
    };
  const failed = attempt.reason === "exit_code" || (attempt.reason === null && result?.is_error === true);
  // Its CLI gave up on a rate limit or a usage cap: what follows is the limit's (wait, or fail).
  const limit = failed
    ? limitOf(format, { stdout, stderr: stderrText(), exitCode: attempt.record?.exit_code ?? null }, now)
    : null;
  if (limit)
    return {
      outcome: {
        reason: "rate_limited",
        detail: `its CLI gave up on ${limit.kind === "cap" ? "a usage cap" : "a rate limit"}${limit.status ? ` (${limit.status})` : ""}${limit.resetsAt ? `, which lifts at ${new Date(limit.resetsAt).toISOString()}` : ""}: ${limit.said}`,
        resetsAt: limit.resetsAt,
      },
      account,
    };
  if (attempt.reason !== null || !result?.is_error) return { outcome: attempt, account };
  return {
    outcome: {
      reason: "agent_error",
      detail: `its agent reported an error while exiting 0${result.summary ? `: ${result.summary.slice(0, 500)}` : ""}`,
    },
    account,
  };
}

/**
 * An interactive agent's account of its work, from the transcript its CLI keeps of the session
 * (redacted here: it is the CLI's file, not a log of termorch's).
 */
export function transcriptAccount(
  redactor: Redactor,
  t: Readonly<TaskRun>,
  transcript: { format: TranscriptFormat; path: string } | null,
  agent: Pick<AgentPlan, "price">,
): AgentAccount | null {
  if (!transcript) return null;
  const { result, usage } = parseTranscript(transcript.format, redactor.redact(readLogTail(transcript.path)));
  return { agentResult: result ?? t.result.agentResult, usage: withCost(usage, agent.price) };
}

/** A log's text, or its last 16 MiB (a CLI's final result is at its end). */
function readLogTail(path: string): string {
  return readPartsSync(path, [{ from: null, bytes: 16 * 1024 * 1024 }])?.parts[0]?.toString("utf8") ?? "";
}
