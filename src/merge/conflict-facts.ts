import { join, relative } from "node:path";
import { readInside } from "../fs/no-follow.js";
import { diffText, fileChanges } from "../git/conflict-diff.js";
import type { TaskRecorder } from "../task/recorder.js";
import type { RunPlan } from "../task/run-plan.js";
import type { ConflictFacts, Excerpt } from "./conflict-section.js";

/** Bounds of what the section quotes: a prompt must still leave the agent room to work. */
const MAX_HUNKS_BYTES = 24 * 1024;
const MAX_PATCH_BYTES = 32 * 1024;
const MAX_HANDOFF_BYTES = 8 * 1024;

/** The conflict a redo is to resolve, as the ordered merge found it. */
export interface RedoConflict {
  task: string;
  redo: number;
  of: number;
  /** Its start (S) and earlier result (C_old), and the new start (R). */
  taskStart: string;
  before: string;
  start: string;
  mergedBefore: string[];
  units: { kind: string; paths: string[]; with: string[] }[];
  /** Where its earlier diff is kept, relative to the run directory. */
  patchFile: string;
}

/** The facts of a redo's conflict section: git reads, and the other tasks' records and handoffs. */
export async function conflictFacts(
  run: Pick<RunPlan, "git" | "plans" | "runDir">,
  tasks: Pick<TaskRecorder, "get">,
  c: RedoConflict,
): Promise<ConflictFacts> {
  const root = run.git!.root;
  const files = [...new Set(c.units.flatMap((u) => u.paths))].sort();
  const excerptOf = async (
    from: string,
    to: string,
    paths: string[] | null,
    max: number,
  ): Promise<Excerpt> => ({
    ...(await diffText(root, from, to, paths, max)),
    see: `git diff ${from} ${to}${paths ? ` -- ${paths.join(" ")}` : ""}`,
  });
  const withIds = [...new Set(c.units.flatMap((u) => u.with))].filter((id) => id !== c.task);
  const others: ConflictFacts["others"] = [];
  for (const id of withIds) {
    const o = tasks.get(id);
    const plan = run.plans.get(id);
    const kept = plan?.gates.handoff ? plan.workspace.artifactsDir : null;
    const handoffPath = kept === null ? null : join(kept, "handoff.md");
    const handoff = kept === null ? null : keptHandoff(kept);
    others.push({
      id,
      summary: o.result.agentResult?.summary ?? null,
      changes:
        o.git.startCommit && o.git.commit ? await fileChanges(root, o.git.startCommit, o.git.commit) : [],
      handoff: handoff === null ? null : { path: relative(run.runDir, handoffPath!), text: handoff },
    });
  }
  const previous = tasks
    .get(c.task)
    .redo.done.filter((r) => r.before_commit === c.before)
    .map((r) => ({ redo: r.redo, reason: r.reason, detail: r.reason_detail, gates: r.gates }));
  return {
    task: c.task,
    redo: c.redo,
    of: c.of,
    startCommit: c.start,
    beforeCommit: c.before,
    mergedBefore: c.mergedBefore,
    conflicts: c.units,
    files,
    theirs: await excerptOf(c.taskStart, c.start, files, MAX_HUNKS_BYTES),
    yours: await excerptOf(c.taskStart, c.before, files, MAX_HUNKS_BYTES),
    ownPatch: { ...(await excerptOf(c.taskStart, c.before, null, MAX_PATCH_BYTES)), file: c.patchFile },
    others,
    previous,
  };
}

/** Another task's kept handoff, capped, read through no link its agent could have left. */
function keptHandoff(artifactsDir: string): string | null {
  try {
    const text = readInside(artifactsDir, "handoff.md", 4 * MAX_HANDOFF_BYTES).toString("utf8");
    return text.length > MAX_HANDOFF_BYTES ? `${text.slice(0, MAX_HANDOFF_BYTES)}\n(cut here)` : text;
  } catch {
    return null;
  }
}
