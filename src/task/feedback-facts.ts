import { lstatSync, rmSync } from "node:fs";
import { join, relative } from "node:path";
import type { FeedbackBlock } from "../contract/feedback-block.js";
import type { Reason } from "../contract/reason.js";
import { readPartsSync } from "../fs/file-range.js";
import { writeFresh } from "../fs/no-follow.js";
import { failureLines, feedbackSection, TAIL_BYTES, tailOf } from "./feedback.js";
import type { Ports } from "./ports.js";
import type { ReviewFound } from "./review.js";
import { inWorkspace, type RunPlan } from "./run-plan.js";
import type { TaskRun } from "./task-run.js";
import type { TestsRan } from "./tests-gate.js";

/** What the failing gates of an attempt found, by kind: filled in as they run (gates.ts). */
export interface GateFindings {
  tests?: TestsRan;
  missingArtifacts?: string[];
  handoff?: FeedbackBlock["handoff"];
  outsideAllowed?: string[];
  secrets?: string[];
  review?: ReviewFound;
  /** A person rejected the result (its `approval`): who, and why. */
  rejection?: { by: string; reason: string | null };
}

/** How much of a log's beginning is searched for failure lines. */
const HEAD_BYTES = 256 * 1024;

/** A failed attempt, as its feedback section tells it. */
export interface FailedAttempt {
  t: Readonly<TaskRun>;
  /** The agent it ran, and its timeout (a timeout's "after how long"). */
  agent: string;
  timeoutS: number | undefined;
  reason: Reason;
  detail: string | null;
  found: GateFindings;
  decision: FeedbackBlock["decision"];
  /** Its work's commits, from the task's start (the files it changed); null: not known. */
  work: { from: string; to: string } | null;
}

/**
 * Writes the feedback section the next attempt is given, redacted, as
 * `artifacts/<task>/attempt-<next>/feedback.md`, and answers its path relative to the run
 * directory; the prompt (prompt.ts) appends it after the dependency section.
 */
export async function writeFeedback(
  run: Pick<RunPlan, "runDir" | "git">,
  ports: Pick<Ports, "workspace" | "redactor">,
  artifactsDir: string,
  failed: FailedAttempt,
  next: { n: number; from: FeedbackBlock["next_starts_from"] },
): Promise<string> {
  const facts = await feedbackFacts(run, ports, failed, next.from);
  // Through no link: the agent can write in its artifacts folder, and may have left one there
  // (a link or a file where the attempt's folder goes is removed; the folder is termorch's).
  const folder = join(artifactsDir, `attempt-${next.n}`);
  if (lstatSync(folder, { throwIfNoEntry: false })?.isDirectory() === false) rmSync(folder, { force: true });
  const rel = `attempt-${next.n}/feedback.md`;
  writeFresh(artifactsDir, rel, feedbackSection(facts, { runDir: run.runDir }));
  return relative(run.runDir, join(artifactsDir, rel));
}

/** The facts of a failed attempt, redacted and bounded. */
export async function feedbackFacts(
  run: Pick<RunPlan, "runDir" | "git">,
  ports: Pick<Ports, "workspace" | "redactor">,
  f: FailedAttempt,
  from: FeedbackBlock["next_starts_from"],
): Promise<FeedbackBlock> {
  const { t, found, reason, detail } = f;
  const changed =
    run.git && f.work && f.work.from !== f.work.to
      ? inWorkspace(run.git, await ports.workspace.changedFiles(run.git.root, f.work.from, f.work.to))
      : [];
  const facts: FeedbackBlock = {
    schema_version: 1,
    task: t.id,
    attempt: t.attempts,
    agent: f.agent,
    reason,
    detail,
    failed_gates: t.result.gates
      .filter((g) => g.passed === false)
      .map((g) => ({ name: g.name, detail: g.detail })),
    tests: found.tests ? testsTail(run.runDir, found.tests) : null,
    missing_artifacts: found.missingArtifacts ?? [],
    handoff: found.handoff ?? null,
    outside_allowed_paths: found.outsideAllowed ?? [],
    timeout_s: reason === "timeout" ? (f.timeoutS ?? null) : null,
    agent_error: reason === "agent_error" ? detail : null,
    screen: reason === "prompt_not_delivered" ? detail : null,
    secrets: found.secrets ?? [],
    decision: f.decision,
    review: found.review
      ? {
          ...found.review,
          comments: found.review.comments.map((c) => ({
            file: c.file ?? null,
            line: c.line ?? null,
            body: c.body,
          })),
        }
      : null,
    rejection: found.rejection ?? null,
    plan_problems: null,
    summary: t.result.agentResult?.summary ?? null,
    changed_files: changed,
    next_starts_from: from,
  };
  // Logs and details are redacted already; the agent's summary and the decision's words may not be.
  return ports.redactor.redactDeep(facts);
}

/** A failed tests_cmd's failure lines and the end of its output (stdout, then stderr). */
export function testsTail(runDir: string, ran: TestsRan): NonNullable<FeedbackBlock["tests"]> {
  const parts = ran.logs.map((log) => readEnds(join(runDir, log)));
  const head = parts.map((p) => p.head).join("\n");
  const whole = parts
    .map((p) => p.tail)
    .filter(Boolean)
    .join("\n");
  const { tail, truncated } = tailOf(whole);
  return {
    command: ran.command,
    exit_code: ran.exitCode,
    how: ran.how,
    failure_lines: failureLines(head),
    tail,
    truncated: truncated || parts.some((p) => p.cut),
    logs: ran.logs,
  };
}

/** A log's first and last bytes (a log may be huge); empty when it cannot be read. */
function readEnds(file: string): { head: string; tail: string; cut: boolean } {
  const read = readPartsSync(file, [
    { from: 0, bytes: HEAD_BYTES },
    { from: null, bytes: TAIL_BYTES * 2 },
  ]);
  if (!read) return { head: "", tail: "", cut: false };
  const [head, tail] = read.parts.map((b) => b.toString("utf8")) as [string, string];
  return { head, tail, cut: read.size > TAIL_BYTES * 2 };
}
