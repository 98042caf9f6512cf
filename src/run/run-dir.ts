import { existsSync, mkdirSync, readFileSync, realpathSync, writeFileSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { StateHeader } from "../contract/state.js";
import { InputError } from "../errors.js";
import { RUN_FILES, RUN_TOP_NAMES } from "../fs/names.js";
import { firstLink, isEmptyOrMissing } from "../fs/paths.js";
import { ignoredPaths, workTreeTop } from "../git/repo.js";

/** The run directory and every name termorch writes directly in it: none may be a symbolic link. */
function linkInRunDir(dir: string): string | null {
  const names = [".gitignore", ...RUN_TOP_NAMES];
  return firstLink([dir, ...names.map((name) => join(dir, name))]);
}

/** Where a new run's files go. */
export type RunDirPlan =
  /** Into `dir` itself; `markIgnored`: write a `.gitignore` of `*` there first (a new folder in a work tree). */
  | { kind: "here"; dir: string; markIgnored: boolean }
  /**
   * The requested folder is inside a git work tree that does not ignore it: each run gets
   * `<base>/<run_id>`, under a `.termorch/` folder that ignores itself.
   */
  | { kind: "apart"; requested: string; base: string };

/** A run whose files are already in a folder. */
export interface HeldRun {
  runId: string;
  finished: boolean;
}

/** The run whose state.json is in `dir`, if any (an unreadable one still counts: it is not ours to overwrite). */
export function heldRun(dir: string): HeldRun | null {
  const file = join(dir, "state.json");
  if (!existsSync(file)) return null;
  try {
    // Loosely: a state.json of another version still names the run that holds the folder.
    const s = StateHeader.safeParse(JSON.parse(readFileSync(file, "utf8")));
    if (!s.success) return { runId: "(unknown)", finished: false };
    return { runId: s.data.run_id ?? "(unknown)", finished: s.data.phase === "reported" };
  } catch {
    return { runId: "(unreadable state.json)", finished: false };
  }
}

/**
 * The work tree that would show `dir`'s run files in `git status`, or null: `dir` is outside
 * every work tree, or git ignores everything termorch writes there.
 */
export async function gitSightOf(dir: string): Promise<string | null> {
  let probe = dir;
  while (!existsSync(probe) && dirname(probe) !== probe) probe = dirname(probe);
  const root = await workTreeTop(probe);
  if (root === null) return null;
  // git names its top level resolved; so must the path be (through a symlinked folder, say).
  const rel = relative(root, join(realpathSync(probe), relative(probe, dir)));
  const paths = RUN_FILES.map((f) => (rel ? `${rel}/${f}` : f));
  return (await ignoredPaths(root, paths)).length === paths.length ? null : root;
}

/**
 * Decides where a new run's files go (never over another run's, never where `git status` would
 * show them). `explicit`: the user named the folder (`--out`), so it is used as it is or refused.
 */
export async function planRunDir(requested: string, explicit: boolean): Promise<RunDirPlan> {
  const link = linkInRunDir(requested);
  if (link)
    throw new InputError(
      [{ file: link, message: "termorch does not write its run files through symbolic links" }],
      "Remove the link, or give the run a real folder with --out DIR; nothing was started.",
    );
  const held = heldRun(requested);
  const sight = await gitSightOf(requested);
  if (sight !== null && !explicit) {
    return { kind: "apart", requested, base: join(requested, ".termorch", "runs") };
  }
  if (held) {
    throw new InputError(
      [
        {
          file: requested,
          message: `this folder holds the files of run ${held.runId} (${held.finished ? "finished" : "not finished"}); a second run there would mix its logs, status files and report with that run's`,
        },
      ],
      held.finished
        ? "Give the new run its own folder with --out DIR, or move the earlier run's files away first."
        : `Finish that run with: termorch resume ${requested} — or give the new run its own folder with --out DIR.`,
    );
  }
  if (sight !== null) {
    if (!isEmptyOrMissing(requested, [".gitignore"])) {
      throw new InputError(
        [
          {
            file: requested,
            message: `--out names a folder inside the git work tree ${sight} that git does not ignore and that is not empty: termorch's files would show in git status`,
          },
        ],
        "Choose a folder outside the repository, one git ignores, or a new folder (termorch then marks it ignored).",
      );
    }
    return { kind: "here", dir: requested, markIgnored: true };
  }
  return { kind: "here", dir: requested, markIgnored: false };
}

/** The run directory of `runId` under a plan. */
export function runDirOf(plan: RunDirPlan, runId: string): string {
  return plan.kind === "here" ? plan.dir : join(plan.base, runId);
}

/** Creates what keeps the run's files out of git's sight (before any of them is written). */
export function prepareRunDir(plan: RunDirPlan, runId: string): string {
  const dir = runDirOf(plan, runId);
  // A `.gitignore` of `*` ignores its whole folder, itself included: nothing in the user's
  // repository (its .gitignore, .git/info/exclude) has to change.
  const ignoreFile =
    plan.kind === "apart"
      ? join(plan.requested, ".termorch", ".gitignore")
      : plan.markIgnored
        ? join(dir, ".gitignore")
        : null;
  mkdirSync(dir, { recursive: true });
  if (ignoreFile && !existsSync(ignoreFile))
    writeFileSync(ignoreFile, "# termorch's run files (logs, status, reports): kept out of git\n*\n");
  return dir;
}

/**
 * Why a report that is not a run's own (an input error, a dry run) must not be written into
 * `dir`, or null when it may: `dir` exists, holds no run's files and is out of git's sight.
 */
export async function looseReportBlocker(dir: string): Promise<string | null> {
  const link = linkInRunDir(dir);
  if (link) return `${link} is not written through`;
  if (!existsSync(dir)) return `${dir} does not exist`;
  const held = heldRun(dir);
  if (held) return `${dir} holds the files of run ${held.runId}`;
  const sight = await gitSightOf(dir);
  if (sight) return `${dir} is inside the git work tree ${sight}, where git status would show it`;
  return null;
}
