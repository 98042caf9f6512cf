import { mkdirSync } from "node:fs";
import { join, relative } from "node:path";
import { Assignments, type Assignments as AssignmentsDoc, type Task } from "../contract/assignments.js";
import type { Conflict } from "../contract/report.js";
import { errorText } from "../errors.js";
import { writeFileAtomic } from "../fs/atomic.js";
import { redoBaseRefOf } from "../fs/names.js";
import type { FoldItem } from "../git/fold.js";
import { keepRef, partialIntegration } from "../git/merge.js";
import { isSecretName } from "../redact/redactor.js";
import type { Ports } from "../task/ports.js";
import type { TaskRecorder } from "../task/recorder.js";
import type { RunPlan } from "../task/run-plan.js";
import { conflictFacts } from "./conflict-facts.js";
import { conflictSection } from "./conflict-section.js";

/** What a halted merge leaves to redo: the merge of what merged cleanly, and the tasks left out. */
export interface HaltedMerge {
  /** The tree of everything that merged cleanly, and those tasks' commits. */
  mergedTree: string;
  merged: readonly FoldItem[];
  /** Tasks left out, in merge order (a conflicting one, and those that carry it). */
  leftOut: readonly string[];
  conflicts: readonly Conflict[];
}

/**
 * A halted merge ("halt", or a redo that gave up) writes, for each task left out that carries no
 * other left-out task, `artifacts/redo/<task>.json`: an assignments file that runs that task again
 * (and the left-out tasks built on it) from a commit of everything that merged cleanly
 * (`start_commit`), its prompt carrying the conflict section (`<task>.md`, `conflict_file`). A main
 * orchestrator that prefers to decide continues with one `termorch run` of it. No file holds a
 * secret: secret-named values become names the run passes through from its environment, and a
 * file that would still hold one is not written (logged). Answers the files written, relative to
 * the run directory.
 */
export async function writeRedoAssignments(
  run: Pick<RunPlan, "git" | "runId" | "runDir" | "order" | "plans" | "identity" | "input">,
  ports: Pick<Ports, "redactor" | "log" | "ledger">,
  recorder: Pick<TaskRecorder, "get">,
  halted: HaltedMerge,
): Promise<string[]> {
  if (halted.leftOut.length === 0 || !run.git) return [];
  const { root, baseCommit } = run.git;
  const base = await partialIntegration(root, {
    base: baseCommit,
    commits: halted.merged.map((m) => m.commit),
    tree: halted.mergedTree,
    message: `termorch: what merged cleanly in run ${run.runId} (the start of its artifacts/redo files)\n\nTermorch-Run: ${run.runId}\n`,
    identity: run.identity,
  });
  await keepRef(root, redoBaseRefOf(run.runId), base, `termorch: run ${run.runId}'s redo base`);
  const left = new Set(halted.leftOut);
  const carries = (id: string, other: string): boolean => ancestorsOf(run, id).has(other);
  const roots = halted.leftOut.filter((id) => ![...left].some((o) => o !== id && carries(id, o)));
  const dir = join(run.runDir, "artifacts", "redo");
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const written: string[] = [];
  const mergedIds = halted.merged.map((m) => m.task);
  for (const id of roots) {
    const members = run.order.filter((m) => m === id || (left.has(m) && carries(m, id)));
    const t = recorder.get(id);
    const units = halted.conflicts.filter((c) => c.tasks.includes(id)).flatMap((c) => unitsOf(c, id));
    try {
      const facts = await conflictFacts(run, recorder, {
        task: id,
        redo: 1,
        of: 1,
        taskStart: t.git.startCommit ?? baseCommit,
        before: t.git.commit!,
        start: base,
        mergedBefore: mergedIds,
        units,
        patchFile: `artifacts/${id}/changes.patch`,
      });
      const doc = redoDocument(run, members, id, base);
      const text = `${JSON.stringify(doc, null, 2)}\n`;
      const section = conflictSection(facts);
      if (ports.redactor.redact(text) !== text) {
        ports.log.warn(
          { task: id },
          "artifacts/redo file not written: the task's assignment holds a secret value",
        );
        continue;
      }
      await writeFileAtomic(join(dir, `${id}.md`), ports.redactor.redact(section), 0o600);
      await writeFileAtomic(join(dir, `${id}.json`), text, 0o600);
      written.push(relative(run.runDir, join(dir, `${id}.json`)));
    } catch (error) {
      ports.log.warn({ task: id, err: errorText(error) }, "could not write the task's artifacts/redo file");
    }
  }
  if (written.length > 0)
    await ports.ledger.append("merge.redo_assignments", { files: written, start_commit: base });
  return written;
}

/**
 * A reported conflict's units as the conflict section takes them: its detail names the tasks,
 * then each unit as "<kind> in <path>[ <- <path>]", joined by "; " (git/fold.ts writes it so).
 */
function unitsOf(c: Conflict, id: string): { kind: string; paths: string[]; with: string[] }[] {
  const others = c.tasks.filter((x) => x !== id);
  return c.detail
    .slice(c.detail.indexOf(": ") + 2)
    .split("; ")
    .map((part) => {
      const at = part.indexOf(" in ");
      return at < 0
        ? { kind: part, paths: c.files, with: others }
        : { kind: part.slice(0, at), paths: part.slice(at + 4).split(" <- "), with: others };
    });
}

/** The assignments that run `members` again, `root` from `start`; validated before it is written. */
function redoDocument(
  run: Pick<RunPlan, "input">,
  members: readonly string[],
  root: string,
  start: string,
): AssignmentsDoc {
  const a = run.input.assignments;
  const { secret_name_fragments: fragments, secret_env: names } = run.input.config;
  const secret = (name: string): boolean => isSecretName(name, fragments, names);
  const passed = new Set<string>();
  const tasks: Task[] = members.map((id) => {
    const t = a.tasks.find((x) => x.id === id)!;
    const env = Object.fromEntries(
      Object.entries(t.env).filter(([name]) => {
        if (secret(name)) passed.add(name);
        return !secret(name);
      }),
    );
    return {
      ...t,
      env,
      dependencies: t.dependencies.filter((d) => members.includes(d)),
      ...(id === root ? { start_commit: start, conflict_file: `${root}.md` } : {}),
    };
  });
  const envVars = a.environment.env_vars.map((v) => {
    const name = v.split("=")[0]!;
    return secret(name) ? name : v;
  });
  for (const name of passed) if (!envVars.includes(name)) envVars.push(name);
  const { run_id: _runId, ...rest } = a;
  return Assignments.parse({
    ...rest,
    tasks,
    environment: { ...a.environment, workspace_dir: run.input.workspace, env_vars: envVars },
  });
}

/** Every task `id` depends on, directly or not. */
function ancestorsOf(run: Pick<RunPlan, "plans">, id: string): Set<string> {
  const seen = new Set<string>();
  const walk = (x: string): void => {
    for (const d of run.plans.get(x)?.dependencies ?? [])
      if (!seen.has(d)) {
        seen.add(d);
        walk(d);
      }
  };
  walk(id);
  return seen;
}
