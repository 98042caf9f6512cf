import { join } from "node:path";
import type { Report } from "../contract/report.js";
import type { BoundaryWhy, SessionStopReason } from "../contract/session-handoff.js";
import { writeJsonAtomic } from "../fs/atomic.js";
import { HANDOFF_FILE } from "../fs/names.js";
import { sessionHandoff } from "../report/session-handoff.js";
import type { Ports } from "../task/ports.js";
import type { TaskRecorder } from "../task/recorder.js";
import type { RunPlan } from "../task/run-plan.js";

/** Why the run ended, in the seed's words: its stop at a boundary, else what its report says. */
export function stopReasonOf(report: Report, boundary: BoundaryWhy | null): SessionStopReason {
  if (boundary) return boundary;
  if (report.error) return "error";
  const byBudget =
    report.tasks.some((t) => t.reason === "budget") || report.summary.budget?.exhausted === true;
  if (byBudget) return "budget";
  return report.exit_code === 0 ? "scope_complete" : "error";
}

/**
 * `handoff.json` beside the report (the seed's session handoff: where the run stands, how to go
 * on), redacted, and its stop reason in the ledger.
 */
export async function writeHandoff(
  run: Pick<RunPlan, "runId" | "runDir" | "waves" | "settings">,
  recorder: Pick<TaskRecorder, "all">,
  ports: Pick<Ports, "ledger" | "redactor" | "now">,
  report: Report,
  boundary: BoundaryWhy | null,
): Promise<void> {
  const handoff = sessionHandoff({
    runId: run.runId,
    runDir: run.runDir,
    now: ports.now(),
    tasks: recorder.all(),
    level: run.waves.level,
    totalWaves: run.waves.waves.length,
    stopReason: stopReasonOf(report, boundary),
    budget: run.settings.budget ?? undefined,
    usage: report.summary.usage,
  });
  await writeJsonAtomic(join(run.runDir, HANDOFF_FILE), ports.redactor.redactDeep(handoff), 0o644);
  await ports.ledger.append("run.handoff", {
    stop_reason: handoff.stop_reason,
    file: HANDOFF_FILE,
    next_tasks: handoff.resume.next_tasks,
    blockers: handoff.resume.blockers.length,
  });
}
