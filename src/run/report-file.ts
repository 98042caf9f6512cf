import { existsSync } from "node:fs";
import { join } from "node:path";
import type { Report } from "../contract/report.js";
import { InputError, type TermorchError } from "../errors.js";
import { writeJsonAtomic } from "../fs/atomic.js";
import { buildReport, type RunError, skippedMerge } from "../report/build.js";

/** Where a run's report went. */
export interface RunResult {
  report: Report;
  /** Where the report was written, or null when the run directory was not writable. */
  reportPath: string | null;
  exitCode: number;
  runDir: string;
}

export function errorOf(error: TermorchError): RunError {
  return {
    kind: error.kind,
    message: error.message,
    hint: error instanceof InputError ? error.hint : null,
    problems: error instanceof InputError ? error.problems : [],
  };
}

export async function writeErrorReport(
  runDir: string,
  startedAt: number,
  error: RunError,
  exitCode: number,
  /** The run's id when it is known although the run did not start (read from an invalid file). */
  runId: string | null = null,
): Promise<RunResult> {
  // Never create folders for a run that did not start: the report goes only where the run directory exists.
  const writable = existsSync(runDir);
  const report = buildReport({
    runId,
    startedAt,
    finishedAt: Date.now(),
    dryRun: false,
    waves: [],
    tasks: [],
    merge: skippedMerge("the run did not start"),
    validation: "skipped",
    cancelled: false,
    error,
    workspace: null,
    tmuxSocket: null,
    criticalPath: [],
    maxParallel: 0,
    peakParallelism: 0,
  });
  report.exit_code = exitCode;
  return writable ? writeReport(runDir, report) : { report, reportPath: null, exitCode, runDir };
}

/** The report is written atomically and last; an unwritable run directory still returns it. */
export async function writeReport(runDir: string, report: Report): Promise<RunResult> {
  const path = join(runDir, "execution_report.json");
  try {
    await writeJsonAtomic(path, report);
    return { report, reportPath: path, exitCode: report.exit_code, runDir };
  } catch {
    return { report, reportPath: null, exitCode: report.exit_code, runDir };
  }
}
