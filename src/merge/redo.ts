import { existsSync, mkdirSync, rmSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import type { Gate, Redo } from "../contract/report.js";
import type { RedoProgress } from "../contract/state.js";
import { errorText } from "../errors.js";
import { writeFileAtomic } from "../fs/atomic.js";
import { redoRefOf } from "../fs/names.js";
import { copyFresh, kindInside, writeFresh } from "../fs/no-follow.js";
import { diffPatch } from "../git/commit.js";
import { keepRef } from "../git/merge.js";
import { checkoutTaskWorktree, moveTaskBranch, removeWorktree } from "../git/worktree.js";
import { collectArtifacts } from "../task/artifacts.js";
import type { AttemptSide } from "../task/attempt.js";
import { amendedLast, closedHistory } from "../task/attempt-history.js";
import { attemptAndGate } from "../task/execute.js";
import { killPoint } from "../task/faults.js";
import type { TaskPlan } from "../task/task-plan.js";
import type { TaskRun } from "../task/task-run.js";
import { conflictFacts, type RedoConflict } from "./conflict-facts.js";
import { conflictSection } from "./conflict-section.js";

/** How a task's redos ended: a result the merge goes on with, or its earlier result put back. */
export type RedoEnd =
  | { kind: "resolved"; commit: string; start: string; before: string }
  | { kind: "gave_up"; why: string }
  | "detached";

/** A conflict the ordered merge found at a task's step, for its first redo. */
export interface NewRedo {
  /** The integration of the tasks merged before it: the redo's start. */
  start: string;
  mergedBefore: string[];
  units: RedoConflict["units"];
  detail: string;
}

/**
 * One task's redos of its conflict (merge.on_conflict "redo"), each a new attempt of the task
 * from `start`, its prompt carrying the conflict section, until one passes its gates or
 * `redo_attempts` are used up; then its earlier result is put back. Every step is written to the
 * task's journal line before it is taken (`redo.step`), so a resume goes on where it was:
 * recorded (the section written, nothing moved) → prepared (branch and worktree at the start;
 * the attempt is launched, or adopted once recorded) → restoring (putting the earlier result back).
 */
export async function redoTask(
  side: AttemptSide,
  taskId: string,
  conflict: NewRedo | null,
): Promise<RedoEnd> {
  const { run, recorder } = side;
  const t = recorder.get(taskId);
  const p = run.plans.get(taskId)!;
  if (t.redo.progress === null) {
    if (conflict === null) throw new Error(`task ${taskId} has no redo to go on with`);
    await recordRedo(side, t, p, conflict, 1);
  }
  try {
    for (;;) {
      const redo = t.redo.progress!;
      if (redo.step === "restoring") return await restore(side, t, p);
      if (redo.step === "recorded") await prepareRedo(side, t, p);
      const verdict = await attemptAndGate(side, t, p, t.current.dir !== null);
      if (verdict === "detached") return "detached";
      const ended = endRedoAttempt(side, t, verdict);
      if (verdict.reason === null) {
        const artifacts = await collectArtifacts(run, side.ports, t, p);
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
      const last = redo.n >= run.settings.redo_attempts || ended.outcome === "cancelled";
      await redoFinished(side, t, ended, last);
      if (t.current.session) await side.ports.runner.close([t.current.session]);
      if (last) {
        recorder.checkpoint(taskId, {
          redo: { progress: { ...redo, step: "restoring" }, done: [...t.redo.done, ended] },
        });
        await killPoint(run.fault, "kill-after-redo-restoring", taskId);
        return await restore(side, t, p);
      }
      recorder.note(taskId, { redo: { progress: null, done: [...t.redo.done, ended] } });
      await recordRedo(side, t, p, redo, redo.n + 1, redo);
    }
  } catch (error) {
    // The record never stays mid-redo: the earlier result is put back, then the error goes on.
    if (t.redo.progress !== null && t.redo.progress.step !== "recorded")
      await restore(side, t, p).catch((e: unknown) =>
        side.ports.log.warn(
          { task: taskId, err: errorText(e) },
          "could not put back the task's earlier result",
        ),
      );
    throw error;
  }
}

/** Step 1: the conflict section written (private prompt part, redacted copy), the earlier result kept, the step recorded. */
async function recordRedo(
  side: AttemptSide,
  t: Readonly<TaskRun>,
  p: TaskPlan,
  c: NewRedo,
  n: number,
  previous?: RedoProgress,
): Promise<void> {
  const { run, ports, recorder } = side;
  const before = previous?.before ?? t.git.commit!;
  const taskStart = previous?.restore.startCommit ?? t.git.startCommit ?? run.git!.baseCommit;
  // The task's artifacts folder, which its agent could write: nothing here follows a link it left.
  const dir = `redo-${n}`;
  const patchFile = join(p.workspace.artifactsDir, "redo-1", "before.patch");
  if (n === 1) await keepEarlier(side, t, p, { dir, taskStart, before });
  const { mergedBefore } = c;
  const facts = await conflictFacts(run, recorder, {
    task: t.id,
    redo: n,
    of: run.settings.redo_attempts,
    taskStart,
    before,
    start: c.start,
    mergedBefore,
    units: c.units,
    patchFile: relative(run.runDir, patchFile),
  });
  const section = conflictSection(facts);
  const sectionFile = join(run.privateDir, "redo", t.id, `${n}.md`);
  mkdirSync(dirname(sectionFile), { recursive: true, mode: 0o700 });
  await writeFileAtomic(sectionFile, section, 0o600);
  writeFresh(p.workspace.artifactsDir, `${dir}/conflict.md`, ports.redactor.redact(section));
  const withIds = [...new Set(c.units.flatMap((u) => u.with))];
  const files = [...new Set(c.units.flatMap((u) => u.paths))].sort();
  const progress: RedoProgress = {
    cause: "conflict",
    kept: "redo-1",
    n,
    attempt: t.attempts + 1,
    start: c.start,
    before,
    step: "recorded",
    with: withIds,
    files,
    detail: c.detail,
    mergedBefore,
    units: c.units,
    section: sectionFile,
    startedAt: ports.now(),
    restore: previous?.restore ?? earlierResult(t, before),
  };
  await ports.ledger.append(
    "merge.redo_started",
    {
      cause: "conflict",
      redo: n,
      attempt: progress.attempt,
      conflicted_with: withIds,
      files,
      detail: c.detail,
      start_commit: c.start,
      before_commit: before,
    },
    t.id,
  );
  recorder.checkpoint(t.id, { redo: { progress } });
  await killPoint(run.fault, "kill-after-redo-recorded", t.id);
}

/** What putBack restores of a task's record: its result before its first redo. */
export function earlierResult(t: Readonly<TaskRun>, before: string): RedoProgress["restore"] {
  return {
    startCommit: t.git.startCommit,
    commit: before,
    gates: t.result.gates,
    logs: t.result.logs,
    artifacts: t.result.artifacts,
    agentResult: t.result.agentResult,
    exitCode: t.result.exitCode,
    attemptDir: t.current.dir,
    attemptStartedAt: t.current.startedAt,
    finishedAt: t.finishedAt,
  };
}

/**
 * The task's result before its first redo, kept: its diff (redacted) and handoff in `dir` of its
 * artifacts, where putBack finds them, and its commit on a ref, so nothing of it is lost.
 */
export async function keepEarlier(
  side: Pick<AttemptSide, "run" | "ports">,
  t: Readonly<TaskRun>,
  p: TaskPlan,
  o: { dir: string; taskStart: string; before: string },
): Promise<void> {
  const { run, ports } = side;
  const root = run.git!.root;
  const patch = ports.redactor.redactBytes(await diffPatch(root, o.taskStart, o.before));
  writeFresh(p.workspace.artifactsDir, `${o.dir}/before.patch`, patch);
  copyIfThere(p.workspace.artifactsDir, "handoff.md", `${o.dir}/before-handoff.md`);
  await keepRef(root, redoRefOf(run.runId, t.id), o.before, `termorch: ${t.id}'s result before its redo`);
}

/**
 * Step 2: the task's branch moved (compare-and-swap) from where it is to the redo's start, a
 * fresh worktree checked out on it, the session of its earlier attempt closed. A gate's fix
 * (gate-fix.ts) takes the same step.
 */
export async function prepareRedo(side: AttemptSide, t: Readonly<TaskRun>, p: TaskPlan): Promise<void> {
  const { run, ports, recorder } = side;
  const redo = t.redo.progress!;
  const root = run.git!.root;
  await ports.pool?.settled();
  if (t.current.session) await ports.runner.close([t.current.session]);
  const from =
    t.redo.done.at(-1)?.before_commit === redo.before
      ? (t.redo.done.at(-1)?.commit ?? redo.start)
      : redo.before;
  const moved = await moveTaskBranch(
    root,
    p.workspace.branch!,
    from,
    redo.start,
    `termorch: redo ${redo.n} of ${t.id}`,
  );
  if (typeof moved === "object")
    throw new Error(
      `the branch ${p.workspace.branch} is at ${moved.elsewhere ?? "nothing"}, not at ${from} where its task left it: it was left alone`,
    );
  // The worktree of its earlier attempt (or what the pool left of it): a new one on the moved branch.
  if (p.workspace.worktree !== null) {
    if (existsSync(p.workspace.worktree)) await removeWorktree(root, p.workspace.worktree);
    await checkoutTaskWorktree(
      {
        repo: root,
        path: p.workspace.worktree,
        branch: p.workspace.branch!,
        copy: [...p.workspace.copyInRepo],
        pool: ports.pool ?? undefined,
      },
      [...p.workspace.includeInRepo],
    );
  }
  recorder.checkpoint(t.id, {
    git: { startCommit: redo.start, commit: null },
    current: { dir: null, startedAt: null },
    result: { gates: [] },
    redo: { progress: { ...redo, step: "prepared" } },
  });
  await killPoint(run.fault, "kill-after-redo-prepared", t.id);
}

/** What a redo's prompt was told, relative to the run directory: its conflict section, or a fix's feedback section. */
export function redoSectionFile(t: Readonly<TaskRun>): string {
  const redo = t.redo.progress!;
  return redo.cause === "gate"
    ? `artifacts/${t.id}/attempt-${redo.attempt}/feedback.md`
    : `artifacts/${t.id}/redo-${redo.n}/conflict.md`;
}

/**
 * A redo's attempt ended (a conflict's, or a gate fix's): its attempt record closed (it started
 * on the integration before the task, told what its section says), and its entry for the
 * report's `merge.redone`. `runGate`: a fix's run-level gate on the merge with its result.
 */
export function endRedoAttempt(
  side: Pick<AttemptSide, "ports" | "recorder" | "stop">,
  t: Readonly<TaskRun>,
  verdict: { reason: Redo["reason"]; detail: string | null },
  runGate: Gate | null = null,
): Redo {
  const redo = t.redo.progress!;
  const now = side.ports.now();
  const section = redoSectionFile(t);
  side.recorder.note(t.id, {
    history: amendedLast(closedHistory(t.history, now, { ...verdict, decision: null }), {
      started_from: "integration",
      feedback: section,
    }),
  });
  return {
    task: t.id,
    cause: redo.cause,
    redo: redo.n,
    attempt: t.attempts,
    conflicted_with: redo.with,
    files: redo.files,
    detail: redo.detail,
    start_commit: redo.start,
    before_commit: redo.before,
    commit: t.git.commit,
    outcome: verdict.reason === null ? "resolved" : side.stop.ending ? "cancelled" : "failed",
    reason: verdict.reason,
    reason_detail: verdict.detail,
    gates: t.result.gates,
    logs: t.result.logs,
    conflict_section: section,
    run_gate: runGate,
    started_at: new Date(redo.startedAt).toISOString(),
    finished_at: new Date(now).toISOString(),
  };
}

/** The ledger's `merge.redo_finished` of a redo (of either cause) that ended. */
export async function redoFinished(
  side: Pick<AttemptSide, "ports">,
  t: Readonly<TaskRun>,
  e: Redo,
  restored: boolean,
): Promise<void> {
  await side.ports.ledger.append(
    "merge.redo_finished",
    {
      cause: e.cause,
      redo: e.redo,
      attempt: e.attempt,
      outcome: e.outcome,
      reason: e.reason,
      detail: e.reason_detail,
      commit: e.commit,
      restored,
    },
    t.id,
  );
}

/**
 * No redo resolved the conflict (or the run was stopped): the branch, worktree, artifacts and
 * record go back to the task's earlier result, as if no redo had run, and the merge halts.
 */
async function restore(side: AttemptSide, t: Readonly<TaskRun>, p: TaskPlan): Promise<RedoEnd> {
  await putBack(side, t, p);
  return { kind: "gave_up", why: gaveUp(t, side.run.settings.redo_attempts) };
}

/** The branch, worktree, artifacts and record of a task mid-redo back at its earlier result. */
export async function putBack(side: AttemptSide, t: Readonly<TaskRun>, p: TaskPlan): Promise<void> {
  const { run, recorder } = side;
  const redo = t.redo.progress!;
  const root = run.git!.root;
  // Wherever a redo left it: its start, or what one of its attempts committed. Anything else is
  // not termorch's doing, and is left alone.
  const ours = new Set(
    [redo.start, ...t.redo.done.map((r) => r.commit), t.git.commit].filter((c) => c !== null),
  );
  const message = `termorch: ${t.id}'s redo put back`;
  let moved = await moveTaskBranch(
    root,
    p.workspace.branch!,
    t.git.commit ?? redo.start,
    redo.before,
    message,
  );
  if (typeof moved === "object" && moved.elsewhere !== null && ours.has(moved.elsewhere))
    moved = await moveTaskBranch(root, p.workspace.branch!, moved.elsewhere, redo.before, message);
  if (typeof moved === "object")
    throw new Error(
      `the branch ${p.workspace.branch} is at ${moved.elsewhere ?? "nothing"}: its earlier result was not put back`,
    );
  if (p.workspace.worktree !== null && existsSync(p.workspace.worktree))
    await side.ports.workspace.reset(p.workspace.worktree, redo.before, p.workspace.keepInRepo);
  copyIfThere(p.workspace.artifactsDir, `${redo.kept}/before.patch`, "changes.patch");
  copyIfThere(p.workspace.artifactsDir, `${redo.kept}/before-handoff.md`, "handoff.md");
  const r = redo.restore;
  await recorder.transition(
    t.id,
    { to: "success" },
    {
      git: { startCommit: r.startCommit, commit: r.commit },
      current: { dir: r.attemptDir, startedAt: r.attemptStartedAt },
      result: {
        gates: r.gates,
        logs: r.logs,
        artifacts: r.artifacts,
        agentResult: r.agentResult,
        exitCode: r.exitCode,
      },
      redo: { progress: null },
    },
  );
}

/** Why the merge halted after a task's redos: what the last one came to. */
export function gaveUp(t: Readonly<TaskRun>, of: number): string {
  const last = t.redo.done.at(-1);
  if (!last) return `${t.id}'s redo was stopped`;
  const how =
    last.outcome === "cancelled"
      ? "the run was stopped"
      : `${last.reason}${last.reason_detail ? `: ${last.reason_detail}` : ""}`;
  return `${t.id}'s redo did not resolve its conflict with ${last.conflicted_with.join(", ") || "the tasks before it"} (redo ${last.redo}/${of}: ${how})`;
}

/** `from` copied to `to` in a task's artifacts folder (`to` removed when `from` is not there), through no link. */
export function copyIfThere(artifactsDir: string, from: string, to: string): void {
  if (kindInside(artifactsDir, from) === "file") copyFresh(artifactsDir, from, artifactsDir, to);
  else rmSync(join(artifactsDir, to), { force: true, recursive: true });
}
