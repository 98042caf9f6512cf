/**
 * Which files of a task's changes steer git itself, pure. Merged like any file, each would act on
 * whoever checks the result out or merges it: a .gitattributes names filters and merge drivers that
 * git runs (their commands come from a config, but the attributes pick them), a .gitmodules and a
 * nested repository (committed as a gitlink) bring in another repository, and a hook folder is
 * where tools such as husky point `core.hooksPath`.
 */
import type { GitControlFile } from "../contract/report.js";

/** Folders whose files are hooks once a tool points git at them. */
export const HOOK_FOLDERS = [".githooks", ".husky"] as const;

const GITLINK = "160000";

/** The entries (path and git mode, as changedEntries gives them) that steer git, in their order. */
export function gitControlFiles(entries: ReadonlyArray<{ path: string; mode: string }>): GitControlFile[] {
  const out: GitControlFile[] = [];
  for (const { path, mode } of entries) {
    const parts = path.split("/");
    const name = parts[parts.length - 1];
    if (mode === GITLINK) out.push({ path, kind: "nested_repository" });
    else if (name === ".gitattributes") out.push({ path, kind: "attributes" });
    else if (name === ".gitmodules") out.push({ path, kind: "submodules" });
    else if (parts.slice(0, -1).some((p) => (HOOK_FOLDERS as readonly string[]).includes(p)))
      out.push({ path, kind: "hooks" });
  }
  return out;
}

/** How the gate names them: `path (kind)`, a few at most. */
export function describeGitControls(files: readonly GitControlFile[]): string {
  const shown = files.slice(0, 5).map((f) => `${f.path} (${f.kind.replace("_", " ")})`);
  return files.length > 5 ? `${shown.join(", ")} and ${files.length - 5} more` : shown.join(", ");
}
