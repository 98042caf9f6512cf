import { randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import { link, mkdir, readFile, rename, rm, stat, writeFile } from "node:fs/promises";
import { hostname } from "node:os";
import { LockHolder } from "../contract/lock.js";
import { LockedError } from "../errors.js";
import { ensureUserDir, lockPath, locksDir } from "./names.js";

export type { LockHolder } from "../contract/lock.js";

/** How long an empty lock file may be a holder still writing its line (see readHolder). */
const EMPTY_LOCK_GRACE_MS = 2000;

export interface WorkspaceLock {
  path: string;
  /** Names the holder's run anew (its id and folder are settled only once the lock is held). */
  update(holder: Pick<LockHolder, "run_id" | "run_dir">): Promise<void>;
  release(): Promise<void>;
}

/**
 * Takes the workspace's lock: an exclusively created file naming the holder. A lock whose
 * holder process is gone is stale and is taken over by renaming it away first, so two
 * processes racing for a stale lock cannot both win.
 */
export function acquireLock(
  workspace: string,
  holder: Omit<LockHolder, "pid" | "pid_start" | "host" | "acquired_at">,
  opts: { wait?: boolean; signal?: AbortSignal; pollMs?: number } = {},
): Promise<WorkspaceLock> {
  return acquireLockFile(lockPath(workspace), `workspace ${workspace}`, holder, opts);
}

/**
 * Takes the lock file `path` in the per-user locks folder, as {@link acquireLock} does for a
 * workspace; `what` names what it guards in the message of a refusal.
 */
export async function acquireLockFile(
  path: string,
  what: string,
  holder: Omit<LockHolder, "pid" | "pid_start" | "host" | "acquired_at">,
  opts: { wait?: boolean; signal?: AbortSignal; pollMs?: number } = {},
): Promise<WorkspaceLock> {
  await ensureUserDir();
  await mkdir(locksDir(), { recursive: true, mode: 0o700 });
  const me: LockHolder = {
    pid: process.pid,
    pid_start: processStart(process.pid),
    host: hostname(),
    acquired_at: new Date().toISOString(),
    ...holder,
  };
  for (;;) {
    if (await createWithHolder(path, me)) {
      return {
        path,
        update: async (next) => {
          const before = me.run_id;
          Object.assign(me, next);
          // Written beside and renamed over: a reader never sees a half-written holder.
          const tmp = `${path}.${process.pid}.tmp`;
          await writeFile(tmp, `${JSON.stringify(me)}\n`, { mode: 0o600 });
          const current = await readHolder(path);
          if (current?.pid === me.pid && current.run_id === before) await rename(tmp, path);
          else await rm(tmp, { force: true });
        },
        release: () => releaseLock(path, me),
      };
    }
    const current = await readHolder(path);
    if (current === undefined) continue; // Released between our attempt and the read.
    if (current === null || isStale(current)) {
      await removeStale(path, current);
      continue;
    }
    if (!opts.wait) {
      throw new LockedError(
        `${what} is locked by run ${current.run_id} (pid ${current.pid} on ${current.host}, since ${current.acquired_at}, run directory ${current.run_dir}); wait for it to finish, pass --wait, or cancel it`,
      );
    }
    if (opts.signal?.aborted) throw new LockedError(`gave up waiting for the lock of ${what}`);
    await new Promise((r) => setTimeout(r, opts.pollMs ?? 250));
  }
}

/**
 * Creates the lock file `path` already holding `me`, or returns false when it exists. The holder
 * is written beside it and hard-linked into place (link() never replaces a file): a lock file
 * created in place and then written stayed empty when its creator was killed in between, and
 * named no one a taker could find gone.
 */
async function createWithHolder(path: string, me: LockHolder): Promise<boolean> {
  const tmp = `${path}.${process.pid}.${randomBytes(4).toString("hex")}.new`;
  await writeFile(tmp, `${JSON.stringify(me)}\n`, { mode: 0o600, flag: "wx" });
  try {
    await link(tmp, path);
    return true;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
    return false;
  } finally {
    await rm(tmp, { force: true });
  }
}

/**
 * Moves a stale lock aside atomically (only one contender's rename succeeds). If what was moved
 * turns out to be a fresh lock another contender took meanwhile, it is linked back: link()
 * never replaces an existing file.
 */
async function removeStale(path: string, seen: LockHolder | null): Promise<void> {
  const aside = `${path}.stale-${randomBytes(4).toString("hex")}`;
  try {
    await rename(path, aside);
  } catch {
    return;
  }
  const moved = await readHolder(aside);
  const same =
    seen === null ? moved === null : moved?.pid === seen.pid && moved.acquired_at === seen.acquired_at;
  if (!same) await link(aside, path).catch(() => {});
  await rm(aside, { force: true });
}

async function releaseLock(path: string, me: LockHolder): Promise<void> {
  const current = await readHolder(path);
  if (current && current.pid === me.pid && current.run_id === me.run_id) await rm(path, { force: true });
}

/**
 * undefined: no lock file; null: unreadable (a holder died mid-write, or garbage, or JSON that
 * is not a holder): such a lock names no live holder, so it is taken over like a stale one.
 */
async function readHolder(path: string): Promise<LockHolder | null | undefined> {
  let text: string;
  try {
    text = await readFile(path, "utf8");
  } catch {
    return undefined;
  }
  try {
    const holder = LockHolder.safeParse(JSON.parse(text));
    return holder.success ? holder.data : null;
  } catch {
    // Empty: a termorch before link-created locks was between creating the file and writing its
    // line, or was killed there. A moment for the first; after that it names no holder.
    if (text !== "") return null;
    const age = await stat(path).then(
      (s) => Date.now() - s.mtimeMs,
      () => null,
    );
    if (age === null) return undefined;
    if (age > EMPTY_LOCK_GRACE_MS) return null;
    return await new Promise((r) => setTimeout(() => r(readHolder(path)), 50));
  }
}

function isStale(h: LockHolder): boolean {
  if (h.host !== hostname()) return false;
  try {
    process.kill(h.pid, 0);
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "ESRCH";
  }
  return h.pid_start !== null && processStart(h.pid) !== h.pid_start;
}

/** Field 22 of /proc/<pid>/stat: the process start time; null where /proc is not available. */
function processStart(pid: number): string | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2).split(" ")[19] ?? null;
  } catch {
    return null;
  }
}
