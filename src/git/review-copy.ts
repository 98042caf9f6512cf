/**
 * The copy of a task's work a reviewer reads: a clone of the repository that shares its objects
 * (`clone --shared`), checked out at the task's commit. It is no worktree of the repository: a
 * reviewer that commits, moves a ref or writes the copy's config changes nothing of the run's,
 * and whatever it changes goes with the copy.
 */
import { appendFileSync, mkdirSync, rmSync } from "node:fs";
import { dirname, join } from "node:path";
import { git, gitBuffer, gitLine } from "./repo.js";

/**
 * Makes `dir` afresh: a copy of `root`'s repository checked out (detached) at `commit`, git
 * told to leave `own` alone (termorch's folder in it, where the verdict is written).
 */
export async function makeReviewCopy(root: string, dir: string, commit: string, own: string): Promise<void> {
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dirname(dir), { recursive: true, mode: 0o700 });
  await git(dirname(dir), ["clone", "--quiet", "--shared", "--no-checkout", "--", root, dir]);
  // No way back: a push from the copy would move the repository's refs.
  await git(dir, ["remote", "remove", "origin"]);
  await git(dir, ["checkout", "--quiet", "--detach", commit]);
  appendFileSync(join(dir, ".git", "info", "exclude"), `\n/${own}/\n`);
  // termorch's folder is made here, empty: whatever the commit holds there (a verdict planted by
  // the task's agent, a link out of the copy) is not the reviewer's.
  rmSync(join(dir, own), { recursive: true, force: true });
  mkdirSync(join(dir, own), { mode: 0o700 });
}

/**
 * What the reviewer changed in its copy: files (tracked or not, ignored ones aside) that differ
 * from `commit`, and `HEAD` when it moved; none of `ignore` (its CLI's own files).
 */
export async function reviewCopyChanges(
  dir: string,
  commit: string,
  ignore: (path: string) => boolean,
): Promise<string[]> {
  const changed: string[] = [];
  const head = await gitLine(dir, ["rev-parse", "--verify", "--quiet", "HEAD"], { allowExit: [0, 1] }).catch(
    () => "",
  );
  if (head !== commit) changed.push("HEAD");
  const status = await git(dir, ["status", "--porcelain=v1", "-z", "--untracked-files=all", "--no-renames"]);
  for (const entry of status.stdout.split("\0")) {
    const path = entry.slice(3);
    if (entry.length > 3 && !ignore(path)) changed.push(path);
  }
  return changed;
}

/** The task's change as a patch (`git diff from to`), cut at `maxBytes`; `cut`: it was longer. */
export async function changeText(
  root: string,
  from: string,
  to: string,
  maxBytes: number,
): Promise<{ stat: string; patch: string; cut: boolean }> {
  const stat = await git(root, ["diff", "--stat=200", "--no-color", from, to]);
  const patch = await gitBuffer(root, ["diff", "--no-color", "--no-ext-diff", "--binary", from, to]);
  const cut = patch.stdout.length > maxBytes;
  return {
    stat: stat.stdout.trimEnd(),
    patch: patch.stdout
      .subarray(0, maxBytes)
      .toString("utf8")
      .replace(/\uFFFD+$/, ""),
    cut,
  };
}
