import { readdirSync, readlinkSync, rmSync } from "node:fs";
import { join, relative } from "node:path";
import { errorText } from "../errors.js";
import { copyFresh, kindInside, readInside, walkInside, writeFresh } from "../fs/no-follow.js";
import { redactFile, redactNames } from "../redact/redact-file.js";
import type { Redactor } from "../redact/redactor.js";
import type { Ports } from "./ports.js";
import { findRequired } from "./required-artifacts.js";
import type { RunPlan } from "./run-plan.js";
import type { TaskPlan } from "./task-plan.js";
import type { TaskRun } from "./task-run.js";

/** The note naming what termorch did not keep of the agent's artifacts. */
export const DROPPED_NOTE = "termorch-dropped.txt";

/**
 * artifacts/<task>/: what the agent wrote there, changes.patch, copies of required artifacts,
 * handoff.md. Answers the artifacts' paths (relative to the run directory) for the report, or
 * null when collecting failed (logged; the task's outcome stands).
 *
 * The agent could write this folder and its worktree, and termorch works here as the user, outside
 * any sandbox: nothing below follows a link the agent made (src/fs/no-follow.ts). Links and other
 * non-files it left are dropped, named in `termorch-dropped.txt`; what termorch writes is fresh.
 */
export async function collectArtifacts(
  run: Pick<RunPlan, "git" | "runDir">,
  ports: Pick<Ports, "workspace" | "redactor" | "log">,
  t: Readonly<TaskRun>,
  p: TaskPlan,
): Promise<string[] | null> {
  const { cwd, artifactsDir } = p.workspace;
  try {
    const dropped = dropNonFiles(artifactsDir, ports.redactor);
    if (run.git && t.git.startCommit && t.git.commit) {
      // No commit of its own: the patch is empty, and no git process is needed to say so.
      const patch =
        t.git.commit === t.git.startCommit
          ? Buffer.alloc(0)
          : await ports.workspace.diffPatch(run.git.root, t.git.startCommit, t.git.commit);
      // Redacted as bytes: a binary patch stays byte-exact.
      writeFresh(artifactsDir, "changes.patch", ports.redactor.redactBytes(patch));
    }
    for (const pattern of p.gates.requiredArtifacts) {
      const { found, refused } = await findRequired(p.workspace, pattern);
      dropped.push(...refused.map((why) => `required artifact ${why}`));
      for (const f of found) {
        const into = `files/${f.match}`;
        if (f.kind === "file") copyFresh(cwd, f.real, artifactsDir, into);
        else {
          const tree = walkInside(cwd, f.real);
          for (const file of tree.files)
            copyFresh(cwd, file, artifactsDir, `${into}${file.slice(f.real.length)}`);
          const left = [...tree.links, ...tree.others];
          dropped.push(...left.map((l) => `required artifact ${l}: not copied (not a regular file)`));
        }
      }
    }
    // An agent's own handoff.md in its workspace, kept unless termorch keeps one already.
    if (kindInside(cwd, "handoff.md") === "file" && kindInside(artifactsDir, "handoff.md") === "missing")
      writeFresh(artifactsDir, "handoff.md", readInside(cwd, "handoff.md"));
    if (dropped.length > 0) {
      ports.log.warn({ task: t.id, dropped }, "artifacts not kept");
      writeFresh(artifactsDir, DROPPED_NOTE, `${dropped.map((d) => ports.redactor.redact(d)).join("\n")}\n`);
    }
    const dir = relative(run.runDir, artifactsDir);
    if (readdirSync(artifactsDir).length === 0) return [`${dir}/`];
    // Names first: an agent may name what it leaves here after a secret, and the list of
    // artifacts goes into the report and state.json.
    await redactNames(artifactsDir, ports.redactor);
    const kept = walkInside(artifactsDir).files;
    // Everything under the run directory is redacted, what the agent put here included.
    for (const f of kept) await redactFile(join(artifactsDir, f), ports.redactor);
    return [`${dir}/`, ...kept.map((f) => `${dir}/${f}`)];
  } catch (error) {
    ports.log.warn({ task: t.id, err: errorText(error) }, "collecting artifacts failed");
    return null;
  }
}

/**
 * Removes every link, fifo, socket or device below the artifacts folder `root`: none is kept
 * where the user (or a CI upload of the artifacts) would later follow or open it. Answers a line
 * for each, naming where a link pointed.
 */
function dropNonFiles(root: string, redactor: Redactor): string[] {
  const { links, others } = walkInside(root);
  const lines = [
    ...links.map(
      (rel) =>
        `${rel}: a symbolic link to ${redactor.redact(readlinkSync(join(root, rel)))}, not kept (termorch keeps no link an agent left)`,
    ),
    ...others.map((rel) => `${rel}: not a regular file, not kept`),
  ];
  for (const rel of [...links, ...others]) rmSync(join(root, rel), { force: true, recursive: true });
  return lines;
}
