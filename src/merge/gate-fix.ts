import { mkdirSync } from "node:fs";
import { dirname, join } from "node:path";
import type { Gate } from "../contract/report.js";
import type { RedoProgress } from "../contract/state.js";
import { errorText } from "../errors.js";
import { writeFileAtomic } from "../fs/atomic.js";
import { writeFresh } from "../fs/no-follow.js";
import { collectArtifacts } from "../task/artifacts.js";
import type { AttemptSide } from "../task/attempt.js";
import { attemptAndGate, type Verdict } from "../task/execute.js";
import { killPoint, probePoint } from "../task/faults.js";
import { feedbackSection } from "../task/feedback.js";
import { type FailedAttempt, feedbackFacts, type GateFindings } from "../task/feedback-facts.js";
import { agentOf, type TaskPlan } from "../task/task-plan.js";
import type { TaskRun } from "../task/task-run.js";
import type { TestsRan } from "../task/tests-gate.js";
import { short } from "./recovery.js";
import {
  earlierResult,
  endRedoAttempt,
  keepEarlier,
  prepareRedo,
  putBack,
  type RedoEnd,
  redoFinished,
} from "./redo.js";
import { runLevelTests } from "./run-level-gates.js";

/** The culprit a bisect found, for its first fix. */
export interface NewFix {
  /** The integration of the tasks merged before it (the base for the first): the fix's start. */
  start: string;
  mergedBefore: string[];
  /** The red gate on the merge with it (its first red probe), and how it ran. */
  gate: Gate;
  ran: TestsRan | null;
  probeCommit: string;
}

/**
 * merge.on_gate_failure "bisect_and_fix": the culprit is given a redo whose cause is the gate
 * (step `recorded`: its feedback section written, its earlier result kept). The merge then goes
 * on task by task (ordered.ts) and runs it at the culprit's place: fixTask.
 */
export async function recordGateFix(side: AttemptSide, taskId: string, fix: NewFix): Promise<void> {
  const t = side.recorder.get(taskId);
  const before = t.git.commit!;
  const taskStart = t.git.startCommit ?? side.run.git!.baseCommit;
  await recordFix(side, t, side.run.plans.get(taskId)!, {
    n: 1,
    start: fix.start,
    mergedBefore: fix.mergedBefore,
    gate: fix.gate,
    failed: {
      t,
      agent: t.history.at(-1)?.agent ?? t.agent,
      timeoutS: undefined,
      reason: "validation",
      detail: `${fix.gate.name} failed on the merge of the tasks up to ${taskId} (${short(fix.probeCommit)}): ${fix.gate.detail}`,
      found: fix.ran ? { tests: fix.ran } : {},
      decision: null,
      work: { from: taskStart, to: before },
    },
  });
}

/**
 * The culprit's fixes, each a new attempt of the task from the integration of the tasks before
 * it, its prompt carrying what went wrong (the run-level gate's output, or its own gates'
 * failure), until one passes its gates and the run-level tests_cmd passes on its result (the
 * merge with it), or `gate_fix_attempts` are used up: then its earlier result is put back. The
 * steps are the conflict redo's (redo.ts), written to the task's journal line before each is
 * taken, so a resume goes on where it was and runs no attempt twice.
 */
export async function fixTask(side: AttemptSide, taskId: string): Promise<RedoEnd> {
  const { run, recorder, ports } = side;
  const t = recorder.get(taskId);
  const p = run.plans.get(taskId)!;
  const of = run.settings.gate_fix_attempts;
  try {
    for (;;) {
      const redo = t.redo.progress!;
      if (redo.step === "restoring") return await giveUp(side, t, p);
      if (redo.step === "recorded") await prepareRedo(side, t, p);
      const found: GateFindings = {};
      const verdict = await attemptAndGate(side, t, p, t.current.dir !== null, found);
      if (verdict === "detached") return "detached";
      let gate: Gate | null = null;
      let ran: TestsRan | null = null;
      if (verdict.reason === null) {
        probePoint(run.fault, "fix", join(run.privateDir, "gates", "fix.json"));
        const judged = await runLevelTests(run, ports, side.stop, t.git.commit!, "fix", (r) => {
          ran = r;
        });
        if (judged === "detached") return "detached";
        gate = judged;
      }
      const outcome: Verdict =
        verdict.reason !== null || gate === null
          ? verdict
          : gate.passed === true
            ? { reason: null, detail: null }
            : {
                reason: "validation",
                detail: `${gate.name} failed on the merge with its new result: ${gate.detail}`,
              };
      // Its attempt record and its entry: how it ended, the run-level gate included.
      const ended = endRedoAttempt(side, t, outcome, gate);
      if (outcome.reason === null) {
        const artifacts = await collectArtifacts(run, ports, t, p);
        await redoFinished(side, t, ended, false);
        await recorder.transition(
          taskId,
          { to: "success" },
          {
            redo: { progress: null, done: [...t.redo.done, ended] },
            ...(artifacts ? { result: { artifacts } } : {}),
          },
        );
        await killPoint(run.fault, "kill-after-status", taskId, t.attempts);
        return { kind: "resolved", commit: t.git.commit!, start: redo.start, before: redo.before };
      }
      const last = redo.n >= of || ended.outcome === "cancelled";
      await redoFinished(side, t, ended, last);
      if (t.current.session) await ports.runner.close([t.current.session]);
      if (last) {
        recorder.checkpoint(taskId, {
          redo: { progress: { ...redo, step: "restoring" }, done: [...t.redo.done, ended] },
        });
        await killPoint(run.fault, "kill-after-redo-restoring", taskId);
        return await giveUp(side, t, p);
      }
      recorder.note(taskId, { redo: { progress: null, done: [...t.redo.done, ended] } });
      await recordFix(side, t, p, {
        n: redo.n + 1,
        start: redo.start,
        mergedBefore: redo.mergedBefore,
        gate: gate ?? null,
        previous: redo,
        failed: {
          t,
          agent: agentOf(p, t.current.agentIndex).name,
          timeoutS: agentOf(p, t.current.agentIndex).timeoutS,
          reason: outcome.reason!,
          detail: outcome.detail,
          found: ran ? { ...found, tests: ran } : found,
          decision: null,
          work: { from: redo.start, to: t.git.commit ?? redo.start },
        },
      });
    }
  } catch (error) {
    // The record never stays mid-fix: the earlier result is put back, then the error goes on.
    if (t.redo.progress !== null && t.redo.progress.step !== "recorded")
      await putBack(side, t, p).catch((e: unknown) =>
        ports.log.warn({ task: taskId, err: errorText(e) }, "could not put back the task's earlier result"),
      );
    throw error;
  }
}

/**
 * A fix recorded: the feedback section (what went wrong in the attempt before, with the red
 * gate's output) written privately for the prompt and redacted as
 * `artifacts/<task>/attempt-<n>/feedback.md`, the earlier result kept (first fix), the step
 * checkpointed.
 */
async function recordFix(
  side: AttemptSide,
  t: Readonly<TaskRun>,
  p: TaskPlan,
  o: {
    n: number;
    start: string;
    mergedBefore: string[];
    /** The red run-level gate the section tells of; null when the attempt's own gates failed. */
    gate: Gate | null;
    failed: FailedAttempt;
    previous?: RedoProgress;
  },
): Promise<void> {
  const { run, ports, recorder } = side;
  const attempt = t.attempts + 1;
  const before = o.previous?.before ?? t.git.commit!;
  const taskStart = o.previous?.restore.startCommit ?? t.git.startCommit ?? run.git!.baseCommit;
  const kept = o.previous?.kept ?? `attempt-${attempt}`;
  if (o.n === 1) await keepEarlier(side, t, p, { dir: kept, taskStart, before });
  const facts = await feedbackFacts(run, ports, o.failed, "integration");
  if (o.gate) facts.failed_gates.push({ name: o.gate.name, detail: ports.redactor.redact(o.gate.detail) });
  const section = feedbackSection(facts, { runDir: run.runDir });
  const sectionFile = join(run.privateDir, "redo", t.id, `attempt-${attempt}.md`);
  mkdirSync(dirname(sectionFile), { recursive: true, mode: 0o700 });
  await writeFileAtomic(sectionFile, section, 0o600);
  // The task's artifacts folder, which its agent could write: nothing here follows a link it left.
  writeFresh(p.workspace.artifactsDir, `attempt-${attempt}/feedback.md`, ports.redactor.redact(section));
  const detail = o.failed.detail ?? o.failed.reason;
  const progress: RedoProgress = {
    cause: "gate",
    kept,
    n: o.n,
    attempt,
    start: o.start,
    before,
    step: "recorded",
    with: [],
    files: [],
    detail,
    mergedBefore: o.mergedBefore,
    units: [],
    section: sectionFile,
    startedAt: ports.now(),
    restore: o.previous?.restore ?? earlierResult(t, before),
  };
  await ports.ledger.append(
    "merge.redo_started",
    {
      cause: "gate",
      redo: o.n,
      attempt,
      conflicted_with: [],
      files: [],
      detail,
      start_commit: o.start,
      before_commit: before,
    },
    t.id,
  );
  recorder.checkpoint(t.id, { redo: { progress } });
  await killPoint(run.fault, "kill-after-fix-recorded", t.id);
}

/** The fixes did not make the gate pass: the earlier result is back, and the merge goes on with it. */
async function giveUp(side: AttemptSide, t: Readonly<TaskRun>, p: TaskPlan): Promise<RedoEnd> {
  await putBack(side, t, p);
  return { kind: "gave_up", why: fixGaveUp(t, side.run.settings.gate_fix_attempts) };
}

/** Why the merge halted after a culprit's fixes: what the last one came to. */
export function fixGaveUp(t: Readonly<TaskRun>, of: number): string {
  const last = t.redo.done.findLast((r) => r.cause === "gate");
  if (!last) return `${t.id}'s fix was stopped`;
  const how =
    last.outcome === "cancelled"
      ? "the run was stopped"
      : `${last.reason}${last.reason_detail ? `: ${last.reason_detail}` : ""}`;
  return `${t.id}'s fixes did not make the run-level gate pass (fix ${last.redo}/${of}: ${how})`;
}
