import { lstatSync, readdirSync, readlinkSync, realpathSync } from "node:fs";
import { isAbsolute, relative, resolve, sep } from "node:path";

/** Linux's limit on a path's length, its terminating NUL included. */
const PATH_MAX = 4096;

/** True when `candidate` is `root` or lies below it (both absolute, normalised). */
function isInside(root: string, candidate: string): boolean {
  const rel = relative(root, candidate);
  return rel === "" || (!rel.startsWith(`..${sep}`) && rel !== ".." && !isAbsolute(rel));
}

/**
 * Resolves a user-given path against `root` and checks it stays inside, both lexically and
 * after following symlinks of the part that exists. Returns the absolute (lexical) path, or an
 * error message.
 */
export function resolveInside(root: string, userPath: string): { path: string } | { error: string } {
  if (userPath.includes("\0")) return { error: "contains a NUL byte" };
  const path = resolve(root, userPath);
  // No such path can exist, and looking for its existing prefix one folder at a time would take
  // hours for a path of a million bytes.
  if (Buffer.byteLength(path) >= PATH_MAX)
    return {
      error: `is ${Buffer.byteLength(path)} bytes long once resolved; paths are limited to ${PATH_MAX - 1}`,
    };
  if (!isInside(root, path)) return { error: `"${userPath}" resolves outside the workspace (${root})` };
  const realRoot = realpathSync(root);
  const real = realpathOfExistingPrefix(path);
  if (!isInside(realRoot, real))
    return { error: `"${userPath}" escapes the workspace through a symlink (to ${real})` };
  return { path };
}

/** realpath of the longest existing prefix of `path`, with the rest appended. */
function realpathOfExistingPrefix(path: string): string {
  let head = path;
  const tail: string[] = [];
  for (;;) {
    try {
      return resolve(realpathSync(head), ...tail.reverse());
    } catch {
      const parent = resolve(head, "..");
      if (parent === head) return path;
      tail.push(head.slice(parent.length + (parent.endsWith(sep) ? 0 : 1)));
      head = parent;
    }
  }
}

/** Whether `dir` is missing or holds nothing but the names in `except`. */
export function isEmptyOrMissing(dir: string, except: readonly string[] = []): boolean {
  try {
    return readdirSync(dir).every((name) => except.includes(name));
  } catch {
    return true;
  }
}

/**
 * The first of `paths` that is a symbolic link, as `<path> (a symbolic link to <target>)`, or
 * null. Where termorch creates its own files it never writes through a link: one planted there
 * would put them wherever it points.
 */
export function firstLink(paths: readonly string[]): string | null {
  for (const path of paths) {
    try {
      if (lstatSync(path).isSymbolicLink()) return `${path} (a symbolic link to ${readlinkSync(path)})`;
    } catch {}
  }
  return null;
}
