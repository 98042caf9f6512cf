import { z } from "zod";
import { Bisect, Culprit, Gate, Probe } from "./report.js";

/**
 * `<run-dir>/.termorch/<run>/merge-intent.json`: written (and flushed) right before the
 * target ref is moved, removed once the run is reported (or at once, when the ref did not
 * move). A resume that finds it knows an advance may have stopped half-way (ref moved, index
 * and work tree not yet), or completed without a report, and finishes, undoes or reports it
 * rather than merging again; it also holds what the report needs to say about the merge,
 * which the resumed process has not computed.
 */
export const MergeIntent = z.strictObject({
  /** The target ref, e.g. `refs/heads/main`. */
  ref: z.string(),
  /** Where the ref stood before the move (the index and work tree stand there too). */
  old: z.string(),
  /** Where the ref is being moved. */
  new: z.string(),
  /** The worktree that has the ref checked out, or null when none has. */
  worktree: z.string().nullable(),
  /** Run-level gates as evaluated, and on which commit. */
  gates: z.array(Gate),
  validation: z.enum(["passed", "failed", "skipped"]),
  validated_commit: z.string().nullable(),
  /** The tip the run was merged onto when the target had moved during the run, else null. */
  target_moved_to: z.string().nullable(),
});
export type MergeIntent = z.infer<typeof MergeIntent>;

/**
 * `<run-dir>/.termorch/<run>/refs.json`: every ref of the user's repository when the run
 * started, so that refs the agents created, moved or deleted can be found (a resume reads it
 * back).
 */
export const RefsSnapshot = z.strictObject({
  /** Epoch ms. */
  taken_at: z.number(),
  /** Full ref name to object id. */
  refs: z.record(z.string(), z.string()),
});
export type RefsSnapshot = z.infer<typeof RefsSnapshot>;

/** How a run-level tests_cmd ran (its logs relative to the run directory): what a fix's feedback quotes. */
export const GateRun = z.strictObject({
  command: z.string(),
  exit_code: z.number().int().nullable(),
  how: z.string(),
  logs: z.tuple([z.string(), z.string()]),
});
export type GateRun = z.infer<typeof GateRun>;

/** One bisect of a red run-level gate: what it judged so far, and once it ended what it found. */
export const BisectRound = z.strictObject({
  /** The tree of the integration it bisects: a resume that merges the same tasks the same way finds it again. */
  integration_tree: z.string(),
  base: Bisect.shape.base.nullable(),
  probes: z.array(Probe),
  /** How each judged k's gate ran ("0": the base). */
  runs: z.record(z.string(), GateRun),
  /** Wall time of its gate runs so far, across drivers. */
  time_ms: z.number().int().min(0),
  /** Set once it ended. */
  bisect: Bisect.nullable(),
  culprit: Culprit.nullable(),
  /** The integration of the tasks before the culprit: where its fix starts. */
  start: z.string().nullable(),
});
export type BisectRound = z.infer<typeof BisectRound>;

/**
 * `<run-dir>/.termorch/<run>/bisect.json`: the bisects of a red run-level gate (merge.on_gate_failure
 * "bisect", "bisect_and_fix"), rewritten after each gate run. A resume finds the bisects that ended
 * (the report names them, and a culprit whose fix is under way), and the verdicts of the one it
 * interrupted, so no probe it judged runs again.
 */
export const BisectJournal = z.strictObject({ rounds: z.array(BisectRound) });
export type BisectJournal = z.infer<typeof BisectJournal>;
