import { lstatSync } from "node:fs";
import { isAbsolute, join, resolve } from "node:path";
import type { Command } from "commander";
import { parseWith } from "../contract/parse.js";
import { Report } from "../contract/report.js";
import { InputError } from "../errors.js";
import { REPORT_HTML } from "../fs/names.js";
import { readJsonFile } from "../input/json-file.js";
import { findReport } from "../ops/find-report.js";
import { writeReportHtml } from "../run/report-file.js";
import type { Io } from "./io.js";

/**
 * `termorch report <run> [--html [--out FILE]]`: a finished run's report, printed as JSON, or
 * rendered again as report.html from its execution_report.json and events.jsonl alone (a run
 * reported before report.html existed, a page lost, or one wanted elsewhere).
 */
export function registerReportCommand(program: Command, io: Io): void {
  program
    .command("report")
    .description("print a finished run's execution_report.json, or (--html) write its report.html")
    .argument("<run>", "a run directory or run id")
    .option(
      "--html",
      "render report.html (summary, timeline, merge, gates, log links) from the report and the ledger",
    )
    .option("--out <file>", `with --html: where to write the page (default: <run-dir>/${REPORT_HTML})`)
    .action(async (ref: string, o: { html?: boolean; out?: string }) => {
      if (o.out !== undefined && !o.html)
        throw new InputError(
          [{ field: "--out", message: "--out names where report.html goes: it needs --html" }],
          "termorch report <run> --html [--out FILE]",
        );
      const run = await findReport(ref, io.env, io.cwd);
      const reportPath = run.path ?? join(run.runDir, "execution_report.json");
      if (run.path === null)
        throw new InputError(
          [
            {
              file: reportPath,
              message: `run ${run.runId} has no report: it is still running, or it stopped before it could write one`,
            },
          ],
          "See `termorch status` for where it is; an interrupted run writes its report when `termorch resume` finishes it.",
        );
      const report = parseWith(Report, await readJsonFile(reportPath, "the run's report"), reportPath);
      if (!o.html) {
        io.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
        return;
      }
      const out = o.out === undefined ? undefined : isAbsolute(o.out) ? o.out : resolve(io.cwd, o.out);
      if (out !== undefined) refuseNonFile(out);
      // A run that stopped before it started (invalid input, a dry run) has a report and no
      // ledger: its page has no timeline.
      const written = await writeReportHtml(run.runDir, report, out).catch((error: NodeJS.ErrnoException) => {
        throw new InputError(
          [
            {
              file: out ?? join(run.runDir, REPORT_HTML),
              message: `cannot write it: ${error.code ?? error.message}`,
            },
          ],
          "Pick a writable place with --out FILE.",
        );
      });
      io.stdout.write(`${written}\n`);
    });
}

/**
 * The page is written beside --out and renamed over it: that would replace a symbolic link, a
 * device (as root, /dev/stdout or /dev/null) or a pipe with a plain file. Only a new path or a
 * regular file is taken.
 */
function refuseNonFile(out: string): void {
  const stat = lstatSync(out, { throwIfNoEntry: false });
  if (stat === undefined || stat.isFile()) return;
  const what = stat.isSymbolicLink()
    ? "a symbolic link"
    : stat.isDirectory()
      ? "a folder"
      : "not a regular file";
  throw new InputError(
    [{ field: "--out", file: out, message: `${out} is ${what}: report.html would replace it` }],
    "Pass a new path, or a regular file to replace (the page is written whole, never through a link).",
  );
}
