import { basename, join } from "node:path";
import type { RedoStep } from "../contract/merge-policy.js";
import { shellWord } from "./word.js";

/**
 * The way on from a halted merge, one step per artifacts/redo file (`files`, relative to the run
 * directory, as the report's `merge.redo_assignments` has them): the file, its conflict section,
 * and the exact `termorch run` that redoes its task. Each gets a run folder of its own inside the
 * halted run's (`redo-<task>`): the files share artifacts/redo/, and a folder holds one run.
 */
export function redoSteps(runDir: string, files: readonly string[]): RedoStep[] {
  return files.map((file) => {
    const task = basename(file, ".json");
    const assignments = join(runDir, file);
    return {
      task,
      assignments,
      conflict: join(runDir, file.replace(/\.json$/, ".md")),
      command: `termorch run ${shellWord(assignments)} --out ${shellWord(join(runDir, `redo-${task}`))}`,
    };
  });
}
