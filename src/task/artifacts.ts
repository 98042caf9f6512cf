import { existsSync, readdirSync, statSync } from "node:fs";
import { cp, stat, writeFile } from "node:fs/promises";
import { join, relative } from "node:path";
import { errorText } from "../errors.js";
import { findMatches } from "../fs/find-files.js";
import { redactFile, redactNames } from "../redact/redact-file.js";
import type { Ports } from "./ports.js";
import type { RunPlan } from "./run-plan.js";
import type { TaskPlan } from "./task-plan.js";
import type { TaskRun } from "./task-run.js";

/**
 * artifacts/<task>/: what the agent wrote there, changes.patch, copies of required artifacts,
 * handoff.md. Answers the artifacts' paths (relative to the run directory) for the report, or
 * null when collecting failed (logged; the task's outcome stands).
 */
export async function collectArtifacts(
  run: Pick<RunPlan, "git" | "runDir">,
  ports: Pick<Ports, "workspace" | "redactor" | "log">,
  t: Readonly<TaskRun>,
  p: TaskPlan,
): Promise<string[] | null> {
  const { cwd, artifactsDir } = p;
  try {
    if (run.git && t.startCommit && t.commit) {
      // No commit of its own: the patch is empty, and no git process is needed to say so.
      const patch =
        t.commit === t.startCommit
          ? Buffer.alloc(0)
          : await ports.workspace.diffPatch(run.git.root, t.startCommit, t.commit);
      // Redacted as bytes: a binary patch stays byte-exact.
      const redacted = ports.redactor.redactBytes(patch);
      await writeFile(join(artifactsDir, "changes.patch"), redacted, { mode: 0o600 });
    }
    for (const pattern of p.criteria.requiredArtifacts) {
      for (const match of await findMatches(cwd, pattern, p.include)) {
        await cp(join(cwd, match), join(artifactsDir, "files", match), {
          recursive: true,
          dereference: false,
          force: true,
        });
      }
    }
    const handoff = join(cwd, "handoff.md");
    if (
      statSync(handoff, { throwIfNoEntry: false })?.isFile() &&
      !existsSync(join(artifactsDir, "handoff.md"))
    ) {
      await cp(handoff, join(artifactsDir, "handoff.md"));
    }
    // Names first: an agent may name what it leaves here after a secret, and the list of
    // artifacts goes into the report and state.json.
    if (readdirSync(artifactsDir).length > 0) await redactNames(artifactsDir, ports.redactor);
    // Most agents leave nothing here: one readdir spares the walk.
    const files =
      readdirSync(artifactsDir).length === 0
        ? []
        : await onlyFiles(artifactsDir, await findMatches(artifactsDir, "**", []));
    // Everything under the run directory is redacted, what the agent put here included.
    for (const f of files) await redactFile(join(artifactsDir, f), ports.redactor);
    const dir = relative(run.runDir, artifactsDir);
    return [`${dir}/`, ...files.map((f) => `${dir}/${f}`)];
  } catch (error) {
    ports.log.warn({ task: t.id, err: errorText(error) }, "collecting artifacts failed");
    return null;
  }
}

async function onlyFiles(root: string, rels: string[]): Promise<string[]> {
  const out: string[] = [];
  for (const rel of rels) if ((await stat(join(root, rel)).catch(() => null))?.isFile()) out.push(rel);
  return out;
}
