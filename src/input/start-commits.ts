import { InputError, type InputProblem } from "../errors.js";
import { git, resolveCommit } from "../git/repo.js";
import type { RunInput } from "./assignments-file.js";

/**
 * Tasks that name a `start_commit`: the workspace must be a repository holding that commit, and
 * the commit must share history with the run's base (what is merged at the end). Checked once the
 * workspace is inspected, before anything starts; every problem at once (exit 2).
 */
export async function checkStartCommits(
  input: Pick<RunInput, "assignments" | "file">,
  repo: { root: string; baseCommit: string } | null,
): Promise<void> {
  const problems: InputProblem[] = [];
  for (const [i, t] of input.assignments.tasks.entries()) {
    if (t.start_commit === undefined) continue;
    const at = { file: input.file, field: `tasks[${i}].start_commit`, task: t.id };
    if (repo === null) {
      problems.push({ ...at, message: "start_commit needs a workspace that is a git repository" });
      continue;
    }
    if ((await resolveCommit(repo.root, t.start_commit)) !== t.start_commit)
      problems.push({ ...at, message: `${t.start_commit} is not a commit of the repository ${repo.root}` });
    else if (!(await sharesHistory(repo.root, t.start_commit, repo.baseCommit)))
      problems.push({
        ...at,
        message: `${t.start_commit} shares no history with HEAD (${repo.baseCommit}): its work could not be merged`,
      });
  }
  if (problems.length > 0)
    throw new InputError(
      problems,
      "Name a commit of this repository that has HEAD's history, or remove start_commit.",
    );
}

async function sharesHistory(root: string, a: string, b: string): Promise<boolean> {
  const r = await git(root, ["merge-base", a, b], { allowExit: [0, 1] });
  return r.exitCode === 0;
}
