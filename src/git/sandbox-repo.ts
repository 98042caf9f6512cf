/**
 * A sandboxed agent's view of its repository. The agent's worktree names its git folders by
 * absolute path (`.git` → `<common>/worktrees/<name>`, whose `commondir` is `<common>`); in the
 * sandbox, a folder of the attempt's own (the shadow) is shown at `<common>`'s place. The shadow
 * holds a copy of what git reads there (HEAD, config, the refs as one packed-refs file, the
 * worktree's admin folder with its index), objects of its own, and the real objects, read-only,
 * as its alternate. So status, diff, add and commit on the task branch work in the sandbox, and
 * whatever the agent writes (objects, refs, hooks, config, other worktrees' folders) lands in the
 * shadow: the user's repository is never written. After the attempt, `takeAgentCommits` brings
 * the task branch's new commits into the repository, checked by git as a fetch would be.
 */
import {
  copyFileSync,
  existsSync,
  linkSync,
  lstatSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { basename, join, resolve } from "node:path";
import { git, gitBuffer, gitLine } from "./repo.js";

/** Where the real objects show inside the shadow (read-only), named in its alternates. */
const REAL_OBJECTS = "termorch-objects";

export interface AgentRepo {
  /** The repository's common git folder, where the sandbox shows the shadow. */
  commonDir: string;
  shadow: string;
  /** Real folders shown read-only in the shadow: source → path inside the sandbox. */
  readOnly: ReadonlyArray<{ source: string; path: string }>;
  /** The repository's refs as the shadow got them (`for-each-ref`: id, space, name). */
  refs: string;
}

const OBJECT_ID = /^[0-9a-f]{40}(?:[0-9a-f]{24})?$/;

/** Files of a worktree's admin folder git reads (the rest it writes as it goes). */
const ADMIN_FILES = ["HEAD", "commondir", "gitdir", "index", "config.worktree", "info/sparse-checkout"];

/**
 * The objects the agent may read: the repository's as the run found them (a snapshot of hard
 * links, `base.objects`, made once per run: snapshotObjects), so that no other task's work
 * committed meanwhile is in reach; what its own start adds to the run's base commit (its
 * dependencies' work) is packed into its shadow.
 */
export interface AgentBase {
  commit: string;
  objects: string;
}

/** Builds the shadow of `worktree`'s repository in `shadow` (a new, private folder). */
export async function makeAgentRepo(
  worktree: string,
  shadow: string,
  branch: string | null,
  base: AgentBase,
): Promise<AgentRepo> {
  const { adminDir, commonDir } = gitDirsOf(worktree);
  const refs = (await git(worktree, ["for-each-ref", "--format=%(objectname) %(refname)"])).stdout;
  const admin = join(shadow, "worktrees", basename(adminDir));
  for (const dir of ["refs/heads", "refs/tags", "objects/info", "objects/pack", REAL_OBJECTS, "info"])
    mkdirSync(join(shadow, dir), { recursive: true, mode: 0o700 });
  mkdirSync(join(admin, "info"), { recursive: true, mode: 0o700 });
  const copy = (from: string, to: string): void => {
    if (existsSync(from)) copyFileSync(from, to);
  };
  for (const f of ["HEAD", "config", "info/exclude"]) copy(join(commonDir, f), join(shadow, f));
  for (const f of ADMIN_FILES) copy(join(adminDir, f), join(admin, f));
  // The other tasks' branches name commits it cannot see: left out.
  const own = branch === null ? null : `refs/heads/${branch}`;
  const runs = own === null ? null : own.slice(0, own.lastIndexOf("/") + 1);
  const shown = refs
    .split("\n")
    .filter((l) => l && (runs === null || !l.includes(` ${runs}`) || l.endsWith(` ${own}`)));
  writeFileSync(join(shadow, "packed-refs"), `${shown.join("\n")}\n`);
  writeFileSync(join(shadow, "objects", "info", "alternates"), `${join(commonDir, REAL_OBJECTS)}\n`);
  // What it has checked out (its start; a gate's commit) on top of the run's base.
  const head = headOfWorktree(adminDir, refs);
  if (head !== null && head !== base.commit)
    await git(worktree, ["pack-objects", "--revs", "-q", join(shadow, "objects", "pack", "pack")], {
      input: `${head}\n^${base.commit}\n`,
    });
  const readOnly = [{ source: base.objects, path: join(commonDir, REAL_OBJECTS) }];
  // The repository's hooks run for the agent's own commits, as outside; read-only.
  if (existsSync(join(commonDir, "hooks"))) {
    mkdirSync(join(shadow, "hooks"), { mode: 0o700 });
    readOnly.push({ source: join(commonDir, "hooks"), path: join(commonDir, "hooks") });
  }
  return { commonDir, shadow, readOnly, refs };
}

/**
 * The repository's objects folder as it is now, in `dest`: every file hard-linked (copied where a
 * link cannot be made), so that objects written later (other tasks' commits) are not in it, and
 * those a `git gc` removes meanwhile stay. Made once per run, before the first sandbox.
 */
export function snapshotObjects(worktree: string, dest: string): void {
  snapshotObjectsOf(gitDirsOf(worktree).commonDir, dest);
}

/** snapshotObjects of the repository at `root` (its common git folder's objects). */
export async function snapshotRepoObjects(root: string, dest: string): Promise<void> {
  snapshotObjectsOf(await gitLine(root, ["rev-parse", "--path-format=absolute", "--git-common-dir"]), dest);
}

/** snapshotObjects of the repository whose (common) git folder is `commonDir`. */
export function snapshotObjectsOf(commonDir: string, dest: string): void {
  const source = join(commonDir, "objects");
  const tmp = `${dest}.tmp`;
  rmSync(tmp, { recursive: true, force: true });
  const walk = (from: string, to: string): void => {
    mkdirSync(to, { recursive: true, mode: 0o700 });
    for (const e of readdirSync(from, { withFileTypes: true })) {
      // A pack or object being written (tmp_*, incoming-*) is not one yet.
      if (e.name.startsWith("tmp_") || e.name.startsWith("incoming-")) continue;
      if (e.isDirectory()) walk(join(from, e.name), join(to, e.name));
      else if (e.isFile())
        try {
          linkSync(join(from, e.name), join(to, e.name));
        } catch {
          copyFileSync(join(from, e.name), join(to, e.name));
        }
    }
  };
  walk(source, tmp);
  renameSync(tmp, dest);
}

/** A linked worktree's git folders, as git finds them: its `.git` file, then `commondir` there. */
function gitDirsOf(worktree: string): { adminDir: string; commonDir: string } {
  const gitdir = /^gitdir: (.+)$/m.exec(readFileSync(join(worktree, ".git"), "utf8"))?.[1];
  if (!gitdir) throw new Error(`${worktree}/.git does not name its git folder`);
  const adminDir = resolve(worktree, gitdir.trim());
  const common = readFileSync(join(adminDir, "commondir"), "utf8").trim();
  return { adminDir, commonDir: resolve(adminDir, common) };
}

/** The commit a worktree has checked out: its admin folder's HEAD, a branch of `refs` or detached. */
function headOfWorktree(adminDir: string, refs: string): string | null {
  const head = readFileSync(join(adminDir, "HEAD"), "utf8").trim();
  const branch = /^ref: refs\/heads\/(.+)$/.exec(head)?.[1];
  if (branch !== undefined) return headIn(refs, branch);
  return OBJECT_ID.test(head) ? head : null;
}

/** A branch's head in a `for-each-ref --format='%(objectname) %(refname)'` listing, or null. */
export function headIn(listing: string, branch: string): string | null {
  for (const line of listing.split("\n")) {
    const [id, ref] = line.split(" ");
    if (ref === `refs/heads/${branch}` && id && OBJECT_ID.test(id)) return id;
  }
  return null;
}

/** Where the agent left `branch` in its shadow: its loose ref, else the packed one; null if neither. */
export function agentBranchHead(shadow: string, branch: string): string | null {
  const loose = join(shadow, "refs", "heads", ...branch.split("/"));
  if (existsSync(loose)) {
    const value = readFileSync(loose, "utf8").trim();
    return OBJECT_ID.test(value) ? value : null;
  }
  const packed = join(shadow, "packed-refs");
  return existsSync(packed) ? headIn(readFileSync(packed, "utf8"), branch) : null;
}

/**
 * Brings the commits the agent made on its task branch into the repository and moves the branch
 * there, only from `start` (where it was when the shadow was made: the agent cannot move it).
 * The objects are packed from the shadow and indexed by git, which checks every one. Returns the
 * new head, or null when the agent did not move its branch (or the attempt had no shadow).
 */
export async function takeAgentCommits(
  shadow: string,
  worktree: string,
  branch: string,
  start: string,
): Promise<string | null> {
  const head = existsSync(shadow) ? agentBranchHead(shadow, branch) : null;
  if (head === null || head === start) return null;
  const alternate = { GIT_ALTERNATE_OBJECT_DIRECTORIES: join(shadow, "objects") };
  const pack = await gitBuffer(worktree, ["pack-objects", "--revs", "--stdout", "-q"], {
    input: `${head}\n^${start}\n`,
    env: alternate,
  });
  await git(worktree, ["index-pack", "--stdin", "--fix-thin"], { input: pack.stdout });
  await git(worktree, ["update-ref", `refs/heads/${branch}`, head, start]);
  return head;
}

/**
 * Puts the worktree's `.git` file back as it was (`saved`) when the agent changed it. termorch's
 * own git runs in the worktree outside the sandbox next, and would follow a `.git` the agent
 * pointed at a folder of its own, whose config can name commands (a filter's clean command runs
 * on `git add`). Returns whether it had to.
 */
export function restoreGitFile(worktree: string, saved: string): boolean {
  const file = join(worktree, ".git");
  const st = lstatSync(file, { throwIfNoEntry: false });
  if (st?.isFile() && readFileSync(file, "utf8") === saved) return false;
  rmSync(file, { recursive: true, force: true });
  writeFileSync(file, saved);
  return true;
}
