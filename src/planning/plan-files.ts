/**
 * The files of a plan: read from the planner's plan folder in its copy (through no link, each
 * bounded), staged beside the assignments file for `validate`, published under their final names
 * once valid, removed otherwise. The workspace holds nothing of a plan that was not taken.
 */
import { existsSync, mkdirSync, readdirSync, renameSync, rmSync } from "node:fs";
import { basename, dirname, join, posix, relative } from "node:path";
import { errorText } from "../errors.js";
import { writeFileAtomicSync } from "../fs/atomic.js";
import { kindInside, Refused, readInside, walkInside, writeFresh } from "../fs/no-follow.js";
import { pidOfPlanId } from "./plan-leftovers.js";
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

/**
 * Reads the planner's plan folder, `rel` below `root` (its copy, termorch's own folder): no link
 * is followed on the way or at the end, and what cannot be read is a problem, never an error.
 */
export function readDraft(root: string, rel: string): Draft {
  const problems: string[] = [];
  const empty: Draft = {
    assignments: null,
    contexts: new Map(),
    milestones: null,
    decisions: null,
    problems,
  };
  const kind = kindInside(root, rel);
  if (kind !== "folder") {
    problems.push(
      `the plan folder ${join(root, rel)} is ${kind === "missing" ? "missing" : "not a folder (a link is not followed)"}`,
    );
    return empty;
  }
  const read = (name: string, max: number, required: boolean): Buffer | null => {
    try {
      const bytes = readInside(root, `${rel}/${name}`, max + 1);
      if (bytes.length > max) {
        problems.push(`${name} is over termorch's bound of ${max} bytes`);
        return null;
      }
      return bytes;
    } catch (error) {
      if (error instanceof Refused && error.why === "missing") {
        if (required) problems.push(`you wrote no ${name} in ${join(root, rel)}`);
      } else problems.push(`${name} could not be read: ${errorText(error)}`);
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
  const tasksRel = `${rel}/${PLAN_FILES.tasks}`;
  const tree = walkInside(root, tasksRel);
  const prefix = `${tasksRel}/`;
  const entries = [
    ...tree.files,
    ...tree.links,
    ...tree.others,
    ...tree.folders.filter((f) => f !== tasksRel),
  ];
  if (entries.length > MAX_CONTEXT_FILES)
    problems.push(
      `${PLAN_FILES.tasks}/ holds ${entries.length} entries, over termorch's bound of ${MAX_CONTEXT_FILES}`,
    );
  for (const entry of entries.sort().slice(0, MAX_CONTEXT_FILES)) {
    const name = entry.slice(prefix.length);
    if (!tree.files.includes(entry) || !CONTEXT_NAME.test(name)) {
      problems.push(
        `${PLAN_FILES.tasks}/${name}: a context file is a regular file named <task id>.md, and nothing else is there`,
      );
      continue;
    }
    const bytes = read(`${PLAN_FILES.tasks}/${name}`, DOC_BYTES, true);
    if (bytes) contexts.set(name, bytes);
  }
  return {
    assignments,
    contexts,
    milestones: read(PLAN_FILES.milestones, DOC_BYTES, false),
    decisions: read(PLAN_FILES.decisions, DOC_BYTES, false),
    problems,
  };
}

/** Every file of a draft by its name in the plan folder, as the planner wrote it. */
export function draftFiles(draft: Draft): [string, Buffer][] {
  return [
    ...(draft.assignments
      ? [[PLAN_FILES.assignments, Buffer.from(JSON.stringify(draft.assignments))] as [string, Buffer]]
      : []),
    ...[...draft.contexts].map(([name, bytes]): [string, Buffer] => [`${PLAN_FILES.tasks}/${name}`, bytes]),
    ...(draft.milestones ? [[PLAN_FILES.milestones, draft.milestones] as [string, Buffer]] : []),
    ...(draft.decisions ? [[PLAN_FILES.decisions, draft.decisions] as [string, Buffer]] : []),
  ];
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
  return join(dirname(file), `${stemOf(file)}.plan`);
}

/** An assignments file's name without `.json`: what the names of its plan's files start with. */
const stemOf = (file: string): string => basename(file).replace(/\.json$/i, "");

/**
 * The staged copy of a plan, beside its final place, so that every path of it resolves as it
 * will there; `tag` (its planning's id) keeps two plannings of one file apart.
 */
export function stagedOf(place: PlanPlace, tag: string): PlanPlace {
  return besideOf(place, `partial-${tag}`);
}

/** Hidden files beside a plan's, `what` naming which: a staged plan, or one moved aside (`--force`). */
function besideOf(place: PlanPlace, what: string): PlanPlace {
  const folder = dirname(place.file);
  const stem = stemOf(place.file);
  return {
    file: join(folder, `.${stem}.${what}.json`),
    dir: join(folder, `.${stem}.plan.${what}`),
    workspace: place.workspace,
  };
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
 * The planner's assignments as they stand at `at`: its workspace (the environment is termorch's:
 * a planner sets none, planner-fields.ts), with the variables `--env` named (names: no value is
 * written), and each `tasks/<id>.md` context path the workspace's path of its file.
 */
function placed(
  assignments: Record<string, unknown>,
  at: PlanPlace,
  envVars: readonly string[],
): Record<string, unknown> {
  const dirInWorkspace = relative(at.workspace, at.dir).split("/").join(posix.sep);
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
  return {
    ...assignments,
    tasks,
    environment: {
      ...(envVars.length ? { env_vars: [...envVars] } : {}),
      workspace_dir: relative(dirname(at.file), at.workspace) || ".",
    },
  };
}

/**
 * Moves a staged plan to its final place. What stood there (`--force`) is moved aside first:
 * `undo` puts it back (the new plan removed), `done` removes it.
 */
export function publishPlan(
  draft: Draft,
  staged: PlanPlace,
  final: PlanPlace,
  envVars: readonly string[],
  tag: string,
): { undo: () => void; done: () => void } {
  const aside = besideOf(final, `old-${tag}`);
  const moved = { file: false, dir: false };
  const undo = (): void => {
    removePlan(final);
    if (moved.dir) renameSync(aside.dir, final.dir);
    if (moved.file) renameSync(aside.file, final.file);
  };
  try {
    if (existsSync(final.dir)) {
      renameSync(final.dir, aside.dir);
      moved.dir = true;
    }
    if (existsSync(final.file)) {
      renameSync(final.file, aside.file);
      moved.file = true;
    }
    rmSync(staged.file, { force: true });
    renameSync(staged.dir, final.dir);
    writeFileAtomicSync(
      final.file,
      `${JSON.stringify(placed(draft.assignments ?? {}, final, envVars), null, 2)}\n`,
    );
  } catch (error) {
    undo();
    throw error;
  }
  return { undo, done: () => removePlan(aside) };
}

/**
 * Removes the staging files beside `place` that a planning killed before its end left (its
 * process gone): `.<stem>.partial-plan-<t>-<pid>.json` and `.<stem>.plan.partial-plan-<t>-<pid>/`.
 * A plan moved aside (`old-…`) is the user's and stays.
 */
export function removeDeadStaging(place: PlanPlace, gone: (pid: number) => boolean): void {
  const folder = dirname(place.file);
  const stem = stemOf(place.file);
  for (const name of readdirSync(folder)) {
    const tag = stagingTag(name, stem);
    if (tag !== null && gone(tag)) rmSync(join(folder, name), { recursive: true, force: true });
  }
}

/** The pid a staging file's name carries, or null: not one of `stem`'s staging files. */
function stagingTag(name: string, stem: string): number | null {
  for (const [kind, ext] of [
    [`.${stem}.partial-`, ".json"],
    [`.${stem}.plan.partial-`, ""],
  ] as const) {
    if (!name.startsWith(kind) || !name.endsWith(ext)) continue;
    const pid = pidOfPlanId(name.slice(kind.length, name.length - ext.length));
    if (pid !== null) return pid;
  }
  return null;
}

/** Removes a plan's files (a plan not taken). */
export function removePlan(at: PlanPlace): void {
  rmSync(at.dir, { recursive: true, force: true });
  rmSync(at.file, { force: true });
}
