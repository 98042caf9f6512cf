import type { ConflictBlock } from "../contract/conflict-block.js";
import type { Gate } from "../contract/report.js";

/** A diff shown in the prompt, and the git command that shows all of it when it was cut. */
export interface Excerpt {
  text: string;
  truncated: boolean;
  see: string;
}

/** A file another task changed: status letter (A, M, D, R…), path, and where from for a rename. */
export interface OtherChange {
  status: string;
  path: string;
  from?: string;
}

/** Everything the conflict section of a redo's prompt says: gathered by conflict-facts.ts, plain data. */
export interface ConflictFacts {
  task: string;
  /** Which redo of the task this is, and how many it may have. */
  redo: number;
  of: number;
  startCommit: string;
  beforeCommit: string;
  /** The tasks whose work the start holds, in merge order. */
  mergedBefore: string[];
  conflicts: { kind: string; paths: string[]; with: string[] }[];
  /** The conflicting files (both paths of a rename). */
  files: string[];
  /** What was merged before it did to those files: its start to the new start. */
  theirs: Excerpt;
  /** What its earlier result did to them. */
  yours: Excerpt;
  /** Its whole earlier diff (kept as a file beside the prompt). */
  ownPatch: Excerpt & { file: string };
  /** The tasks it conflicted with. */
  others: {
    id: string;
    summary: string | null;
    changes: OtherChange[];
    handoff: { path: string; text: string } | null;
  }[];
  /** Its earlier redos of this conflict that failed. */
  previous: { redo: number; reason: string | null; detail: string | null; gates: Gate[] }[];
}

/** The fence of the machine-readable block a stand-in (or an agent) can parse (`termorch schema conflict-block`). */
export const CONFLICT_BLOCK_INFO = "json termorch-conflict";

/**
 * The section appended to a redone task's prompt: what conflicted with what, both sides' hunks,
 * the other tasks' summaries and handoffs, its own earlier diff, earlier failed redos, and the
 * same facts as a JSON block. Markdown, in the style of the dependency section.
 */
export function conflictSection(f: ConflictFacts): string {
  const out: string[] = [
    "",
    "",
    "---",
    "",
    "## Your earlier work conflicts with what was merged before it",
    "",
    `termorch merges the run's tasks one by one. Your earlier result (commit ${f.beforeCommit}) conflicts with the work of ${names(f.conflicts.flatMap((c) => c.with))}, merged before it. This is redo ${f.redo}/${f.of}: your working tree now holds the integration of ${f.mergedBefore.length ? f.mergedBefore.join(", ") : "the tasks before you"} (commit ${f.startCommit}) and none of your earlier changes.`,
    "",
    "Do your task again on top of it, so that both your intent and theirs hold: keep their changes, and make yours fit them (a file they renamed or replaced is where your change now belongs). Your gates run again on the result.",
    "",
    "### Conflicts",
    "",
  ];
  for (const c of f.conflicts)
    out.push(`- ${c.paths.join(" <- ")}: ${c.kind}${c.with.length ? `, with ${c.with.join(", ")}` : ""}`);
  for (const o of f.others) {
    out.push("", `### What ${o.id} did`, "");
    out.push(
      `- Result: ${o.summary?.trim() ? o.summary.trim().replace(/\n/g, "\n  ") : "(its agent reported no summary)"}`,
    );
    out.push(`- Files changed: ${o.changes.length ? o.changes.map(changeText).join(", ") : "none"}`);
    if (o.handoff) out.push("", `Its handoff (${o.handoff.path}):`, "", o.handoff.text.trim());
  }
  out.push("", "### Their changes to the conflicting files", "", ...excerpt(f.theirs));
  out.push("", "### Your earlier changes to them", "", ...excerpt(f.yours));
  out.push("", `### Your whole earlier diff (also in ${f.ownPatch.file})`, "", ...excerpt(f.ownPatch));
  if (f.previous.length) {
    out.push("", "### Your earlier redos that failed", "");
    for (const p of f.previous) {
      const gates = p.gates.filter((g) => g.passed === false).map((g) => `${g.name}: ${g.detail}`);
      out.push(
        `- Redo ${p.redo}: ${p.reason ?? "failed"}${p.detail ? ` (${p.detail})` : ""}${gates.length ? `; failed gates: ${gates.join("; ")}` : ""}`,
      );
    }
  }
  const hunk = (e: Excerpt) => ({ diff: e.text, truncated: e.truncated, see: e.see });
  const block: ConflictBlock = {
    schema_version: 1,
    task: f.task,
    redo: f.redo,
    of: f.of,
    start_commit: f.startCommit,
    before_commit: f.beforeCommit,
    merged_before: f.mergedBefore,
    files: f.files,
    conflicts: f.conflicts,
    others: f.others.map((o) => ({
      task: o.id,
      summary: o.summary,
      changes: o.changes,
      handoff: o.handoff?.path ?? null,
    })),
    hunks: { theirs: hunk(f.theirs), yours: hunk(f.yours) },
    own_diff: { file: f.ownPatch.file, truncated: f.ownPatch.truncated, see: f.ownPatch.see },
    previous: f.previous.map((p) => ({
      redo: p.redo,
      reason: p.reason,
      detail: p.detail,
      failed_gates: p.gates
        .filter((g) => g.passed === false)
        .map((g) => ({ name: g.name, detail: g.detail })),
    })),
  };
  out.push(
    "",
    "### The same, for tools",
    "",
    `\`\`\`${CONFLICT_BLOCK_INFO}`,
    JSON.stringify(block, null, 2),
    "```",
    "",
  );
  return out.join("\n");
}

function names(ids: readonly string[]): string {
  const unique = [...new Set(ids)];
  return unique.length ? unique.join(", ") : "the tasks";
}

function changeText(c: OtherChange): string {
  const what: Record<string, string> = {
    A: "added",
    M: "modified",
    D: "deleted",
    R: "renamed",
    T: "type changed",
  };
  const word = what[c.status] ?? c.status;
  return c.from ? `${c.path} (${word} from ${c.from})` : `${c.path} (${word})`;
}

/** A diff in a fence longer than any run of backticks in it, and where to see the rest. */
function excerpt(e: Excerpt): string[] {
  if (!e.text.trim()) return ["(none)"];
  const longest = Math.max(2, ...[...e.text.matchAll(/`+/g)].map((m) => m[0].length));
  const fence = "`".repeat(longest + 1);
  return [
    `${fence}diff`,
    e.text.trimEnd(),
    fence,
    ...(e.truncated ? ["", `(cut here; all of it: ${e.see})`] : []),
  ];
}
