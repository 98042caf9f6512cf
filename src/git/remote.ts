import { existsSync } from "node:fs";
import { mkdir, stat } from "node:fs/promises";
import { isAbsolute } from "node:path";
import { GitError } from "./errors.js";
import { branchRef, git, resolveCommit } from "./repo.js";
import { removeWorktree } from "./worktree.js";

/**
 * The git remote of the scale-out backend (docs/SCALING.md): the coordinator publishes each
 * task's base there, workers fetch it and push the task branch, the coordinator fetches that.
 * Every transfer names its refs exactly (no remote is configured in anyone's repository, no
 * tags, no other branches), so a shared remote carries nothing but the runs' own refs.
 */

/** `refs/termorch/<run>/base/<task>`: where a task's start commit is published. */
export function baseRefOf(runId: string, taskId: string): string {
  return `refs/termorch/${runId}/base/${taskId}`;
}

/**
 * `refs/termorch/<run>/attempts/<task>/<delivery>`: where one delivery of a task's job pushes its
 * work. Each has its own, and a push never replaces a ref: a worker that lost its job and pushes
 * late can never overwrite the work of the delivery that took it over (docs/SCALING.md, Fencing).
 */
export function attemptRefOf(runId: string, taskId: string, delivery: number): string {
  return `${attemptRefsOf(runId, taskId)}${delivery}`;
}

/** Every attempt ref of a task is under this. */
export function attemptRefsOf(runId: string, taskId: string): string {
  return `${runRefsOf(runId)}attempts/${taskId}/`;
}

/** Every ref a run publishes on the remote is under this. */
export function runRefsOf(runId: string): string {
  return `refs/termorch/${runId}/`;
}

/** A remote as it may be shown: a URL's password is dropped. */
export function shownRemote(remote: string): string {
  return remote.replace(/^([a-z][a-z0-9+.-]*:\/\/[^/@:]*):[^/@]*@/i, "$1:***@");
}

/**
 * What git said went wrong, in one line: its `fatal:` or `error:` line (what follows it is advice
 * such as "Please make sure you have the correct access rights"), else its last line.
 */
export function gitSaid(stderr: string): string {
  const lines = stderr
    .split("\n")
    .map((l) => l.trim())
    .filter(Boolean);
  const said = lines.find((l) => /^(fatal|error):/.test(l)) ?? lines.at(-1) ?? "";
  return said.replace(/^(fatal|error):\s*/, "");
}

// Transfers never prompt (a remote asking for a password fails at once) and never run the
// remote's hooks on our side; the "--" keeps a remote that starts with "-" from being an option.
async function transfer(repo: string, args: readonly string[], what: string, remote: string): Promise<void> {
  const r = await git(repo, args, { allowExit: [0, 1, 128], retryOnLock: true });
  if (r.exitCode !== 0) {
    const said = gitSaid(r.stderr);
    throw new GitError(
      `could not ${what} the git remote ${shownRemote(remote)}: ${said || `git exited ${r.exitCode}`}`,
      {
        cwd: repo,
        stderr: r.stderr,
        status: r.exitCode,
      },
    );
  }
}

/** Pushes `commit` to `ref` on the remote (forced: a re-run of the same task publishes its base again). */
export async function publishCommit(
  repo: string,
  remote: string,
  commit: string,
  ref: string,
): Promise<void> {
  await transfer(
    repo,
    ["push", "--quiet", "--no-verify", "--", remote, `+${commit}:${ref}`],
    "publish to",
    remote,
  );
}

/** Fetches one ref of the remote into the same ref here; answers the commit it holds. */
export function fetchRef(repo: string, remote: string, ref: string): Promise<string> {
  return fetchInto(repo, remote, ref, ref);
}

/** Fetches one ref of the remote into another ref here (forced); answers the commit it holds. */
export async function fetchInto(repo: string, remote: string, ref: string, into: string): Promise<string> {
  await transfer(
    repo,
    ["fetch", "--quiet", "--no-tags", "--no-write-fetch-head", "--", remote, `+${ref}:${into}`],
    "fetch from",
    remote,
  );
  const commit = await resolveCommit(repo, into);
  if (commit === null)
    throw new GitError(`fetched ${ref} from ${shownRemote(remote)}, but it is not a commit`, { cwd: repo });
  return commit;
}

/** Pushes a task branch to an attempt's ref on the remote (never forced: see attemptRefOf). */
export async function pushAttempt(repo: string, remote: string, branch: string, ref: string): Promise<void> {
  await transfer(
    repo,
    ["push", "--quiet", "--no-verify", "--", remote, `${branchRef(branch)}:${ref}`],
    "push to",
    remote,
  );
}

/** The refs of the remote under `prefix` (ending in "/"). */
export async function remoteRefsUnder(repo: string, remote: string, prefix: string): Promise<string[]> {
  const r = await git(repo, ["ls-remote", "--refs", "--", remote, `${prefix}*`], { allowExit: [0, 2, 128] });
  if (r.exitCode === 128)
    throw new GitError(`could not list the refs of the git remote ${shownRemote(remote)}`, {
      cwd: repo,
      stderr: r.stderr,
      status: r.exitCode,
    });
  return r.stdout
    .split("\n")
    .map((line) => line.split("\t")[1] ?? "")
    .filter((ref) => ref.startsWith(prefix));
}

/**
 * Deletes every ref of the remote under `prefix`; answers how many there were. Throws when the
 * remote cannot be listed or refuses the deletion.
 */
export async function deleteRemoteRefsUnder(repo: string, remote: string, prefix: string): Promise<number> {
  const refs = await remoteRefsUnder(repo, remote, prefix);
  if (!(await deleteRemoteRefs(repo, remote, refs)))
    throw new GitError(`the git remote ${shownRemote(remote)} refused to delete ${prefix}*`, { cwd: repo });
  return refs.length;
}

/** Deletes refs on the remote (what a finished run published there); answers false when the remote refused. */
export async function deleteRemoteRefs(
  repo: string,
  remote: string,
  refs: readonly string[],
): Promise<boolean> {
  if (refs.length === 0) return true;
  const r = await git(
    repo,
    ["push", "--quiet", "--no-verify", "--", remote, ...refs.map((ref) => `:${ref}`)],
    {
      allowExit: [0, 1, 128],
    },
  );
  return r.exitCode === 0;
}

/**
 * Why the workers' git remote cannot serve a run, or null when it can: a remote on this host must
 * be a bare repository, and any remote must list its refs and take a push (checked with a probe
 * ref of `repo`'s HEAD, `probe`, deleted at once; a repository with no commit yet is only listed).
 * Asked before anything of the run exists, so a wrong remote costs nothing.
 */
export async function remoteProblem(repo: string, remote: string, probe: string): Promise<string | null> {
  const path = remote.startsWith("file://") ? decodeURIComponent(new URL(remote).pathname) : remote;
  if (isAbsolute(path)) {
    if (!existsSync(path)) return `${path} does not exist`;
    const bare = await git(path, ["rev-parse", "--is-bare-repository"], { allowExit: [0, 128] });
    if (bare.exitCode !== 0 || bare.stdout.trim() !== "true") return `${path} is not a bare git repository`;
  }
  const listed = await git(repo, ["ls-remote", "--refs", "--", remote, probe], { allowExit: [0, 2, 128] });
  if (listed.exitCode === 128) return `it cannot be read: ${gitSaid(listed.stderr)}`;
  const head = await resolveCommit(repo, "HEAD");
  if (head === null) return null;
  const pushed = await git(repo, ["push", "--quiet", "--no-verify", "--", remote, `${head}:${probe}`], {
    allowExit: [0, 1, 128],
  });
  if (pushed.exitCode !== 0) return `it does not take pushes: ${gitSaid(pushed.stderr)}`;
  if (!(await deleteRemoteRefs(repo, remote, [probe]))) return `it does not let a ref be deleted (${probe})`;
  return null;
}

/** A run's refs on a remote, and how recent the newest commit they hold is (epoch ms). */
export interface RemoteRun {
  refs: string[];
  newestMs: number;
}

/**
 * The runs whose refs a remote holds (`refs/termorch/<run>/...`), fetched into `scratch` (an
 * empty folder, made a bare repository here) to read their commits' times: a run's refs are as
 * old as the newest commit they hold (its merges and its tasks' work are made while it runs).
 */
export async function remoteRuns(remote: string, scratch: string): Promise<Map<string, RemoteRun>> {
  await git(scratch, ["init", "--quiet", "--bare"]);
  await transfer(
    scratch,
    [
      "fetch",
      "--quiet",
      "--no-tags",
      "--no-write-fetch-head",
      "--",
      remote,
      "+refs/termorch/*:refs/termorch/*",
    ],
    "fetch from",
    remote,
  );
  const listed = await git(scratch, [
    "for-each-ref",
    "--format=%(refname)%00%(committerdate:unix)",
    "refs/termorch/",
  ]);
  const runs = new Map<string, RemoteRun>();
  for (const line of listed.stdout.split("\n")) {
    const [ref = "", time = "0"] = line.split("\0");
    const runId = ref.split("/")[2];
    if (!runId) continue;
    const run = runs.get(runId) ?? { refs: [], newestMs: 0 };
    run.refs.push(ref);
    run.newestMs = Math.max(run.newestMs, Number(time) * 1000);
    runs.set(runId, run);
  }
  return runs;
}

/**
 * A bare repository at `dir` for a worker's copies of one remote's commits (created when it is
 * not there yet): task worktrees are added to it, so it needs no checkout of its own.
 */
export async function ensureBareRepo(dir: string): Promise<void> {
  if ((await stat(dir).catch(() => null))?.isDirectory() && (await resolveGitDir(dir))) return;
  await mkdir(dir, { recursive: true, mode: 0o700 });
  await git(dir, ["init", "--quiet", "--bare"]);
}

async function resolveGitDir(dir: string): Promise<boolean> {
  const r = await git(dir, ["rev-parse", "--is-bare-repository"], { allowExit: [0, 128] });
  return r.exitCode === 0 && r.stdout.trim() === "true";
}

/**
 * A task's worktree and branch in a worker's repository, gone: what an earlier delivery of its
 * job left, or this delivery's once its branch was pushed.
 */
export async function dropWorkerTask(repo: string, worktree: string, branch: string): Promise<void> {
  if (existsSync(worktree)) await removeWorktree(repo, worktree);
  await pruneWorktrees(repo);
  await dropRef(repo, branchRef(branch));
}

/** Forgets the worktrees of a worker's repository whose folders are gone (an earlier life's). */
export async function pruneWorktrees(repo: string): Promise<void> {
  await git(repo, ["worktree", "prune"], { allowExit: [0, 128] });
}

/** A ref of a worker's repository deleted, if it is there (a task's fetched base once it is done with). */
export async function dropRef(repo: string, ref: string): Promise<void> {
  await git(repo, ["update-ref", "-d", ref], { allowExit: [0, 1, 128] });
}
