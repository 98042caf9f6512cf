import { lstat, rm } from "node:fs/promises";
import path from "node:path";
import { GitError } from "./errors.js";
import { branchRef, git, requireCommit } from "./repo.js";
import { listWorktrees } from "./worktree.js";

/** What advanceTarget needs. */
export interface AdvanceTargetOptions {
  /** The target branch, e.g. `refs/heads/main` (a short name is taken as a branch). */
  ref: string;
  /** Where the target was when the run started; the update happens only if it is still there. */
  expectedOld: string;
  /** The integration commit to move it to. */
  newCommit: string;
  /** Reflog message. */
  message?: string;
  /**
   * Called right before the ref is moved, once the move is certain to be tried: the caller
   * makes it durable, so that a crash before the work tree follows can be finished by
   * finishAdvance. Not called when nothing is to be moved.
   */
  intent?: (advance: AdvanceRecord) => Promise<void>;
  /** Test seams: a throw from either makes advanceTarget roll back. */
  hooks?: {
    /** Called right after the ref moved, before the work tree is updated. */
    afterRefUpdate?: () => unknown;
    /** Called after the work tree (if the target is checked out) was updated. */
    afterWorktreeUpdate?: () => unknown;
  };
}

/** An advance as recorded before the ref moves. */
export interface AdvanceRecord {
  ref: string;
  old: string;
  new: string;
  /** The worktree that has the ref checked out (its index and work tree follow the ref), or null. */
  worktree: string | null;
}

/** Outcome of advanceTarget. */
export type AdvanceResult =
  /** The ref (and the work tree where it is checked out) now stand at `new`. */
  | { status: "advanced"; ref: string; old: string; new: string; worktree: string | null }
  /** The ref is no longer at `expected`; nothing changed. Merge onto `current` and try again. */
  | { status: "moved"; ref: string; expected: string; current: string | null }
  /** The user's uncommitted changes or untracked files would be overwritten; nothing changed. */
  | { status: "blocked"; ref: string; worktree: string; detail: string }
  /** Something failed after the ref moved; ref, index and work tree are back at `old`. */
  | { status: "rolled_back"; ref: string; old: string; detail: string }
  /**
   * Something failed and the rollback could not complete either; `detail` says what is left
   * where. When the index and work tree could not be restored, the ref is left at `new` (`at`):
   * moving it back would leave the index at `new` under a ref at `old`, every change of the
   * update staged for reverting, while at `new` the state is the one finishAdvance completes.
   */
  | {
      status: "rollback_failed";
      ref: string;
      old: string;
      new: string;
      /** Where the ref stands now: `new` (the update is to be finished), `old`, or elsewhere. */
      at: string | null;
      /** The worktree whose index and work tree could not be restored, or null. */
      worktree: string | null;
      /** A lock file another git process held that stopped the restore (e.g. `.git/index.lock`), or null. */
      lock: string | null;
      detail: string;
    };

type Phase = "ref" | "worktree-failed" | "worktree-done";

/**
 * Moves the target branch from `expectedOld` to `newCommit` with a compare-and-swap
 * (`git update-ref <ref> <new> <old>`). Where the branch is checked out, the index and work
 * tree follow with a two-tree merge (`git read-tree -m -u old new`), which keeps the user's
 * uncommitted changes to files the update does not touch and refuses to overwrite any other;
 * that is tried first without writing (`-n`), so a refusal changes nothing. If anything fails
 * after the ref moved, ref, index and work tree are restored to `expectedOld`; when the index
 * and work tree cannot be, the ref stays at `newCommit` (rollback_failed), for finishAdvance.
 */
export async function advanceTarget(repo: string, o: AdvanceTargetOptions): Promise<AdvanceResult> {
  const ref = branchRef(o.ref);
  const newCommit = await requireCommit(repo, o.newCommit);
  const old = await requireCommit(repo, o.expectedOld);
  const current = await refValue(repo, ref);
  if (current !== old) return { status: "moved", ref, expected: old, current };
  const wt =
    (await listWorktrees(repo)).find((w) => w.branch === ref && !w.bare && !w.prunable)?.path ?? null;
  if (newCommit === old) return { status: "advanced", ref, old, new: newCommit, worktree: wt };

  if (wt !== null) {
    // Stale stat information would make read-tree see "changes" in files that are clean. It
    // fails (128) while another git process (a concurrent run's merge, the user's editor) holds
    // the index: the dry run then fails too, and says so below.
    await git(wt, ["update-index", "-q", "--refresh"], { allowExit: [0, 1, 128] });
    const dry = await git(wt, ["read-tree", "-m", "-u", "-n", old, newCommit], { allowExit: [0, 128] });
    if (dry.exitCode !== 0) {
      const lock = await heldIndexLock(wt);
      return {
        status: "blocked",
        ref,
        worktree: wt,
        detail: lock
          ? `another git process holds ${lock}, so ${wt} cannot be updated now; merge again once it is done (remove the file if no git process is running)`
          : `updating ${wt} would overwrite uncommitted changes or untracked files (${dry.stderr.trim()}); commit, stash or move them and merge again`,
      };
    }
  }

  await o.intent?.({ ref, old, new: newCommit, worktree: wt });
  const upd = await git(repo, ["update-ref", "-m", o.message ?? "termorch: merge run", ref, newCommit, old], {
    allowExit: [0, 1, 128],
  });
  if (upd.exitCode !== 0) {
    const now = await refValue(repo, ref);
    if (now !== old) return { status: "moved", ref, expected: old, current: now };
    throw new GitError(`cannot update ${ref}: ${upd.stderr.trim()}`, { cwd: repo, stderr: upd.stderr });
  }

  let phase: Phase = "ref";
  try {
    await o.hooks?.afterRefUpdate?.();
    if (wt !== null) {
      phase = "worktree-failed";
      await git(wt, ["read-tree", "-m", "-u", old, newCommit]);
      phase = "worktree-done";
      await o.hooks?.afterWorktreeUpdate?.();
    }
  } catch (err) {
    return rollback(repo, {
      ref,
      old,
      newCommit,
      wt,
      phase,
      cause: err instanceof Error ? err.message : String(err),
    });
  }
  return { status: "advanced", ref, old, new: newCommit, worktree: wt };
}

/** Outcome of finishAdvance. */
export type FinishAdvanceResult =
  /** The ref never moved (the interruption came before): nothing to finish. */
  | { status: "not_moved" }
  /** The ref is somewhere else than either end of the advance: left alone. */
  | { status: "elsewhere"; current: string | null }
  | Extract<AdvanceResult, { status: "advanced" | "rolled_back" | "rollback_failed" }>;

/**
 * Completes an advance whose process died after it moved the ref and before the index and
 * work tree followed (advanceTarget's `intent`). The ref at `new` and the index at `old` is
 * what the user would otherwise see as every change of the run staged for reverting. The
 * interrupted two-tree update is run again (a no-op where it had already happened); if it is
 * refused (a partial update, or changes the user made since), ref, index and work tree are
 * rolled back to `old` instead, the same way advanceTarget rolls back, and ref, index and work
 * tree agree afterwards. When neither can be done (another git process holds the index lock,
 * e.g. the killed driver's own `read-tree` still running), the ref stays at `new`
 * (rollback_failed): finishing can be tried again later.
 */
export async function finishAdvance(repo: string, r: AdvanceRecord): Promise<FinishAdvanceResult> {
  const current = await refValue(repo, r.ref);
  if (current === r.old) return { status: "not_moved" };
  if (current !== r.new) return { status: "elsewhere", current };
  const checkedOut = (await listWorktrees(repo)).some((w) => w.branch === r.ref && w.path === r.worktree);
  const wt = checkedOut ? r.worktree : null;
  if (wt !== null) {
    // The refresh only spares read-tree false "changes"; a held index lock fails read-tree next.
    await git(wt, ["update-index", "-q", "--refresh"], { allowExit: [0, 1, 128] });
    const upd = await git(wt, ["read-tree", "-m", "-u", r.old, r.new], { allowExit: [0, 128] });
    if (upd.exitCode !== 0) {
      return rollback(repo, {
        ref: r.ref,
        old: r.old,
        newCommit: r.new,
        wt,
        phase: "worktree-failed",
        // git's first line names the problem; the rest is advice for an interactive user.
        cause: `the work tree of ${wt} could not be brought to ${r.new} after an interruption: ${upd.stderr.trim().split("\n")[0]}`,
      });
    }
  }
  return { status: "advanced", ref: r.ref, old: r.old, new: r.new, worktree: wt };
}

async function refValue(repo: string, ref: string): Promise<string | null> {
  const r = await git(repo, ["rev-parse", "-q", "--verify", ref], { allowExit: [0, 1] });
  return r.exitCode === 0 ? r.stdout.trim() : null;
}

interface RollbackState {
  ref: string;
  old: string;
  newCommit: string;
  wt: string | null;
  phase: Phase;
  cause: string;
}

async function rollback(
  repo: string,
  s: RollbackState,
): Promise<Extract<AdvanceResult, { status: "rolled_back" | "rollback_failed" }>> {
  if (s.wt !== null && s.phase !== "ref") {
    let restored = false;
    if (s.phase === "worktree-done") {
      // The exact inverse of the update, with the same refusal to clobber anything the user
      // changed in between.
      const back = await git(s.wt, ["read-tree", "-m", "-u", s.newCommit, s.old], { allowExit: [0, 128] });
      restored = back.exitCode === 0;
    }
    if (!restored) restored = await restorePaths(s.wt, s.old, s.newCommit).catch(() => false);
    if (!restored) {
      // The ref stays at new: see the rollback_failed result.
      const lock = await heldIndexLock(s.wt);
      return {
        status: "rollback_failed",
        ref: s.ref,
        old: s.old,
        new: s.newCommit,
        at: s.newCommit,
        worktree: s.wt,
        lock,
        detail: `advancing ${s.ref} failed (${s.cause}) and its index and work tree in ${s.wt} could not be restored to ${s.old}${lock ? ` (another git process holds ${lock})` : ""}, so ${s.ref} was left at ${s.newCommit}`,
      };
    }
  }
  const back = await git(repo, ["update-ref", "-m", "termorch: roll back", s.ref, s.old, s.newCommit], {
    allowExit: [0, 1, 128],
  });
  if (back.exitCode !== 0) {
    return {
      status: "rollback_failed",
      ref: s.ref,
      old: s.old,
      new: s.newCommit,
      at: await refValue(repo, s.ref),
      worktree: null,
      lock: null,
      detail: `advancing ${s.ref} failed (${s.cause}) and ${s.ref} could not be reset to ${s.old}: ${back.stderr.trim()}`,
    };
  }
  return {
    status: "rolled_back",
    ref: s.ref,
    old: s.old,
    detail: `advancing ${s.ref} failed (${s.cause}); ${s.ref}, its index and work tree are back at ${s.old}`,
  };
}

/** The index lock of worktree `wt` when some process holds it (the file exists), else null. */
async function heldIndexLock(wt: string): Promise<string | null> {
  const r = await git(wt, ["rev-parse", "--git-path", "index.lock"], { allowExit: [0, 128] }).catch(
    () => null,
  );
  if (r === null || r.exitCode !== 0) return null;
  const file = path.resolve(wt, r.stdout.trim());
  return (await lstat(file).catch(() => null)) === null ? null : file;
}

/**
 * Puts back to `old` exactly what the update wrote: in the index, every path that differs
 * between `old` and `next`; in the work tree, only files whose content is `next`'s (the update
 * wrote or removed them). Anything else at those paths (a file the user created meanwhile,
 * which is what made the update fail) is left alone. Sound because the dry run proved the
 * paths had no local changes before the update.
 */
async function restorePaths(wt: string, old: string, next: string): Promise<boolean> {
  const diff = await git(wt, ["diff-tree", "-r", "-z", "--no-renames", old, next]);
  const t = diff.stdout.split("\0");
  const changes: { path: string; oldBlob: string | null; newBlob: string | null }[] = [];
  for (let i = 0; i + 1 < t.length; i += 2) {
    // `:<old mode> <new mode> <old sha> <new sha> <status>` then the path.
    const fields = (t[i] ?? "").split(" ");
    const p = t[i + 1];
    if (fields.length < 5 || p === undefined) break;
    const blob = (sha: string | undefined) => (sha === undefined || /^0+$/.test(sha) ? null : sha);
    changes.push({ path: p, oldBlob: blob(fields[2]), newBlob: blob(fields[3]) });
  }
  if (changes.length === 0) return true;
  const literal = { GIT_LITERAL_PATHSPECS: "1" };
  const list = (paths: string[]) => `${paths.join("\0")}\0`;
  await git(wt, ["reset", "-q", old, "--pathspec-from-file=-", "--pathspec-file-nul"], {
    input: list(changes.map((c) => c.path)),
    env: literal,
    allowExit: [0, 1],
  });
  const toCheckout: string[] = [];
  for (const c of changes) {
    const file = path.join(wt, c.path);
    const present = (await lstat(file).catch(() => null)) !== null;
    if (!present) {
      if (c.newBlob === null && c.oldBlob !== null) toCheckout.push(c.path);
      continue;
    }
    const blob = (await git(wt, ["hash-object", "--path", c.path, "--", file])).stdout.trim();
    if (blob !== c.newBlob) continue;
    if (c.oldBlob === null) await rm(file, { force: true });
    else toCheckout.push(c.path);
  }
  if (toCheckout.length > 0) {
    await git(wt, ["checkout", old, "--pathspec-from-file=-", "--pathspec-file-nul"], {
      input: list(toCheckout),
      env: literal,
    });
  }
  return true;
}
