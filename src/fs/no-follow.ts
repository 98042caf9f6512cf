import {
  closeSync,
  constants,
  type Dirent,
  fstatSync,
  lstatSync,
  mkdirSync,
  openSync,
  readdirSync,
  readSync,
  realpathSync,
  rmSync,
  writeSync,
} from "node:fs";
import { isAbsolute, join, relative, sep } from "node:path";

/**
 * Reading and writing in a folder an agent could write (its artifacts folder, its worktree),
 * after the agent: termorch runs there as the user, outside any sandbox, so no link the agent
 * left may decide where termorch reads or writes. Every component of a path below `root` is
 * lstat'ed and a link among them refused; the last one is opened with O_NOFOLLOW. No agent
 * process outlives its attempt (a sandbox's PID namespace dies with it), so nothing swaps a
 * component between the check and the open. `root` itself is termorch's: the caller made it.
 */

/** A path below a root that termorch did not use: why, and the part of it at fault. */
export class Refused extends Error {
  constructor(
    readonly rel: string,
    readonly why: "link" | "not-a-file" | "not-a-folder" | "outside" | "missing",
    readonly at: string,
  ) {
    super(`${rel}: ${REFUSED_WORDS[why]}${at !== rel ? ` (${at})` : ""}`);
    this.name = "Refused";
  }
}

const REFUSED_WORDS: Record<Refused["why"], string> = {
  link: "a symbolic link on its way (termorch does not follow links an agent left)",
  "not-a-file": "not a regular file",
  "not-a-folder": "not a folder",
  outside: "leads outside its folder (a symbolic link, or ..)",
  missing: "not there",
};

/** The components of a relative path, refusing one that could leave the root. */
function componentsOf(rel: string): string[] {
  const parts = rel.split(/[\\/]+/).filter((c) => c !== "" && c !== ".");
  if (isAbsolute(rel) || parts.length === 0 || parts.includes("..")) throw new Refused(rel, "outside", rel);
  return parts;
}

/**
 * Every folder on the way to `rel` below `root`, lstat'ed: a link or a non-folder among them is
 * refused. With `make`, missing folders are created (0700). Answers the full path.
 */
function walkTo(root: string, rel: string, make: boolean): string {
  const parts = componentsOf(rel);
  let at = root;
  for (let i = 0; i < parts.length - 1; i++) {
    at = join(at, parts[i]!);
    const here = parts.slice(0, i + 1).join("/");
    const info = lstatSync(at, { throwIfNoEntry: false });
    if (info === undefined) {
      if (!make) throw new Refused(rel, "missing", here);
      mkdirSync(at, { mode: 0o700 });
      continue;
    }
    if (info.isSymbolicLink()) throw new Refused(rel, "link", here);
    if (!info.isDirectory()) throw new Refused(rel, "not-a-folder", here);
  }
  return join(at, parts[parts.length - 1]!);
}

/** What stands at `rel` below `root`, not following links on the way or at its end. */
export function kindInside(root: string, rel: string): "file" | "folder" | "link" | "other" | "missing" {
  try {
    const info = lstatSync(walkTo(root, rel, false), { throwIfNoEntry: false });
    if (info === undefined) return "missing";
    return info.isSymbolicLink() ? "link" : info.isFile() ? "file" : info.isDirectory() ? "folder" : "other";
  } catch (error) {
    // A link on the way (or a path leaving the root) is refused as a link; a file on the way is no folder.
    if (error instanceof Refused) return error.why === "link" || error.why === "outside" ? "link" : "missing";
    throw error;
  }
}

/** Opens a regular file below `root` for reading, refusing any link. */
export function openInside(root: string, rel: string): number {
  const path = walkTo(root, rel, false);
  let fd: number;
  try {
    fd = openSync(path, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === "ELOOP") throw new Refused(rel, "link", rel);
    if (code === "ENOENT") throw new Refused(rel, "missing", rel);
    throw error;
  }
  if (!fstatSync(fd).isFile()) {
    closeSync(fd);
    throw new Refused(rel, "not-a-file", rel);
  }
  return fd;
}

/** A regular file's bytes below `root` (at most `max`, when given), through no link. */
export function readInside(root: string, rel: string, max = Number.POSITIVE_INFINITY): Buffer {
  const fd = openInside(root, rel);
  try {
    const size = Math.min(fstatSync(fd).size, max);
    const buf = Buffer.alloc(size);
    let got = 0;
    while (got < size) {
      const n = readSync(fd, buf, got, size - got, got);
      if (n === 0) break;
      got += n;
    }
    return buf.subarray(0, got);
  } finally {
    closeSync(fd);
  }
}

/** A new file at `rel` below `root`, open for writing, whatever stood there removed first. */
function createFresh(root: string, rel: string, mode: number): number {
  const path = walkTo(root, rel, true);
  rmSync(path, { recursive: true, force: true });
  return openSync(
    path,
    constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW,
    mode,
  );
}

/**
 * Writes `data` as a new file at `rel` below `root`: folders on the way are made or must be real
 * folders, and whatever stood at the path (a file, a link, a folder, a fifo) is removed first, so
 * the bytes land in a file of termorch's own and nowhere else.
 */
export function writeFresh(root: string, rel: string, data: string | Uint8Array, mode = 0o600): void {
  const fd = createFresh(root, rel, mode);
  try {
    const bytes = typeof data === "string" ? Buffer.from(data) : data;
    let done = 0;
    while (done < bytes.length) done += writeSync(fd, bytes, done, bytes.length - done);
  } finally {
    closeSync(fd);
  }
}

/**
 * Removes whatever stands at `rel` below `root` (a file, a link itself, a folder, a fifo), never
 * what a link points at; folders on the way are made (0700) or must be real folders, so that a
 * file can be written there afterwards.
 */
export function removeInside(root: string, rel: string): void {
  rmSync(walkTo(root, rel, true), { recursive: true, force: true });
}

/** Copies a regular file below `srcRoot` to a fresh file below `dstRoot`, through no link. */
export function copyFresh(srcRoot: string, srcRel: string, dstRoot: string, dstRel: string): void {
  const src = openInside(srcRoot, srcRel);
  try {
    const dst = createFresh(dstRoot, dstRel, 0o600);
    try {
      const buf = Buffer.alloc(1024 * 1024);
      for (let at = 0; ; ) {
        const n = readSync(src, buf, 0, buf.length, at);
        if (n === 0) break;
        for (let done = 0; done < n; ) done += writeSync(dst, buf, done, n - done);
        at += n;
      }
    } finally {
      closeSync(dst);
    }
  } finally {
    closeSync(src);
  }
}

/** What a walk below a root found: regular files, and what it left alone (links, fifos, …). */
export interface TreeEntries {
  files: string[];
  folders: string[];
  links: string[];
  others: string[];
}

/** Every entry below `root` (posix-relative, sorted), never following a link. */
export function walkInside(root: string, under = ""): TreeEntries {
  const out: TreeEntries = { files: [], folders: [], links: [], others: [] };
  const walk = (rel: string): void => {
    const dir = rel === "" ? root : join(root, rel);
    let entries: Dirent[];
    try {
      entries = readdirSync(dir, { withFileTypes: true });
    } catch {
      return;
    }
    for (const e of entries) {
      const child = rel === "" ? e.name : `${rel}/${e.name}`;
      if (e.isSymbolicLink()) out.links.push(child);
      else if (e.isDirectory()) {
        out.folders.push(child);
        walk(child);
      } else if (e.isFile()) out.files.push(child);
      else out.others.push(child);
    }
  };
  if (under === "") walk("");
  else {
    const kind = kindInside(root, under);
    if (kind === "folder") {
      out.folders.push(under);
      walk(under);
    } else if (kind === "file") out.files.push(under);
    else if (kind === "link") out.links.push(under);
    else if (kind === "other") out.others.push(under);
  }
  for (const list of Object.values(out)) list.sort();
  return out;
}

/**
 * `rel` below `root`, as a path inside `root` with no link that leaves it: where it really is
 * (relative to `root`), or a refusal. Links that stay inside are allowed (a worktree's own links).
 */
export function resolveInside(root: string, rel: string): string {
  componentsOf(rel);
  const realRoot = realpathSync(root);
  let real: string;
  try {
    real = realpathSync(join(root, rel));
  } catch {
    // A link to nowhere, or through a folder the user cannot enter: nothing termorch takes.
    throw new Refused(rel, kindInside(root, rel) === "missing" ? "missing" : "link", rel);
  }
  const inside = relative(realRoot, real);
  if (inside === "" || inside.startsWith(`..${sep}`) || inside === ".." || isAbsolute(inside))
    throw new Refused(rel, "outside", rel);
  return inside.split(sep).join("/");
}
