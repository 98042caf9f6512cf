import { PLAIN_DIFF } from "./commit.js";
import { git } from "./repo.js";

/** One file a commit range changed: its status letter (A, M, D, R, T…) and path (and, for a rename, where from). */
export interface FileChange {
  status: string;
  path: string;
  from?: string;
}

/** The files changed from `from` to `to`, renames detected, in path order. */
export async function fileChanges(repo: string, from: string, to: string): Promise<FileChange[]> {
  const r = await git(repo, ["diff-tree", "-r", "-z", "-M", "--name-status", from, to]);
  const t = r.stdout.split("\0");
  const out: FileChange[] = [];
  for (let i = 0; i < t.length; ) {
    const code = t[i++];
    if (!code) continue;
    const status = code.charAt(0);
    if (status === "R" || status === "C") {
      const src = t[i++] ?? "";
      out.push({ status, path: t[i++] ?? "", from: src });
    } else out.push({ status, path: t[i++] ?? "" });
  }
  return out.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
}

/** A text diff, cut at `maxBytes` (`truncated` then says so). */
export interface DiffText {
  text: string;
  truncated: boolean;
}

/**
 * The patch from `from` to `to`, limited to `paths` when given (both sides of a rename should be
 * named), as text for a prompt: plumbing with fixed prefixes, so the user's diff settings cannot
 * change it; binary files are only named.
 */
export async function diffText(
  repo: string,
  from: string,
  to: string,
  paths: readonly string[] | null,
  maxBytes: number,
): Promise<DiffText> {
  const r = await git(repo, [
    ...PLAIN_DIFF,
    from,
    to,
    ...(paths === null ? [] : ["--", ...paths.map((p) => `:(literal)${p}`)]),
  ]);
  const text = r.stdout;
  if (Buffer.byteLength(text) <= maxBytes) return { text, truncated: false };
  // Cut at a line, below the bound.
  const cut = Buffer.from(text).subarray(0, maxBytes).toString("utf8");
  return { text: cut.slice(0, Math.max(0, cut.lastIndexOf("\n") + 1)), truncated: true };
}
