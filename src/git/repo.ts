import { execFile } from "node:child_process";
import { stat } from "node:fs/promises";
import { setTimeout as delay } from "node:timers/promises";
import { GitError, GitVersionError } from "./errors.js";

/**
 * Name and address of git calls that need an identity but make no commit of record (and of
 * commits when the repository has no user configured: see commitIdentity).
 */
export const TERMORCH_IDENTITY = { name: "termorch", email: "termorch@localhost" } as const;

/** `merge-tree --write-tree` (in-memory merges with structured conflict messages) arrived in git 2.38. */
export const MIN_GIT_VERSION = { major: 2, minor: 38 } as const;

/** Options of one git invocation. */
export interface GitOptions {
  /** Bytes or text fed to git's stdin. */
  input?: string | Uint8Array;
  /** Exit codes that are answers (e.g. 1 from `merge-base --is-ancestor`) rather than failures; default [0]. */
  allowExit?: readonly number[];
  /** Extra environment for this call only. */
  env?: Readonly<Record<string, string>>;
  /** Retry when another git process holds a lock file (default true). */
  retryOnLock?: boolean;
}

/** What a git invocation printed; stdout is raw (not trimmed), so `-z` output stays intact. */
export interface GitResult {
  stdout: string;
  stderr: string;
  exitCode: number;
}

/** Like GitResult, with stdout as bytes (patches, blobs). */
export interface GitBufferResult {
  stdout: Buffer;
  stderr: string;
  exitCode: number;
}

// Configuration forced on every call. Hooks are off because termorch's own checkouts and
// commits must not run the user's pre-commit/post-checkout tooling (slow, interactive, or
// failing in a half-prepared worktree); signing is off because it could prompt for a passphrase.
// The fsmonitor is off because it is a command from the repository's config that status, diff
// and add run: an agent can write that config (its worktree shares the repository's .git), and
// termorch's git would run its command with termorch's environment.
const CONFIG_ARGS = [
  "-c",
  "core.hooksPath=/dev/null",
  "-c",
  "core.fsmonitor=false",
  "-c",
  "commit.gpgSign=false",
  "-c",
  "color.ui=false",
  "-c",
  "core.pager=cat",
];

// Deterministic and non-interactive: English messages (merge-tree's are parsed), no prompt,
// no pager or editor, no opportunistic index refresh (read-only queries must not write the
// user's index). Variables that redirect git to another repository are removed: termorch may
// itself be started from a git hook, where GIT_DIR and GIT_INDEX_FILE are set.
const ENV: Record<string, string | undefined> = {
  LC_ALL: "C",
  LANGUAGE: undefined,
  GIT_TERMINAL_PROMPT: "0",
  GIT_PAGER: "cat",
  PAGER: "cat",
  GIT_EDITOR: "true",
  GIT_SEQUENCE_EDITOR: "true",
  GIT_OPTIONAL_LOCKS: "0",
  GIT_AUTHOR_NAME: TERMORCH_IDENTITY.name,
  GIT_AUTHOR_EMAIL: TERMORCH_IDENTITY.email,
  GIT_COMMITTER_NAME: TERMORCH_IDENTITY.name,
  GIT_COMMITTER_EMAIL: TERMORCH_IDENTITY.email,
  GIT_AUTHOR_DATE: undefined,
  GIT_COMMITTER_DATE: undefined,
  GIT_DIR: undefined,
  GIT_WORK_TREE: undefined,
  GIT_INDEX_FILE: undefined,
  GIT_OBJECT_DIRECTORY: undefined,
  GIT_ALTERNATE_OBJECT_DIRECTORIES: undefined,
  GIT_COMMON_DIR: undefined,
  GIT_NAMESPACE: undefined,
  GIT_PREFIX: undefined,
};

const LOCK_CONTENTION =
  /Unable to create '[^']*\.lock': File exists|\.lock': File exists|Another git process seems to be running/;
const LOCK_ATTEMPTS = 8;

/** Runs `git <args>` in `cwd` without a shell; throws GitError unless the exit code is allowed. */
export async function git(cwd: string, args: readonly string[], opts: GitOptions = {}): Promise<GitResult> {
  const r = await run(cwd, args, opts);
  return { stdout: r.stdout.toString("utf8"), stderr: r.stderr, exitCode: r.exitCode };
}

/** `git()` for output that must stay byte-exact. */
export async function gitBuffer(
  cwd: string,
  args: readonly string[],
  opts: GitOptions = {},
): Promise<GitBufferResult> {
  return run(cwd, args, opts);
}

async function run(cwd: string, args: readonly string[], opts: GitOptions): Promise<GitBufferResult> {
  const allow = opts.allowExit ?? [0];
  for (let attempt = 1; ; attempt++) {
    const r = await spawnGit(cwd, [...CONFIG_ARGS, ...args], opts);
    const stderr = r.stderr.toString("utf8");
    if (r.exitCode === null) {
      throw new GitError(`could not run git ${args.join(" ")} in ${cwd}: ${r.failure}`, {
        cwd,
        args,
        status: null,
        stderr,
      });
    }
    // Checked before allowExit: lock contention is never the answer a caller asked for.
    if (
      r.exitCode !== 0 &&
      opts.retryOnLock !== false &&
      attempt < LOCK_ATTEMPTS &&
      LOCK_CONTENTION.test(stderr)
    ) {
      // Another git process (a concurrent task setup, or the user) holds the lock; it is
      // released within milliseconds, so back off briefly with jitter and try again.
      await delay(15 * 2 ** attempt + Math.floor(Math.random() * 20));
      continue;
    }
    if (allow.includes(r.exitCode)) return { stdout: r.stdout, stderr, exitCode: r.exitCode };
    throw new GitError(
      `git ${args.join(" ")} failed in ${cwd} (exit ${r.exitCode}): ${stderr.trim() || "(no message)"}`,
      { cwd, args, status: r.exitCode, stderr },
    );
  }
}

interface Spawned {
  stdout: Buffer;
  stderr: Buffer;
  /** null when git could not be started, was killed, or printed more than MAX_OUTPUT. */
  exitCode: number | null;
  /** Why exitCode is null. */
  failure: string;
}

const MAX_OUTPUT = 512 * 1024 * 1024;

/**
 * One git process, without a shell. node:child_process rather than execa: a run makes some 40
 * git calls a task, and execa's machinery cost 2.4 ms of CPU per call against 1.0 ms (100 calls
 * of `git --version`, measured), as it did for tmux (src/tmux/server.ts).
 */
function spawnGit(cwd: string, argv: readonly string[], opts: GitOptions): Promise<Spawned> {
  return new Promise((resolve) => {
    const child = execFile(
      "git",
      argv,
      { cwd, env: { ...process.env, ...ENV, ...opts.env }, encoding: "buffer", maxBuffer: MAX_OUTPUT },
      (error, stdout, stderr) => {
        const code = error?.code;
        resolve({
          stdout,
          stderr,
          exitCode: error === null ? 0 : typeof code === "number" ? code : null,
          failure: error === null ? "" : error.message,
        });
      },
    );
    // Without input git gets an empty stdin, never the terminal's: a git that asks must not wait.
    child.stdin?.on("error", () => {
      // git exited before reading all of it (EPIPE): its exit code says what happened.
    });
    child.stdin?.end(opts.input);
  });
}

/** First line of git's stdout, trimmed. */
export async function gitLine(cwd: string, args: readonly string[], opts: GitOptions = {}): Promise<string> {
  const r = await git(cwd, args, opts);
  return r.stdout.split("\n", 1)[0]?.trim() ?? "";
}

/** A parsed `git --version`. */
export interface GitVersion {
  major: number;
  minor: number;
  patch: number;
  raw: string;
}

let versionPromise: Promise<GitVersion> | undefined;

/** The installed git's version (asked once per process). */
function gitVersion(): Promise<GitVersion> {
  versionPromise ??= readVersion();
  return versionPromise;
}

async function readVersion(): Promise<GitVersion> {
  let raw: string;
  try {
    raw = (await git(process.cwd(), ["--version"])).stdout.trim();
  } catch (err) {
    versionPromise = undefined;
    throw new GitVersionError(
      `git could not be run (${err instanceof Error ? err.message : String(err)}); install git ${MIN_GIT_VERSION.major}.${MIN_GIT_VERSION.minor} or newer and make sure it is on PATH`,
      null,
      `${MIN_GIT_VERSION.major}.${MIN_GIT_VERSION.minor}`,
    );
  }
  const m = /(\d+)\.(\d+)(?:\.(\d+))?/.exec(raw);
  if (!m) throw new GitError(`cannot parse the output of git --version: ${raw}`);
  return { major: Number(m[1]), minor: Number(m[2]), patch: Number(m[3] ?? 0), raw };
}

/** Throws GitVersionError when git is missing or older than 2.38. */
export async function requireGitVersion(): Promise<GitVersion> {
  const v = await gitVersion();
  const { major, minor } = MIN_GIT_VERSION;
  if (v.major < major || (v.major === major && v.minor < minor)) {
    throw new GitVersionError(
      `git ${v.major}.${v.minor}.${v.patch} is too old: termorch needs git ${major}.${minor} or newer (for merge-tree --write-tree, its in-memory conflict check); upgrade git and run again`,
      `${v.major}.${v.minor}.${v.patch}`,
      `${major}.${minor}`,
    );
  }
  return v;
}

/** Where a work tree stands. */
export interface RepoInfo {
  /** Absolute, symlink-free top-level directory of the work tree. */
  root: string;
  /** Commit HEAD points to; null on an unborn branch (no commit yet). */
  head: string | null;
  /** Full name of the checked-out branch (`refs/heads/main`); null when HEAD is detached. */
  ref: string | null;
}

/** Describes the git work tree `dir` is in, or null when it is in none. */
export async function repoInfo(dir: string): Promise<RepoInfo | null> {
  const st = await stat(dir).catch(() => null);
  if (!st?.isDirectory()) return null;
  const top = await git(dir, ["rev-parse", "--show-toplevel"], { allowExit: [0, 128] });
  if (top.exitCode !== 0) {
    // A repository git refuses to open is not "no repository": saying so would make termorch
    // run tasks unisolated in what the user thinks is a git workspace.
    if (/dubious ownership|safe\.directory/.test(top.stderr)) {
      throw new GitError(`git refuses to open the repository at ${dir}: ${top.stderr.trim()}`, {
        cwd: dir,
        args: ["rev-parse", "--show-toplevel"],
        status: top.exitCode,
        stderr: top.stderr,
      });
    }
    return null;
  }
  const root = top.stdout.trim();
  if (!root) return null;
  const [head, ref] = await Promise.all([
    git(root, ["rev-parse", "-q", "--verify", "HEAD^{commit}"], { allowExit: [0, 1, 128] }),
    git(root, ["symbolic-ref", "-q", "HEAD"], { allowExit: [0, 1] }),
  ]);
  return {
    root,
    head: head.exitCode === 0 ? head.stdout.trim() : null,
    ref: ref.exitCode === 0 ? ref.stdout.trim() : null,
  };
}

/**
 * Tracked paths whose content differs from HEAD in the index or the work tree (staged or
 * not), sorted; both sides of a staged rename. Untracked files are not changes here.
 */
export async function dirtyTrackedFiles(root: string): Promise<string[]> {
  const r = await git(root, ["status", "--porcelain=v1", "-z", "--untracked-files=no"]);
  const tokens = r.stdout.split("\0");
  const files = new Set<string>();
  for (let i = 0; i < tokens.length; i++) {
    const entry = tokens[i];
    if (!entry || entry.length < 4) continue;
    const xy = entry.slice(0, 2);
    files.add(entry.slice(3));
    // Renames and copies carry their source path as the next NUL-separated field.
    if (xy.includes("R") || xy.includes("C")) {
      const from = tokens[++i];
      if (from) files.add(from);
    }
  }
  return [...files].sort();
}

/** The commit `rev` names, or null when it names none. */
export async function resolveCommit(repo: string, rev: string): Promise<string | null> {
  const r = await git(repo, ["rev-parse", "-q", "--verify", "--end-of-options", `${rev}^{commit}`], {
    allowExit: [0, 1, 128],
  });
  return r.exitCode === 0 ? r.stdout.trim() : null;
}

/** The commit `rev` names; throws GitError when there is none. */
export async function requireCommit(repo: string, rev: string): Promise<string> {
  const sha = await resolveCommit(repo, rev);
  if (!sha) throw new GitError(`${rev} does not name a commit in ${repo}`, { cwd: repo });
  return sha;
}

/** The root tree of a commit. */
export async function treeOf(repo: string, commit: string): Promise<string> {
  return gitLine(repo, ["rev-parse", "--verify", "--end-of-options", `${commit}^{tree}`]);
}

/** Full ref name for a branch given short (`termorch/r/A`) or full (`refs/heads/...`). */
export function branchRef(branch: string): string {
  return branch.startsWith("refs/") ? branch : `refs/heads/${branch}`;
}

/**
 * The subset of `commits` not reachable from any other of them (`merge-base --independent`),
 * in the order given, without duplicates.
 */
export async function independentCommits(repo: string, commits: readonly string[]): Promise<string[]> {
  const unique = [...new Set(commits)];
  if (unique.length <= 1) return unique;
  const r = await git(repo, ["merge-base", "--independent", ...unique]);
  const keep = new Set(r.stdout.split("\n").map((s) => s.trim()));
  return unique.filter((c) => keep.has(c));
}

/** Who a commit is by: git's user.name and user.email. */
export interface Identity {
  name: string;
  email: string;
}

/** An author as a commit records it, date included (`<seconds> <+hhmm>`), e.g. when re-creating a commit. */
export interface DatedIdentity extends Identity {
  date: string;
}

/**
 * Who termorch's commits are by: `override` (the config's `git.author`), else the repository's
 * configured user (local, global and system config, as `git commit` would use), else termorch
 * itself. Each field falls back on its own, so a repository with only user.email set keeps it.
 */
export async function commitIdentity(repo: string, override?: Partial<Identity>): Promise<Identity> {
  let name = override?.name;
  let email = override?.email;
  if (name === undefined || email === undefined) {
    const r = await git(repo, ["config", "-z", "--get-regexp", "^user\\.(name|email)$"], {
      allowExit: [0, 1],
    });
    // `key\nvalue\0` per entry; the last of several values wins, as for git itself.
    const found: Record<string, string> = {};
    for (const entry of r.stdout.split("\0")) {
      const nl = entry.indexOf("\n");
      if (nl > 0) found[entry.slice(0, nl)] = entry.slice(nl + 1);
    }
    name ??= clean(found["user.name"]);
    email ??= clean(found["user.email"]);
  }
  return { name: name ?? TERMORCH_IDENTITY.name, email: email ?? TERMORCH_IDENTITY.email };
}

// git refuses (or strips) names and addresses made only of these, and `<`/`>` would break the header.
function clean(v: string | undefined): string | undefined {
  const t = v?.replace(/[<>\n]/g, "").trim();
  return t ? t : undefined;
}

/** Appends git trailers (`Key: value` lines) to a commit message, after a blank line. */
export function withTrailers(message: string, trailers: Readonly<Record<string, string>>): string {
  const lines = Object.entries(trailers).map(([k, v]) => `${k}: ${v.replace(/\s+/g, " ")}`);
  if (lines.length === 0) return message;
  return `${message.replace(/\n+$/, "")}\n\n${lines.join("\n")}\n`;
}

/** Options of commitTree. */
export interface CommitTreeOptions {
  /** Author and committer; default: commitIdentity(repo) (costs one git process). */
  identity?: Identity;
  /** A different author with its own date (re-created commits keep their author); the committer stays `identity`. */
  author?: DatedIdentity;
}

/** Creates a commit object (no ref moves). */
export async function commitTree(
  repo: string,
  tree: string,
  parents: readonly string[],
  message: string,
  opts: CommitTreeOptions = {},
): Promise<string> {
  const args = ["commit-tree", tree];
  for (const p of parents) args.push("-p", p);
  const who = opts.identity ?? (await commitIdentity(repo));
  const env: Record<string, string> = {
    GIT_AUTHOR_NAME: opts.author?.name ?? who.name,
    GIT_AUTHOR_EMAIL: opts.author?.email ?? who.email,
    GIT_COMMITTER_NAME: who.name,
    GIT_COMMITTER_EMAIL: who.email,
  };
  if (opts.author) env.GIT_AUTHOR_DATE = opts.author.date;
  // The message goes through stdin so that no byte of it can be read as an option.
  const input = message.endsWith("\n") ? message : `${message}\n`;
  return (await git(repo, args, { input, env })).stdout.trim();
}

/** Whether `commit` is an ancestor of (or is) `tip`; false also when either is unknown. */
export async function isAncestor(repo: string, commit: string, tip: string): Promise<boolean> {
  return (
    (await git(repo, ["merge-base", "--is-ancestor", commit, tip], { allowExit: [0, 1, 128] })).exitCode === 0
  );
}

/** The top level of the work tree `dir` is in, or null when it is in none (or git cannot tell). */
export async function workTreeTop(dir: string): Promise<string | null> {
  const top = await git(dir, ["rev-parse", "--show-toplevel"], { allowExit: [0, 128] }).catch(() => null);
  return top?.exitCode === 0 && top.stdout.trim() ? top.stdout.trim() : null;
}

/** Which of `paths` (relative to the work tree's top) git ignores; none when git cannot tell. */
export async function ignoredPaths(root: string, paths: readonly string[]): Promise<string[]> {
  const ignored = await git(root, ["check-ignore", "-z", "--stdin"], {
    input: `${paths.join("\0")}\0`,
    allowExit: [0, 1, 128],
  }).catch(() => null);
  return ignored?.stdout.split("\0").filter(Boolean) ?? [];
}

/** Whether git tracks anything at `path` (repository-relative, taken literally). */
export async function isTracked(root: string, path: string): Promise<boolean> {
  return (await git(root, ["ls-files", "-z", "--", `:(top,literal)${path}`])).stdout !== "";
}
