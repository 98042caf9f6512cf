/**
 * ALTO handoffs (shared/seeds/alto-protocol.md): a task with `success_criteria.handoff` gets the
 * template below, pre-created where its agent can edit it (`$TERMORCH_HANDOFF`); the `handoff`
 * gate then checks the required sections and that the files it says it touched are the ones the
 * task changed. Pure: text in, findings out.
 */

/** The protocol's required sections, each under its name or the protocol's other spelling. */
const SECTIONS = [
  { name: "Summary", heading: /^summary$/i },
  { name: "Files Touched", heading: /^files( touched)?$/i },
  { name: "How to Verify", heading: /^(how to verify|verification)$/i },
] as const;

/** The template the protocol's orchestrator pre-creates: the agent edits it, never starts over. */
export function handoffTemplate(taskId: string): string {
  return [
    `# Handoff: ${taskId}`,
    "",
    "## Summary",
    "<!-- What was accomplished -->",
    "",
    "## Files Touched",
    "<!-- List files modified, one per line: - path/to/file -->",
    "",
    "## How to Verify",
    "<!-- Commands or manual checks -->",
    "",
  ].join("\n");
}

export interface HandoffCheck {
  /** Required sections absent or left as the template has them (comments only). */
  missing: string[];
  /** Paths listed under Files Touched, workspace-relative. */
  listed: string[];
}

/** The sections of a handoff, by their `## ` heading, without HTML comments. */
function sectionsOf(text: string): Map<string, string> {
  const out = new Map<string, string>();
  let current: string | null = null;
  for (const line of text.replace(/<!--[\s\S]*?-->/g, "").split("\n")) {
    const heading = /^##\s+(.+?)\s*#*\s*$/.exec(line);
    if (heading) {
      current = heading[1]!;
      out.set(current, "");
    } else if (current !== null) out.set(current, `${out.get(current)}${line}\n`);
  }
  return out;
}

/**
 * A path from a line of the Files Touched list: `- src/a.ts`, `* \`src/a.ts\` (new)`,
 * `1. src/a.ts: why`; null for a line that names none.
 */
function pathOf(line: string): string | null {
  const item = line.replace(/^\s*(?:[-*+]|\d+[.)])\s+/, "").trim();
  if (!item) return null;
  // A path in backquotes may hold spaces; otherwise the first word is the path.
  const quoted = /^`([^`]+)`/.exec(item);
  const path = quoted ? quoted[1]! : item.split(/\s/)[0]!.replace(/[:,;]$/, "");
  return path ? path.replace(/^\.\//, "") : null;
}

export function checkHandoff(text: string): HandoffCheck {
  const sections = [...sectionsOf(text)];
  const missing: string[] = [];
  let listed: string[] = [];
  for (const s of SECTIONS) {
    const found = sections.find(([name]) => s.heading.test(name));
    if (!found || found[1].trim() === "") {
      missing.push(s.name);
      continue;
    }
    if (s.name === "Files Touched")
      listed = found[1]
        .split("\n")
        .map(pathOf)
        .filter((p): p is string => p !== null);
  }
  return { missing, listed: [...new Set(listed)] };
}
