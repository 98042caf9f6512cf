/**
 * The files of a plan: read from the planner's plan folder in its copy (through no link, each
 * bounded), staged beside the assignments file for `validate`, published under their final names
 * once valid, removed otherwise. The workspace holds nothing of a plan that was not taken.
 */
import { lstatSync, mkdirSync, readdirSync, renameSync, rmSync } from "node:fs";
import { basename, dirname, join, posix, relative } from "node:path";
import { errorText } from "../errors.js";
import { writeFileAtomicSync } from "../fs/atomic.js";
import { Refused, readInside, writeFresh } from "../fs/no-follow.js";
import { PLAN_FILES } from "./planner-prompt.js";

const ASSIGNMENTS_BYTES = 1024 * 1024;
const DOC_BYTES = 256 * 1024;
/** At most this many files in its tasks/ folder are read (a planner that writes thousands is refused). */
const MAX_CONTEXT_FILES = 500;
/** A context file's name: a task id (the schema's id pattern) and `.md`. */
const CONTEXT_NAME = /^[A-Za-z0-9][A-Za-z0-9_-]{0,63}\.md$/;

/** What the planner wrote in its plan folder (before any check of termorch's). */
export interface Draft {
  /** Its assignments file, parsed; null: none, or not JSON (`problems` say why). */
  assignments: Record<string, unknown> | null;
  /** Its context files, by file name in tasks/. */
  contexts: Map<string, Buffer>;
  milestones: Buffer | null;
  decisions: Buffer | null;
  problems: string[];
}

/** Reads the planner's plan folder `dir`; what cannot be read is a problem, never followed. */
export function readDraft(dir: string): Draft {
  const problems: string[] = [];
  const read = (rel: string, max: number, required: boolean): Buffer | null => {
    try {
      const bytes = readInside(dir, rel, max + 1);
      if (bytes.length > max) {
        problems.push(`${rel} is over termorch's bound of ${max} bytes`);
        return null;
      }
      return bytes;
    } catch (error) {
      if (error instanceof Refused && error.why === "missing") {
        if (required) problems.push(`you wrote no ${rel} in ${dir}`);
      } else problems.push(`${rel} could not be read: ${errorText(error)}`);
      return null;
    }
  };
  let assignments: Record<string, unknown> | null = null;
  const text = read(PLAN_FILES.assignments, ASSIGNMENTS_BYTES, true);
  if (text)
    try {
      const json: unknown = JSON.parse(text.toString("utf8"));
      if (typeof json === "object" && json !== null && !Array.isArray(json))
        assignments = json as Record<string, unknown>;
      else problems.push(`${PLAN_FILES.assignments} is not a JSON object`);
    } catch (error) {
      problems.push(`${PLAN_FILES.assignments} is not JSON: ${errorText(error)}`);
    }
  const contexts = new Map<string, Buffer>();
  const tasksDir = join(dir, PLAN_FILES.tasks);
  if (lstatSync(tasksDir, { throwIfNoEntry: false })?.isDirectory()) {
    const names = readdirSync(tasksDir).sort();
    if (names.length > MAX_CONTEXT_FILES)
      problems.push(
        `${PLAN_FILES.tasks}/ holds ${names.length} files, over termorch's bound of ${MAX_CONTEXT_FILES}`,
      );
    for (const name of names.slice(0, MAX_CONTEXT_FILES)) {
      if (!CONTEXT_NAME.test(name)) {
        problems.push(`${PLAN_FILES.tasks}/${name}: a context file is named <task id>.md`);
        continue;
      }
      const bytes = read(`${PLAN_FILES.tasks}/${name}`, DOC_BYTES, true);
      if (bytes) contexts.set(name, bytes);
    }
  }
  return {
    assignments,
    contexts,
    milestones: read(PLAN_FILES.milestones, DOC_BYTES, false),
    decisions: read(PLAN_FILES.decisions, DOC_BYTES, false),
    problems,
  };
}

/** Where a plan goes: the assignments file, and the folder beside it termorch names. */
export interface PlanPlace {
  /** The assignments file (`--out`). */
  file: string;
  /** `<file's stem>.plan` beside it: tasks/<id>.md, milestones.md, decisions.md. */
  dir: string;
  workspace: string;
}

/** The folder beside an assignments file that holds its plan's other files. */
export function planDirOf(file: string): string {
  return join(dirname(file), `${basename(file).replace(/\.json$/i, "")}.plan`);
}

/** The staged copy of a plan (validated before it takes its final names). */
export function stagedOf(place: PlanPlace): PlanPlace {
  const dir = join(dirname(place.dir), `.${basename(place.dir)}.partial`);
  return { file: join(dir, PLAN_FILES.assignments), dir, workspace: place.workspace };
}

/**
 * Writes the draft at `at`: its context files in `at.dir`'s tasks/, its documents, and the
 * assignments file with `workspace_dir` set and each `tasks/<id>.md` context path made the
 * workspace's path of its file (the planner writes them relative to its plan folder).
 */
export function writePlan(draft: Draft, at: PlanPlace, envVars: readonly string[]): void {
  rmSync(at.dir, { recursive: true, force: true });
  mkdirSync(at.dir);
  for (const [name, bytes] of draft.contexts) writeFresh(at.dir, `${PLAN_FILES.tasks}/${name}`, bytes, 0o644);
  if (draft.milestones) writeFresh(at.dir, PLAN_FILES.milestones, draft.milestones, 0o644);
  if (draft.decisions) writeFresh(at.dir, PLAN_FILES.decisions, draft.decisions, 0o644);
  writeFileAtomicSync(at.file, `${JSON.stringify(placed(draft.assignments ?? {}, at, envVars), null, 2)}\n`);
}

/**
 * The planner's assignments as they stand at `at`: where its workspace and context files are, and
 * the variables `termorch plan --env` named among its env_vars (names: no value is written).
 */
function placed(
  assignments: Record<string, unknown>,
  at: PlanPlace,
  envVars: readonly string[],
): Record<string, unknown> {
  const toWorkspace = relative(dirname(at.file), at.workspace) || ".";
  const dirInWorkspace = relative(at.workspace, at.dir).split("/").join(posix.sep);
  const env = assignments.environment;
  const tasks = Array.isArray(assignments.tasks)
    ? assignments.tasks.map((t: unknown) => {
        if (typeof t !== "object" || t === null || Array.isArray(t)) return t;
        const task = t as Record<string, unknown>;
        const path = task.context_path;
        return typeof path === "string" && path.startsWith(`${PLAN_FILES.tasks}/`)
          ? { ...task, context_path: posix.join(dirInWorkspace, path) }
          : task;
      })
    : assignments.tasks;
  const environment: Record<string, unknown> =
    typeof env === "object" && env !== null && !Array.isArray(env) ? { ...env } : {};
  if (envVars.length) {
    const listed = Array.isArray(environment.env_vars) ? environment.env_vars : [];
    const names = new Set(listed.map((e) => (typeof e === "string" ? e.split("=")[0] : e)));
    environment.env_vars = [...listed, ...envVars.filter((v) => !names.has(v))];
  }
  return { ...assignments, tasks, environment: { ...environment, workspace_dir: toWorkspace } };
}

/** Moves a staged plan to its final place, over what stood there (`--force`). */
export function publishPlan(
  draft: Draft,
  staged: PlanPlace,
  final: PlanPlace,
  envVars: readonly string[],
): void {
  rmSync(staged.file, { force: true });
  rmSync(final.dir, { recursive: true, force: true });
  renameSync(staged.dir, final.dir);
  writeFileAtomicSync(
    final.file,
    `${JSON.stringify(placed(draft.assignments ?? {}, final, envVars), null, 2)}\n`,
  );
}

/** Removes a plan's files (a plan not taken). */
export function removePlan(at: PlanPlace): void {
  rmSync(at.dir, { recursive: true, force: true });
  rmSync(at.file, { force: true });
}
