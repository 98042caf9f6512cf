import { createHash } from "node:crypto";
import { realpathSync } from "node:fs";
import { chmod, lstat, mkdir, readlink } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { EnvironmentError } from "../errors.js";

/**
 * Every name termorch gives to what it creates outside the run directory: tmux sessions, git
 * branches, worktrees, and its per-user folder with what lives there (worktrees, workspace
 * locks, the run registry, the tmux config). Operator commands find a run's leftovers by these
 * names, so they are built here only.
 */

type Env = Readonly<Record<string, string | undefined>>;

/** `termorch-<run>-<task>`: a task's tmux session (every attempt reuses it once the last has ended). */
export function sessionName(runId: string, taskId: string): string {
  return `${sessionPrefix(runId)}${taskId}`;
}

/** What every session of a run starts with. */
export function sessionPrefix(runId: string): string {
  return `termorch-${runId}-`;
}

/** `termorch/<run>/<task>`: a task's branch (short name). */
export function taskBranch(runId: string, taskId: string): string {
  return `termorch/${runId}/${taskId}`;
}

/** The refs a run's redos keep: each redone task's earlier result (a branch move alone would let gc take it). */
export const redoRefsOf = (runId: string): string => `refs/termorch/${runId}/redo/`;
export const redoRefOf = (runId: string, taskId: string): string => `${redoRefsOf(runId)}${taskId}`;
/** The refs that keep failed attempts' work (retry_from): `<prefix><task>/<n>`. */
export const workRefsOf = (runId: string): string => `refs/termorch/${runId}/work/`;
export const workRefOf = (runId: string, taskId: string, n: number): string =>
  `${workRefsOf(runId)}${taskId}/${n}`;
/** A halted run's cleanly merged work: the start_commit of its artifacts/redo files. */
export const redoBaseRefOf = (runId: string): string => `refs/termorch/${runId}/redo-base`;

/** `termorch/<run>/integration`: where a run's tasks are merged before the target moves. */
export function integrationBranch(runId: string): string {
  return `termorch/${runId}/integration`;
}

/** `refs/heads/termorch/<run>/moved/<branch>`: keeps the commit an agent moved the target to. */
export function movedBranch(runId: string, targetRef: string): string {
  return `${runBranchesPrefix(runId)}moved/${targetRef.replace(/^refs\/heads\//, "")}`;
}

/** `refs/heads/termorch/<run>/`: every branch of a run is below it. */
export function runBranchesPrefix(runId: string): string {
  return `refs/heads/termorch/${runId}/`;
}

/** What termorch writes at the top of a run directory (docs/ARCHITECTURE.md: the run directory). */
export const RUN_FILES = [
  "execution_report.json",
  "state.json",
  "handoff.json",
  "events.jsonl",
  "logs/x",
  "status/x",
  "artifacts/x",
  ".termorch/x",
] as const;

/** The names termorch writes directly in a run directory (a past run's are hidden from a sandbox). */
export const RUN_TOP_NAMES: readonly string[] = [...new Set(RUN_FILES.map((f) => f.split("/")[0]!))];

/** The HTML report's name in a run's folder. */
export const REPORT_HTML = "report.html";

/** The session handoff's name in a run's folder, beside the report. */
export const HANDOFF_FILE = "handoff.json";

/** termorch's per-user folder, `$TMPDIR/termorch-<uid>`; {@link ensureUserDir} creates and checks it. */
export function userDir(): string {
  return join(tmpdir(), `termorch-${process.getuid?.() ?? "user"}`);
}

/**
 * Per-user folder of `termorch mcp`: documents given inline, a folder each (kept for their run's
 * resume), and the files of a detached driver while it starts.
 */
export function mcpDir(): string {
  return join(userDir(), "mcp");
}

/** Per-user folder of task worktrees, one folder per run. */
export function worktreesRoot(): string {
  return join(userDir(), "worktrees");
}

/** A run's folder of worktrees. */
export function runWorktreesDir(runId: string): string {
  return join(worktreesRoot(), runId);
}

/** `<user dir>/worktrees/<run>/<task>`: a task's worktree. */
export function taskWorktree(runId: string, taskId: string): string {
  return join(runWorktreesDir(runId), taskId);
}

/** The detached worktree where run-level gates check the integration commit. */
export function integrationWorktree(runId: string): string {
  return join(runWorktreesDir(runId), ".integration");
}

/** Per-user folder of the warm worktree pool: a folder per repository (git/worktree-pool.ts). */
export function poolRoot(): string {
  return join(userDir(), "pool");
}

/** A key of a folder by its real path, so every spelling of it shares one. */
function pathKey(repo: string): string {
  return createHash("sha256").update(realpathSync(repo)).digest("hex").slice(0, 32);
}

/** The pool folder of one repository's worktrees. */
export function repoPoolDir(repo: string): string {
  return join(poolRoot(), pathKey(repo));
}

/** The lock every change to one repository's pool holds, across processes. */
export function poolLockPath(repo: string): string {
  return join(locksDir(), `pool-${pathKey(repo)}.lock`);
}

/** Per-user folder of the past runs' folders (cleaned, unregistered): fs/registry.ts. */
export function pastRunsDir(): string {
  return join(userDir(), "past-runs");
}

/** Per-user folder of workspace locks; outside the workspace so taking a lock writes nothing into it. */
export function locksDir(): string {
  return join(userDir(), "locks");
}

/** A workspace's lock file: named by a hash of its real path, so every spelling of it shares one lock. */
export function lockPath(workspace: string): string {
  return join(locksDir(), `${pathKey(workspace)}.lock`);
}

/** Where every run registers its run directory by id ($TERMORCH_REGISTRY, else in the per-user folder). */
export function registryDir(env: Env = process.env): string {
  return env.TERMORCH_REGISTRY ?? defaultRegistryDir();
}

/** The registry's folder in the per-user folder. */
function defaultRegistryDir(): string {
  return join(userDir(), "runs");
}

/** Whether the registry is the default one inside the per-user folder. */
export function registryInUserDir(env: Env = process.env): boolean {
  return env.TERMORCH_REGISTRY === undefined;
}

const ensured = new Map<string, Promise<string>>();

/**
 * Creates the per-user folder (mode 0700) once per process and checks it before anything is put
 * there: in a shared /tmp another user could have made the name first, as a folder of theirs or a
 * symlink, and then see or swap our worktrees, locks and tmux config. A folder of ours that others
 * can only read (older versions let git create it 0755) is tightened to 0700; one they can
 * write to, or one that is not ours, is refused. Returns its path.
 */
export function ensureUserDir(): Promise<string> {
  const dir = userDir();
  let done = ensured.get(dir);
  if (!done) {
    done = makeUserDir(dir);
    ensured.set(dir, done);
    // A failure is not remembered: the operator may fix the folder and a daemon try again.
    done.catch(() => ensured.delete(dir));
  }
  return done;
}

async function makeUserDir(dir: string): Promise<string> {
  await mkdir(dir, { mode: 0o700 }).catch((error: NodeJS.ErrnoException) => {
    if (error.code !== "EEXIST") throw error;
  });
  const refuse = (what: string, fix: string): never => {
    throw new EnvironmentError(`termorch's per-user folder ${dir} ${what}; ${fix}`);
  };
  const uid = process.getuid?.();
  const remove = `remove it (after checking what is in it) and run termorch again, or point TMPDIR elsewhere`;
  let st = await lstat(dir);
  if (st.isSymbolicLink()) refuse("is a symbolic link, not a folder", remove);
  if (!st.isDirectory()) refuse("is not a folder", remove);
  if (uid !== undefined && st.uid !== uid)
    refuse(`belongs to uid ${st.uid}, not to you (uid ${uid})`, remove);
  if ((st.mode & 0o022) !== 0)
    refuse(
      `can be written by other users (mode ${(st.mode & 0o777).toString(8)})`,
      `check nothing in it is someone else's, then run chmod 700 ${dir}`,
    );
  if ((st.mode & 0o777) !== 0o700) {
    await chmod(dir, 0o700);
    st = await lstat(dir);
    if ((st.mode & 0o777) !== 0o700)
      refuse(`has mode ${(st.mode & 0o777).toString(8)} and could not be made 700`, `run chmod 700 ${dir}`);
  }
  // Its folders are created with mkdir -p and written into: one that is a link would put
  // worktrees, locks, pooled worktrees or run records wherever it points.
  for (const sub of [locksDir(), poolRoot(), worktreesRoot(), defaultRegistryDir(), pastRunsDir()]) {
    const found = await lstat(sub).catch(() => null);
    if (found?.isSymbolicLink() || (found && !found.isDirectory()))
      refuse(
        `holds ${sub}, which is ${found.isSymbolicLink() ? `a symbolic link (to ${await readlink(sub)})` : "not a folder"}`,
        `remove ${sub} (after checking what it is) and run termorch again`,
      );
  }
  return dir;
}
