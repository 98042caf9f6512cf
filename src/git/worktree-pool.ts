import { execFile } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";
import { mkdir, readdir, readFile, realpath, rm, rmdir, writeFile } from "node:fs/promises";
import { homedir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { z } from "zod";
import { readJsonRecord } from "../fs/json-record.js";
import { acquireLockFile } from "../fs/lock.js";
import { poolLockPath, poolRoot, repoPoolDir } from "../fs/names.js";
import { git } from "./repo.js";
import { type Checkout, fillWorktree, listWorktrees, removeWorktree, serialized } from "./worktree.js";

// node:child_process rather than execa, as for git (src/git/repo.ts): these run for every task.
const execFileAsync = promisify(execFile);

/** How much the pool keeps: worktrees per repository, and disk for the pools of all repositories. */
export interface PoolLimits {
  /** 0 turns the pool off. */
  maxWorktrees: number;
  maxBytes: number;
}

/** Who takes the pool's lock (named to whoever waits for it). */
export interface PoolOwner {
  run_id: string;
  run_dir: string;
}

/**
 * What a pooled worktree's folder holds beside it, `<name>.json`: enough to bound the pool's
 * disk without walking it, and to find the repository of a pool whose worktrees are orphaned.
 */
const PoolEntryMeta = z.object({
  repo: z.string(),
  bytes: z.number().int().nonnegative(),
  pooled_at: z.string(),
  run_id: z.string(),
  /** checkoutRules() when it was pooled: what its files were written under. */
  rules: z.string(),
});
type PoolEntryMeta = z.infer<typeof PoolEntryMeta>;

/**
 * The only files a worktree's administrative folder (`.git/worktrees/<name>`) may hold for the
 * worktree to be pooled. Anything else is state a fresh worktree would not have and that a
 * checkout does not reset: an operation in progress (MERGE_HEAD, rebase-merge/, BISECT_LOG,
 * sequencer/), per-worktree refs or config (refs/, config.worktree), a sparse checkout (info/),
 * submodules (modules/), a `locked` file or an `index.lock` of a git still running there.
 */
const ADMIN_FILES = new Set([
  "HEAD",
  "ORIG_HEAD",
  "FETCH_HEAD",
  "AUTO_MERGE",
  "commondir",
  "gitdir",
  "index",
  "logs",
]);
/** Of those, what a fresh worktree has not: removed before a pooled one is handed out. */
const ADMIN_HISTORY = ["ORIG_HEAD", "FETCH_HEAD", "AUTO_MERGE", "logs"];

/**
 * A warm pool of one repository's finished worktrees (issue 12): checking a pooled worktree out
 * at a nearby commit takes a fraction of a second where `git worktree add` takes seconds on a
 * large repository, and nothing is ever deleted. Pooled worktrees live in the per-user folder
 * (`pool/<repository key>/`), detached and emptied of everything untracked or ignored; every
 * change to the pool holds a lock file, so concurrent runs (processes) never get the same one.
 * A worktree is taken by moving it out of the pool (`git worktree move`), so one in use is never
 * in the pool; whatever a crash leaves half-moved is found and dropped under the lock.
 */
export class WorktreePool {
  private readonly dir: string;
  /** give() calls still running (giveLater): take() waits for them before adding a worktree. */
  private readonly giving = new Set<Promise<boolean>>();
  /** Worktrees this instance put into the pool. */
  given = 0;
  /** The disk one of the repository's worktrees uses, once measured. */
  private entryBytes: number | undefined;
  /** The repository's git folders (its own and the common one), asked once: they do not move. */
  private gitDirs: Promise<GitDirs> | undefined;

  constructor(
    private readonly repo: string,
    private readonly limits: PoolLimits,
    private readonly owner: PoolOwner,
  ) {
    this.dir = repoPoolDir(repo);
  }

  /**
   * Moves a pooled worktree to `dest` and checks `to` out there as `git worktree add` would
   * (fillWorktree), with nothing untracked or ignored left. A pooled worktree found dirty
   * (someone wrote into it since it was pooled) is never handed out: it is removed, and the next
   * one tried. False when the pool has none, or checking one out failed (then `dest` does not
   * exist, and the caller adds a new worktree).
   */
  async take(dest: string, to: Checkout): Promise<boolean> {
    if (this.limits.maxWorktrees === 0 || (await copiesMoreThanFiles(this.repo, await this.dirs())))
      return false;
    await mkdir(path.dirname(dest), { recursive: true });
    for (;;) {
      const claimed = await this.claim(dest);
      if (!claimed) {
        // A worktree on its way into the pool is ready in a fraction of the time of a new one.
        if (this.giving.size === 0) return false;
        await Promise.race(this.giving);
        continue;
      }
      if (!(await reusable(dest, "taking"))) {
        await removeWorktree(this.repo, dest);
        continue;
      }
      try {
        const admin = await adminDir(dest);
        await Promise.all(
          ADMIN_HISTORY.map((f) => rm(path.join(admin, f), { recursive: true, force: true })),
        );
        const from = (await git(dest, ["rev-parse", "HEAD"])).stdout.trim();
        if ("branch" in to) await git(dest, ["symbolic-ref", "HEAD", to.branch]);
        else await git(dest, ["update-ref", "--no-deref", "HEAD", to.detached]);
        // A checkout rewrites only the files whose stat data changed: when the rules its files
        // were written by changed (attributes, filters, line endings), every file is written
        // again, as in a new worktree.
        if (
          claimed.rules !== (await checkoutRules(this.repo, await this.dirs())) ||
          (await attributesDiffer(dest, from))
        )
          await rm(path.join(admin, "index"), { force: true });
        await fillWorktree(dest);
        // Empty folders: a checkout leaves them, and git status does not show them.
        await git(dest, ["clean", "-q", "-ffdx"]);
      } catch {
        // Whatever went wrong with this one, a new worktree is still as good as before.
        await removeWorktree(this.repo, dest).catch(() => {});
        return false;
      }
      return true;
    }
  }

  /**
   * Puts a finished worktree (its work committed, its branch about to be deleted) into the pool:
   * detached, everything untracked or ignored removed (include links are removed, never
   * followed), and the files its task changed since `checkedOut` (the commit it was checked out
   * at) written again as a checkout writes them. False when it cannot be pooled safely (see
   * reusable(); its task changed a `.gitattributes`) or the pool is full: the caller removes it.
   */
  async give(wt: string, checkedOut: string): Promise<boolean> {
    if (this.limits.maxWorktrees === 0) return false;
    const pooled = await this.put(wt, checkedOut);
    if (pooled) this.given++;
    return pooled;
  }

  /** give() in the background, for the next take(); settled() waits for every one. */
  giveLater(wt: string, checkedOut: string): void {
    const giving: Promise<boolean> = this.give(wt, checkedOut).finally(() => this.giving.delete(giving));
    this.giving.add(giving);
  }

  /** Resolves once every giveLater() has ended (the worktrees not pooled are where they were). */
  async settled(): Promise<void> {
    while (this.giving.size > 0) await Promise.all(this.giving);
  }

  private dirs(): Promise<GitDirs> {
    this.gitDirs ??= gitDirsOf(this.repo);
    return this.gitDirs;
  }

  private async put(wt: string, checkedOut: string): Promise<boolean> {
    try {
      // Detached where it is (the files stay as they are; its branch can then be deleted).
      await git(wt, ["update-ref", "--no-deref", "HEAD", "HEAD"]);
      await git(wt, ["clean", "-q", "-ffdx"]);
      if (!(await asWrittenByCheckout(wt, checkedOut))) return false;
      if (!(await reusable(wt, "giving"))) return false;
      const rules = await checkoutRules(this.repo, await this.dirs());
      // Worktrees of one repository at nearby commits are about the same size: measured once.
      this.entryBytes ??= await diskUsage(wt);
      const bytes = this.entryBytes;
      return await this.locked(async () => {
        const entries = await this.entries();
        if (entries.length >= this.limits.maxWorktrees) return false;
        if ((await poolBytes()) + bytes > this.limits.maxBytes) return false;
        await mkdir(this.dir, { recursive: true, mode: 0o700 });
        // Named by time, so the newest (the nearest commit) is handed out first.
        const name = `${Date.now().toString(36).padStart(9, "0")}-${randomBytes(4).toString("hex")}`;
        const meta: PoolEntryMeta = {
          repo: this.repo,
          bytes,
          pooled_at: new Date().toISOString(),
          run_id: this.owner.run_id,
          rules,
        };
        // The record first: a crash before the move leaves a record without a folder, which
        // entries() drops; a folder without its record would be dropped too.
        await writeFile(path.join(this.dir, `${name}.json`), JSON.stringify(meta), { mode: 0o600 });
        const moved = await serialized(this.repo, () =>
          git(this.repo, ["worktree", "move", wt, path.join(this.dir, name)], { allowExit: [0, 128] }),
        );
        if (moved.exitCode !== 0) await rm(path.join(this.dir, `${name}.json`), { force: true });
        return moved.exitCode === 0;
      });
    } catch {
      return false;
    }
  }

  /** Removes every pooled worktree of the repository that is not locked; returns their folders. */
  async drop(): Promise<string[]> {
    if (!existsSync(this.dir)) return [];
    return this.locked(async () => {
      const doomed = (await this.entries()).filter((e) => !e.locked);
      for (const e of doomed) await dropEntry(this.repo, e.path);
      await rmdir(this.dir).catch(() => {});
      return doomed.map((e) => e.path);
    });
  }

  /** Under the lock: the newest pooled worktree moved to `dest`; its record, or null. */
  private claim(dest: string): Promise<PoolEntryMeta | null> {
    if (!existsSync(this.dir)) return Promise.resolve(null);
    return this.locked(async () => {
      for (const entry of (await this.entries()).reverse()) {
        if (entry.locked) continue;
        const meta = await readJsonRecord(PoolEntryMeta, `${entry.path}.json`);
        const moved = meta
          ? await serialized(this.repo, () =>
              git(this.repo, ["worktree", "move", entry.path, dest], { allowExit: [0, 128] }),
            )
          : null;
        await rm(`${entry.path}.json`, { force: true });
        if (meta && moved?.exitCode === 0) return meta;
        await dropEntry(this.repo, entry.path);
      }
      return null;
    });
  }

  /**
   * Under the lock: the pool's worktrees, oldest first. What a crash left half-done is dropped
   * here: a record without its folder, a folder without its record, a folder git does not list
   * as a worktree at that path (moved but not yet re-registered).
   */
  private async entries(): Promise<{ path: string; locked: boolean }[]> {
    const names = await readdir(this.dir).catch(() => [] as string[]);
    const realDir = await realpath(this.dir).catch(() => this.dir);
    const here = (await listWorktrees(this.repo)).filter((w) => path.dirname(w.path) === realDir);
    // A pooled folder deleted by hand: git's record of it goes too.
    if (here.some((w) => w.prunable && !w.locked))
      await git(this.repo, ["worktree", "prune"], { allowExit: [0, 128] }).catch(() => {});
    const listed = new Map(here.filter((w) => !w.prunable).map((w) => [path.basename(w.path), w.locked]));
    const out: { path: string; locked: boolean }[] = [];
    for (const name of names.sort()) {
      const full = path.join(this.dir, name);
      if (name.endsWith(".json")) {
        if (!names.includes(name.slice(0, -".json".length))) await rm(full, { force: true });
        continue;
      }
      const locked = listed.get(name);
      if (locked === undefined || !names.includes(`${name}.json`)) {
        await dropEntry(this.repo, full);
        continue;
      }
      out.push({ path: full, locked });
    }
    return out;
  }

  private async locked<T>(fn: () => Promise<T>): Promise<T> {
    const lock = await acquireLockFile(
      poolLockPath(this.repo),
      `the worktree pool of ${this.repo}`,
      this.owner,
      {
        wait: true,
        pollMs: 20,
      },
    );
    try {
      return await fn();
    } finally {
      await lock.release();
    }
  }
}

/** Removes a pooled worktree (or what a crash left of one); a folder git does not know is deleted. */
async function dropEntry(repo: string, dir: string): Promise<void> {
  await removeWorktree(repo, dir).catch(() => {});
  await rm(dir, { recursive: true, force: true });
  await rm(`${dir}.json`, { force: true });
  await git(repo, ["worktree", "prune"], { allowExit: [0, 128] }).catch(() => {});
}

/**
 * Whether the worktree at `wt` holds nothing a fresh one would not: no per-worktree git state
 * beyond ADMIN_FILES, no changes, no index entry flagged assume-unchanged or skip-worktree (a
 * checkout carries those over, and they hide changes) and no submodule (git looks neither into
 * its folder nor cleans it). `taking` (a pooled worktree about to be handed out): nothing
 * untracked or ignored either. `giving` (one just cleaned, about to be pooled): every file and
 * folder with the permissions a checkout gives it and no other hard link, which git does not see.
 */
async function reusable(wt: string, check: "taking" | "giving"): Promise<boolean> {
  try {
    const admin = await adminDir(wt);
    if ((await readdir(admin)).some((f) => !ADMIN_FILES.has(f))) return false;
    // Untracked and ignored folders are listed whole: anything at all is enough to refuse.
    const untracked = check === "taking" ? ["--ignored=traditional", "--untracked-files=normal"] : ["-uno"];
    const status = await git(wt, ["status", "--porcelain=v1", "-z", ...untracked]);
    if (status.stdout !== "") return false;
    // `H <mode> <object> <stage>\t<path>` for every entry: H is a plain one.
    for (const entry of (await git(wt, ["ls-files", "-v", "-s", "-z"])).stdout.split("\0")) {
      if (entry !== "" && (!entry.startsWith("H ") || entry.slice(2, 8) === "160000")) return false;
    }
    return check === "taking" || (await asCheckedOut(wt));
  } catch {
    return false;
  }
}

/**
 * Whether every file and folder under `wt` has the permission bits a checkout gives it under
 * this process's umask and no second hard link: a link made to a file outside would let what is
 * written there reach the next agent's worktree, and a folder made read-only would stop it.
 * (Whether a file's executable bit matches its index entry, git status tells.) One `find`: a
 * walk in Node takes ten times as long on a large worktree.
 */
async function asCheckedOut(wt: string): Promise<boolean> {
  const umask = processUmask();
  const perm = (mode: number): string => (mode & ~umask).toString(8);
  const r = await execFileAsync(
    "find",
    [
      ".",
      ...["-path", "./.git", "-prune", "-o"],
      ...["(", "-type", "d", "!", "-perm", perm(0o777), "-print", ")", "-o"],
      ...["(", "-type", "f", "(", "-links", "+1", "-o", "(", "!", "-perm", perm(0o666)],
      ...["!", "-perm", perm(0o777), ")", ")", "-print", ")"],
    ],
    { cwd: wt },
  ).catch(() => null);
  return r?.stdout === "";
}

/** This process's umask, read without changing it (Linux), else through process.umask(). */
function processUmask(): number {
  try {
    const m = /^Umask:\s*([0-7]+)$/m.exec(readFileSync("/proc/self/status", "utf8"));
    if (m?.[1]) return Number.parseInt(m[1], 8);
  } catch {}
  return process.umask();
}

/**
 * What decides how a checkout writes a file besides the file itself: the repository's filter,
 * line-ending and attribute settings and its own attributes file. A pooled worktree written
 * under other rules has every file written again when it is taken.
 */
async function checkoutRules(repo: string, dirs: GitDirs): Promise<string> {
  const config = await git(
    repo,
    [
      "config",
      "--get-regexp",
      "^(filter\\..*|core\\.(autocrlf|eol|safecrlf|symlinks|filemode|attributesfile|checkroundtripencoding|ignorecase|precomposeunicode)|lfs\\..*)$",
    ],
    { allowExit: [0, 1] },
  );
  const info = await readFile(path.join(dirs.common, "info", "attributes"), "utf8").catch(() => "");
  const global = /^core\.attributesfile (.*)$/m.exec(config.stdout)?.[1];
  const globalText = global
    ? await readFile(global.replace(/^~(?=\/)/, homedir()), "utf8").catch(() => "")
    : "";
  return createHash("sha256").update(`${config.stdout}\0${info}\0${globalText}`).digest("hex");
}

/** The paths that differ between commit `from` and the worktree's HEAD. */
async function changedSince(wt: string, from: string): Promise<string[]> {
  const changed = await git(wt, ["diff-tree", "-r", "--name-only", "-z", from, "HEAD"]);
  return changed.stdout.split("\0").filter(Boolean);
}

const isAttributes = (p: string): boolean => p === ".gitattributes" || p.endsWith("/.gitattributes");

/** Whether a `.gitattributes` file differs between commit `from` and the worktree's HEAD. */
async function attributesDiffer(wt: string, from: string): Promise<boolean> {
  return (await changedSince(wt, from)).some(isAttributes);
}

/**
 * Makes the files the task changed since `checkedOut` what a checkout of HEAD writes: an agent
 * may have written a file in another form that git calls unchanged (line endings, a filter's
 * clean side), and a later checkout would leave it so. They are deleted and written again from
 * the index. False (not poolable) when the task changed attributes, under which every other
 * file would be written differently too.
 */
async function asWrittenByCheckout(wt: string, checkedOut: string): Promise<boolean> {
  const changed = await changedSince(wt, checkedOut);
  if (changed.some(isAttributes)) return false;
  if (changed.length === 0) return true;
  await Promise.all(changed.map((p) => rm(path.join(wt, p), { force: true })));
  await git(wt, ["checkout-index", "--index", "--force", "--quiet", "-z", "--stdin"], {
    input: `${changed.join("\0")}\0`,
  });
  return true;
}

/**
 * Whether `git worktree add` would give a new worktree of `repo` more than the commit's files:
 * the sparse-checkout patterns and the worktree's own config (`config.worktree`) it copies from
 * the worktree it runs in. A pooled worktree has neither, so none is taken.
 */
async function copiesMoreThanFiles(repo: string, dirs: GitDirs): Promise<boolean> {
  const sparse = await git(repo, ["config", "--bool", "core.sparseCheckout"], { allowExit: [0, 1] });
  if (sparse.stdout.trim() === "true") return true;
  return existsSync(path.join(dirs.own, "config.worktree"));
}

/** A repository's git folder (`.git`, or a linked worktree's own) and the common one, absolute. */
interface GitDirs {
  own: string;
  common: string;
}

async function gitDirsOf(repo: string): Promise<GitDirs> {
  const r = await git(repo, [
    "rev-parse",
    "--path-format=absolute",
    "--absolute-git-dir",
    "--git-common-dir",
  ]);
  const [own = "", common = ""] = r.stdout.trim().split("\n");
  return { own, common };
}

/** A linked worktree's administrative folder, from its `.git` file (`gitdir: <path>`). */
async function adminDir(wt: string): Promise<string> {
  const text = await readFile(path.join(wt, ".git"), "utf8");
  const m = /^gitdir: (.+)$/m.exec(text);
  if (!m?.[1]) throw new Error(`${wt}/.git names no git folder`);
  return path.resolve(wt, m[1]);
}

/** Disk used by a folder, in bytes (`du`: what the pool really costs, blocks included). */
async function diskUsage(dir: string): Promise<number> {
  const r = await execFileAsync("du", ["-sk", dir]);
  const kib = Number.parseInt(r.stdout, 10);
  if (!Number.isFinite(kib)) throw new Error(`du ${dir} printed no size: ${r.stderr}`);
  return kib * 1024;
}

/**
 * What every repository's pool holds, in bytes, from the records beside the worktrees. The pool
 * of a repository that is gone is deleted instead of counted: nothing can use it any more.
 */
async function poolBytes(): Promise<number> {
  let total = 0;
  for (const meta of await poolRecords()) {
    if (existsSync(meta.repo)) total += meta.bytes;
    else await rm(path.dirname(meta.file), { recursive: true, force: true });
  }
  return total;
}

/** Every pool record of the per-user folder (unreadable ones skipped). */
async function poolRecords(): Promise<(PoolEntryMeta & { file: string })[]> {
  const out: (PoolEntryMeta & { file: string })[] = [];
  for (const key of await readdir(poolRoot()).catch(() => [] as string[])) {
    const dir = path.join(poolRoot(), key);
    for (const name of await readdir(dir).catch(() => [] as string[])) {
      if (!name.endsWith(".json")) continue;
      const file = path.join(dir, name);
      const meta = await readJsonRecord(PoolEntryMeta, file);
      if (meta) out.push({ ...meta, file });
    }
  }
  return out;
}

/**
 * Empties the pools of every repository (`termorch clean`): each pooled worktree is removed
 * from its repository under that pool's lock (one locked with `git worktree lock` is left); the
 * pool of a repository that is gone is deleted. Returns what was removed.
 */
export async function dropPools(owner: PoolOwner): Promise<string[]> {
  const removed: string[] = [];
  const records = await poolRecords();
  for (const key of await readdir(poolRoot()).catch(() => [] as string[])) {
    const dir = path.join(poolRoot(), key);
    const repo = records.find((r) => path.dirname(r.file) === dir)?.repo;
    if (repo !== undefined && existsSync(repo) && repoPoolDir(repo) === dir) {
      removed.push(...(await new WorktreePool(repo, { maxWorktrees: 1, maxBytes: 0 }, owner).drop()));
    } else {
      // No repository that still exists can use it (or it has no record to say whose it is).
      await rm(dir, { recursive: true, force: true });
      removed.push(dir);
    }
  }
  await rmdir(poolRoot()).catch(() => {});
  return removed;
}
