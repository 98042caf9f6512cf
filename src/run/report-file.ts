import { existsSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import type { Report } from "../contract/report.js";
import { InputError, type TermorchError } from "../errors.js";
import { writeFileAtomic, writeJsonAtomic } from "../fs/atomic.js";
import { REPORT_HTML } from "../fs/names.js";
import { readLedgerEvents } from "../ledger/ledger.js";
import { buildReport, type RunError, skippedMerge } from "../report/build.js";
import { renderReportHtml } from "../report/html.js";
import { timelineOf } from "../report/timeline.js";
import { looseReportBlocker } from "./run-dir.js";

/** Where a run's report went. */
export interface RunResult {
  report: Report;
  /** Where the report was written, or null when it was not (see `notWritten`). */
  reportPath: string | null;
  /** Why the report was not written to a file, when it was not. */
  notWritten?: string;
  exitCode: number;
  runDir: string;
  /** Where report.html was written; absent when it was not. */
  htmlPath?: string;
  /** Task sessions left alive in tmux after the run (for inspection); absent: none. */
  keptSessions?: string[];
}

export function errorOf(error: TermorchError): RunError {
  return {
    kind: error.kind,
    message: error.message,
    hint: error instanceof InputError ? error.hint : null,
    problems: error instanceof InputError ? error.problems : [],
  };
}

/** The report of a run that failed before or outside its normal end; its exit code is the error kind's. */
export async function writeErrorReport(
  runDir: string,
  startedAt: number,
  error: RunError,
  o: {
    /** `runDir` is the run's own folder (it started there): the report belongs there whatever else is in it. */
    own?: boolean;
    /** The run's id when it is known although the run did not start (read from an invalid file). */
    runId?: string | null;
  } = {},
): Promise<RunResult> {
  // Never create folders for a run that did not start, never overwrite another run's report,
  // never put a file where git status would show it: the report goes only where that is safe.
  const blocker = o.own
    ? existsSync(runDir)
      ? null
      : `${runDir} does not exist`
    : await looseReportBlocker(runDir);
  const report = buildReport({
    runId: o.runId ?? null,
    startedAt,
    finishedAt: Date.now(),
    dryRun: false,
    stopped: null,
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
  return blocker === null
    ? writeReport(runDir, report, { html: o.own === true })
    : { report, reportPath: null, exitCode: report.exit_code, runDir, notWritten: notWrittenNote(blocker) };
}

/** What the user is told about a report kept off the disk, and how to get it. */
export function notWrittenNote(blocker: string): string {
  return `not written (${blocker}); --json prints it, --out DIR writes it elsewhere`;
}

/**
 * The report is written atomically and last; an unwritable run directory still returns it.
 * report.html follows it (unless `html` is false: a dry run, a folder that is not the run's own);
 * the JSON report is the contract, so the page failing to render or write never fails the run.
 */
export async function writeReport(
  runDir: string,
  report: Report,
  o: { html?: boolean } = {},
): Promise<RunResult> {
  const path = join(runDir, "execution_report.json");
  try {
    await writeJsonAtomic(path, report);
  } catch {
    return { report, reportPath: null, exitCode: report.exit_code, runDir };
  }
  const htmlPath = o.html === false ? null : await writeReportHtml(runDir, report).catch(() => null);
  return {
    report,
    reportPath: path,
    exitCode: report.exit_code,
    runDir,
    ...(htmlPath === null ? {} : { htmlPath }),
  };
}

/**
 * Renders report.html from the report and the run's ledger (events.jsonl; none: no timeline) and
 * writes it atomically, by default next to execution_report.json (same permissions); its log
 * links are relative to the folder it goes to. Returns where it went.
 */
export async function writeReportHtml(
  runDir: string,
  report: Report,
  out: string = join(runDir, REPORT_HTML),
): Promise<string> {
  const events = await readLedgerEvents(join(runDir, "events.jsonl"));
  const timeline = timelineOf(events, report, Date.parse(report.finished_at));
  await writeFileAtomic(out, renderReportHtml(report, timeline, { runDir, outDir: dirname(resolve(out)) }));
  return out;
}
