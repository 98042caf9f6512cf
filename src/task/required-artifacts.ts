import { findMatches } from "../fs/find-files.js";
import { kindInside, Refused, resolveInside } from "../fs/no-follow.js";
import type { WorkspacePlan } from "./task-plan.js";

/** A required artifact found in a task's workspace: where the pattern matched, and where it really is. */
export interface FoundArtifact {
  match: string;
  real: string;
  kind: "file" | "folder";
}

/**
 * What a required-artifact pattern finds in a task's workspace. Only a regular file (or a folder)
 * inside the workspace counts, reached through no link that leaves it: a link the agent made to a
 * file it could not see (`~/.aws/credentials`) neither satisfies the gate nor is copied out.
 */
export async function findRequired(
  p: Pick<WorkspacePlan, "cwd" | "include">,
  pattern: string,
): Promise<{ found: FoundArtifact[]; refused: string[] }> {
  const found: FoundArtifact[] = [];
  const refused: string[] = [];
  for (const match of await findMatches(p.cwd, pattern, p.include)) {
    try {
      const real = resolveInside(p.cwd, match);
      const kind = kindInside(p.cwd, real);
      if (kind === "file" || kind === "folder") found.push({ match, real, kind });
      else refused.push(new Refused(match, "not-a-file", match).message);
    } catch (error) {
      if (!(error instanceof Refused)) throw error;
      refused.push(error.message);
    }
  }
  return { found, refused };
}
