import type { CollisionOutcome } from "../contract/collision.js";
import type { Report } from "../contract/report.js";
import type { BoundaryWhy } from "../contract/session-handoff.js";
import { outputLogOf } from "../fs/output-log.js";
import type { Redactor } from "../redact/redactor.js";
import { buildReport, type MergeOutcome, type RunError } from "../report/build.js";
import type { TaskRecorder } from "../task/recorder.js";
import type { RunPlan } from "../task/run-plan.js";
import { agentOf } from "../task/task-plan.js";

/** The run's report, redacted, from its tasks as recorded and the merge's outcome. */
export function runReport(
  run: RunPlan,
  recorder: Pick<TaskRecorder, "all" | "conflicts">,
  redactor: Redactor,
  o: {
    merge: MergeOutcome;
    validation: Report["summary"]["validation"];
    peak: number;
    error: RunError | null;
    cancelled: boolean;
    /** It stopped at a wave boundary, and why; null: it did not. */
    stopped: BoundaryWhy | null;
    /** Its predicted collisions and what became of them. */
    collisions?: readonly CollisionOutcome[];
    /** The tmux socket the run's sessions are on; null when none is (a dry run, a run on workers). */
    socket: string | null;
    dryRun: boolean;
  },
): Report {
  const tasks = recorder.all();
  return redactor.redactDeep(
    buildReport({
      runId: run.runId,
      startedAt: run.startedAt,
      finishedAt: Date.now(),
      dryRun: o.dryRun,
      waves: run.waves.waves,
      tasks: [...tasks],
      outputLogs: new Map(
        tasks.map((t) => {
          const plan = run.plans.get(t.id);
          const tty = plan ? agentOf(plan, t.current.agentIndex).tty : false;
          return [t.id, t.result.logs ? outputLogOf(run.runDir, t.result.logs, tty) : "stderr"];
        }),
      ),
      escalations: new Map(
        [...run.plans].map(([id, p]) => [
          id,
          p.agents.slice(1).map((a) => ({ agent: a.name, argv: a.argv })),
        ]),
      ),
      merge: { ...o.merge, conflicts: [...recorder.conflicts, ...o.merge.conflicts] },
      onConflict: run.settings.on_conflict,
      onGateFailure: run.settings.on_gate_failure,
      validation: o.validation,
      cancelled: o.cancelled,
      stopped: o.stopped,
      ...(o.collisions ? { collisions: o.collisions } : {}),
      error: o.error,
      workspace: run.input.workspace,
      tmuxSocket: o.socket,
      criticalPath: run.waves.criticalPath,
      maxParallel: run.settings.max_parallel,
      peakParallelism: o.peak,
      budget: run.settings.budget ?? undefined,
    }),
  );
}
