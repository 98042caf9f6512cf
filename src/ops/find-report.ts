import { existsSync } from "node:fs";
import { isAbsolute, join, resolve } from "node:path";
import { InputError } from "../errors.js";
import { startedRun } from "./runs.js";

type Env = Readonly<Record<string, string | undefined>>;

/** A run and where its report is; `path` null: it has none (yet). */
export interface ReportPlace {
  runId: string;
  runDir: string;
  path: string | null;
}

/**
 * Where the report of a run is, from a run id or run directory as the operator commands take
 * them, or a folder that holds only a report (a run refused before it started: invalid input, a
 * dry run). The run's folder comes first: state.json names where the report went, which a moved
 * folder outgrew.
 */
export async function findReport(ref: string, env: Env, cwd: string): Promise<ReportPlace> {
  let runId: string;
  let runDir: string;
  let named: string | null = null;
  try {
    // A registered run whose folder is gone (or now another run's) has no report to find.
    const run = await startedRun(ref, env, cwd);
    ({ runId, runDir } = run);
    named = run.state.report;
  } catch (error) {
    const dir = isAbsolute(ref) ? ref : resolve(cwd, ref);
    if (!(error instanceof InputError) || !existsSync(join(dir, "execution_report.json"))) throw error;
    runId = dir;
    runDir = dir;
  }
  const inDir = join(runDir, "execution_report.json");
  const path = existsSync(inDir) ? inDir : named !== null && existsSync(named) ? named : null;
  return { runId, runDir, path };
}
