import { GitError } from "./errors.js";
import { git } from "./repo.js";

/** One informational message of `git merge-tree --messages -z`. */
export interface MergeMessage {
  /** Paths the message is about; the first is the primary one. */
  paths: string[];
  /** Stable machine type, e.g. `CONFLICT (contents)` or `Auto-merging`. */
  type: string;
  /** The human message, e.g. `CONFLICT (add/add): Merge conflict in n`. */
  text: string;
}

/** Outcome of one in-memory three-way merge. */
export interface MergeTreeResult {
  clean: boolean;
  /** The merged tree; with conflicts it holds conflict markers and must not be committed. */
  tree: string;
  /** Paths left with conflicts (empty when clean). */
  conflicted: string[];
  messages: MergeMessage[];
}

/** How a conflict is reported: content, add/add, modify/delete, rename/delete, rename, ... */
export type ConflictKind = string;

/**
 * Merges two commits in memory (`git merge-tree --write-tree`). Writes objects only: no ref,
 * index, HEAD or work tree of the repository is read for writing, so it is safe to run while
 * the user works in the repository, and for many merges at once.
 */
export async function mergeTree(repo: string, ours: string, theirs: string): Promise<MergeTreeResult> {
  const r = await git(repo, ["merge-tree", "--write-tree", "--messages", "--name-only", "-z", ours, theirs], {
    allowExit: [0, 1],
  });
  const parsed = parseMergeTree(r.stdout);
  if (!/^[0-9a-f]{40,64}$/.test(parsed.tree)) {
    throw new GitError(`unexpected output from git merge-tree ${ours} ${theirs}: ${r.stdout.slice(0, 200)}`, {
      cwd: repo,
      stderr: r.stderr,
    });
  }
  return { ...parsed, clean: r.exitCode === 0 };
}

/**
 * Parses `merge-tree --write-tree --messages --name-only -z` output:
 * `<tree>\0` `<conflicted path>\0`... `\0` then messages, each
 * `<n>\0<path>\0 x n <type>\0<message>\0`.
 */
export function parseMergeTree(out: string): Omit<MergeTreeResult, "clean"> {
  const t = out.split("\0");
  const tree = t[0] ?? "";
  let i = 1;
  const conflicted: string[] = [];
  while (i < t.length && t[i] !== "") conflicted.push(t[i++] as string);
  i++; // the empty field that ends the conflicted-file section
  const messages: MergeMessage[] = [];
  while (i < t.length && t[i] !== "") {
    const n = Number(t[i++]);
    if (!Number.isInteger(n) || n < 0) break;
    const paths = t.slice(i, i + n);
    i += n;
    const type = t[i++] ?? "";
    const text = (t[i++] ?? "").trim();
    messages.push({ paths, type, text });
  }
  return { tree, conflicted, messages };
}

/** True for messages that describe a conflict rather than progress (`Auto-merging`). */
export function isConflictMessage(m: MergeMessage): boolean {
  return m.type.startsWith("CONFLICT") || m.text.startsWith("CONFLICT");
}

/**
 * The kind of a conflict, from the message text (its label is more precise than the
 * structured type: an add/add conflict has the type `CONFLICT (contents)`).
 */
export function conflictKind(m: MergeMessage): ConflictKind {
  const label = (/^CONFLICT \(([^)]*)\)/.exec(m.text) ?? /^CONFLICT \(([^)]*)\)/.exec(m.type))?.[1] ?? "";
  switch (label) {
    case "content":
    case "contents":
      return "content";
    case "add/add":
    case "modify/delete":
    case "rename/delete":
    case "file/directory":
    case "submodule":
      return label;
    case "binary":
      return "content (binary)";
    case "rename/rename":
    case "rename involved in collision":
    case "file location":
    case "directory rename split":
    case "implicit dir rename":
      return "rename";
    case "distinct modes":
    case "distinct types":
      return "type";
    default:
      return label || "content";
  }
}
