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

/**
 * `<run-dir>/.termorch/<run>/bisect.json`: the bisects of a red run-level gate (merge.on_gate_failure
 * "bisect", "bisect_and_fix"), written after each gate run. A resume finds the bisects that ended
 * (and the culprit, whose fix may be under way: the report names it), and the verdicts of the one
 * it interrupted, keyed by the integration's tree, so no probe it judged runs again.
 */
export const BisectJournal = z.strictObject({
  done: z.array(Bisect),
  culprit: Culprit.nullable(),
  /** The bisect under way: the tree of the integration it bisects, and what it judged so far. */
  current: z
    .strictObject({
      integration_tree: z.string(),
      base: Bisect.shape.base.nullable(),
      probes: z.array(Probe),
      /** Wall time spent so far (the base's run and the probes), across drivers. */
      time_ms: z.number().int().min(0),
    })
    .nullable(),
});
export type BisectJournal = z.infer<typeof BisectJournal>;
