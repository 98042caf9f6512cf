import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { readInside, writeFresh } from "../fs/no-follow.js";
import { DECISION_EXAMPLE, decisionPath } from "./decision.js";
import type { Ports } from "./ports.js";
import type { TaskRecorder } from "./recorder.js";
import { inWorkspace, type RunPlan } from "./run-plan.js";
import type { TaskPlan } from "./task-plan.js";
import type { TaskRun } from "./task-run.js";

/**
 * Writes a task's prompt before an attempt: its context file as it is, followed, when it has
 * dependencies, by a section termorch generates from what they did (their own summary, the files
 * they changed, their branch). The agent gets it from `plan.prompt.file`; `artifacts/<id>/prompt.md`
 * keeps the same text, redacted.
 */
export async function writePrompt(
  run: PromptRun,
  ports: Pick<Ports, "workspace" | "redactor">,
  tasks: TaskRecorder,
  p: TaskPlan,
): Promise<void> {
  const prompt = await promptText(run, ports, tasks, p);
  mkdirSync(dirname(p.prompt.file), { recursive: true, mode: 0o700 });
  writeFileSync(p.prompt.file, prompt, { mode: 0o600 });
  // Fresh: an earlier attempt's agent could have left a link at that name.
  writeFresh(p.workspace.artifactsDir, "prompt.md", ports.redactor.redactBytes(prompt));
}

/** A task's prompt: its context file, and what its dependencies did. */
export async function promptText(
  run: PromptRun,
  ports: Pick<Ports, "workspace">,
  tasks: Pick<TaskRecorder, "get">,
  p: TaskPlan,
): Promise<Buffer> {
  const context = readFileSync(p.prompt.context);
  // A redo of a conflicting result: the conflict, written by the merge (src/merge/redo.ts).
  const t = tasks.get(p.id);
  const redo = t.redo.progress;
  // What went wrong in the attempt before (feedback-facts.ts wrote it, redacted, before this one);
  // a bisect's fix has its own in its redo's section (merge/gate-fix.ts).
  const feedback = redo?.cause === "gate" ? null : t.history.at(-1)?.feedback;
  const section =
    (p.dependencies.length ? await dependencySection(run, ports, tasks, p) : "") +
    (feedback ? readInside(run.runDir, feedback).toString("utf8") : "") +
    (redo ? readFileSync(redo.section, "utf8") : "") +
    (p.prompt.conflictFile ? `\n\n${readFileSync(p.prompt.conflictFile, "utf8")}` : "") +
    handoffSection(p) +
    decisionSection(p);
  return Buffer.concat([context, Buffer.from(section)]);
}

/** Where the agent leaves its handoff: an LLM reads its prompt, not its environment. */
function handoffSection(p: TaskPlan): string {
  const { handoff } = p.gates;
  if (!handoff) return "";
  return [
    "",
    "",
    "---",
    "",
    "## Your handoff",
    "",
    `When your work is done, edit the handoff at ${handoff} (also in $TERMORCH_HANDOFF): fill in its`,
    "Summary, Files Touched (every file you changed, one per line, `- path`) and How to Verify sections.",
    "",
  ].join("\n");
}

/**
 * Where the agent may leave its decision (src/task/decision.ts), offered to every task: an agent
 * that cannot finish has a way to say so other than exiting, and one that writes nothing changes
 * nothing. Short, with an example an agent can copy: prose alone yields envelopes that fail the
 * schema.
 */
function decisionSection(p: TaskPlan): string {
  return [
    "",
    "",
    "---",
    "",
    "## If you cannot finish: your decision",
    "",
    `You may write a JSON decision about your work to ${decisionPath(p.workspace)} (also in $TERMORCH_DECISION); without one, termorch's checks decide. Its \`decision.status\`:`,
    "- `completed`: you did the work; termorch's checks decide.",
    "- `escalate_to_max`: this needs a stronger agent; the next one takes over with your reason and `result.notes`.",
    '- `blocked`: the task cannot go on; it stops, is not retried, and your reason is reported (`routing.recommended_next_actor: "human"` asks for a person).',
    "For example (`reason` and `trace.claim` not empty, `confidence` from 0 to 1, each evidence `type` one of file, text, uri, line_ref):",
    "",
    "```json",
    JSON.stringify(DECISION_EXAMPLE),
    "```",
    "",
  ].join("\n");
}

/** What the prompt reads of the run. */
type PromptRun = Pick<RunPlan, "git" | "plans" | "runDir">;

async function dependencySection(
  run: PromptRun,
  ports: Pick<Ports, "workspace">,
  tasks: Pick<TaskRecorder, "get">,
  p: TaskPlan,
): Promise<string> {
  const parts = [
    "",
    "",
    "---",
    "",
    "## What the tasks this one depends on did",
    "",
    "(Written by termorch from their results; their changes are already in your working tree.)",
  ];
  for (const id of p.dependencies) {
    const dep = tasks.get(id);
    parts.push("", `### ${id}`, "");
    parts.push(`- Result: ${oneBlock(dep.result.agentResult?.summary) ?? "(its agent reported no summary)"}`);
    parts.push(
      `- Files changed: ${(await changedBy(run.git, ports, dep)) ?? "(not known: the workspace is not a git repository)"}`,
    );
    if (dep.git.branch) parts.push(`- Branch: ${dep.git.branch}`);
    const depPlan = run.plans.get(id);
    const text = depPlan?.gates.handoff ? keptHandoff(depPlan.workspace.artifactsDir) : null;
    if (text && depPlan) {
      const kept = relative(run.runDir, join(depPlan.workspace.artifactsDir, "handoff.md"));
      parts.push("", `Its handoff (${kept}):`, "", text.trim());
    }
  }
  return `${parts.join("\n")}\n`;
}

const MAX_FILES_NAMED = 50;

async function changedBy(
  git: RunPlan["git"],
  ports: Pick<Ports, "workspace">,
  dep: Readonly<TaskRun>,
): Promise<string | null> {
  if (!git || !dep.git.startCommit || !dep.git.commit) return null;
  if (dep.git.startCommit === dep.git.commit) return "none";
  const files = inWorkspace(
    git,
    await ports.workspace.changedFiles(git.root, dep.git.startCommit, dep.git.commit),
  );
  if (files.length === 0) return "none";
  // A dependency that generated thousands of files must not bury the task's own context.
  const shown = files.slice(0, MAX_FILES_NAMED).join(", ");
  return files.length > MAX_FILES_NAMED
    ? `${shown} … and ${files.length - MAX_FILES_NAMED} more (git diff ${dep.git.startCommit}..${dep.git.commit})`
    : shown;
}

/** A dependency's kept handoff (redacted as it was kept), read through no link its agent could have left. */
function keptHandoff(artifactsDir: string): string | null {
  try {
    return readInside(artifactsDir, "handoff.md").toString("utf8");
  } catch {
    return null;
  }
}

/** A summary as one Markdown list item: its lines indented under it. */
function oneBlock(summary: string | null | undefined): string | null {
  if (!summary?.trim()) return null;
  return summary.trim().replace(/\n/g, "\n  ");
}
