import { join, relative } from "node:path";
import type { AttemptRecord } from "../contract/attempt-record.js";
import { type Decision, parseDecision } from "../contract/decision.js";
import type { FeedbackBlock } from "../contract/feedback-block.js";
import { errorText } from "../errors.js";
import { Refused, readInside, removeInside, writeFresh } from "../fs/no-follow.js";
import type { Ledger } from "../ledger/ledger.js";
import type { Redactor } from "../redact/redactor.js";
import type { DecisionSeen } from "./next-attempt.js";

/**
 * The agent's own decision about an attempt (docs/guides/how-tasks-run.md, "the agent's decision"): a file at
 * `$TERMORCH_DECISION` it may write, removed before each attempt and read after it, through no
 * link (the agent could leave one to a file it cannot read itself). What it says is the
 * next-attempt policy's to act on (src/task/next-attempt.ts); this module only finds, reads and
 * keeps it.
 */

/** Where a task's decision is, in its worktree (at the workspace's place in it): never committed. */
export const DECISION_IN_WORKTREE = ".termorch/decision.json";

/** The most of a decision file termorch reads: an envelope is a few hundred bytes. */
export const MAX_DECISION_BYTES = 64 * 1024;

/** The envelope the prompt shows an agent (it must pass the schema: agents copy it). */
export const DECISION_EXAMPLE = {
  decision: { status: "blocked", reason: "what stops you, in a sentence", confidence: 0.8 },
  trace: { claim: "what you found", evidence: [{ type: "file", ref: "path/you/read", note: "why" }] },
  routing: { recommended_next_actor: "human" },
} as const;

/** Where a task works: what places its decision file. */
export interface DecisionWhere {
  /** Its worktree; null when the workspace is no git repository. */
  worktree: string | null;
  cwd: string;
  artifactsDir: string;
}

/**
 * The decision file as a folder termorch made and a path below it: in the worktree, where every
 * CLI's edit mode lets its agent write; in the artifacts folder when there is no worktree.
 */
export function decisionPlace(p: DecisionWhere): { root: string; rel: string } {
  return p.worktree === null
    ? { root: p.artifactsDir, rel: "decision.json" }
    : { root: p.cwd, rel: DECISION_IN_WORKTREE };
}

/** `$TERMORCH_DECISION`: the absolute path the agent writes. */
export function decisionPath(p: DecisionWhere): string {
  const at = decisionPlace(p);
  return join(at.root, at.rel);
}

/**
 * Before each attempt: no decision of an earlier attempt is read as this one's. Its folder is
 * made, so that an agent whose edit tool makes no folders can write the file.
 */
export function clearDecision(p: DecisionWhere): void {
  const at = decisionPlace(p);
  removeInside(at.root, at.rel);
}

/** What an attempt's agent decided: nothing, a valid envelope (seed shape), or an invalid one. */
export type DecisionRead =
  | { kind: "none" }
  | { kind: "valid"; decision: Decision; file: string }
  | {
      kind: "invalid";
      /** What is wrong, each with its JSON path when the schema found it; not redacted. */
      problems: string[];
      file: string;
      /** The bytes read (at most MAX_DECISION_BYTES), kept redacted as its quarantine; null: none were read (a link, a fifo). */
      bytes: Buffer | null;
    };

/** After the attempt's agent ended (and before its worktree is reset): the decision it left, if any. */
export function readDecision(p: DecisionWhere): DecisionRead {
  const at = decisionPlace(p);
  return readAt(at.root, at.rel);
}

/** The decision at `rel` below `root`, read through no link. */
function readAt(root: string, rel: string): DecisionRead {
  const file = join(root, rel);
  const invalid = (problems: string[], bytes: Buffer | null = null): DecisionRead => ({
    kind: "invalid",
    problems,
    file,
    bytes,
  });
  let bytes: Buffer;
  try {
    // One byte over the bound tells a file that is too big from one that fits exactly.
    bytes = readInside(root, rel, MAX_DECISION_BYTES + 1);
  } catch (error) {
    if (error instanceof Refused && error.why === "missing") return { kind: "none" };
    return invalid([`not read: ${errorText(error)}`]);
  }
  if (bytes.length > MAX_DECISION_BYTES)
    return invalid(
      [`larger than ${MAX_DECISION_BYTES / 1024} KiB: not read (an envelope is a few hundred bytes)`],
      bytes.subarray(0, MAX_DECISION_BYTES),
    );
  let value: unknown;
  try {
    value = JSON.parse(bytes.toString("utf8"));
  } catch (error) {
    return invalid([`not JSON: ${errorText(error)}`], bytes);
  }
  const parsed = parseDecision(value);
  return parsed.ok ? { kind: "valid", decision: parsed.decision, file } : invalid(parsed.problems, bytes);
}

/** The kept copies of attempt n's decision, relative to the task's artifacts folder. */
export function keptDecisionRel(attempt: number, kind: "valid" | "invalid"): string {
  return `attempt-${attempt}/${kind === "valid" ? "decision.json" : "decision.quarantined.json"}`;
}

/**
 * Keeps attempt n's decision, redacted, with the task's artifacts (`attempt-<n>/decision.json`,
 * or `attempt-<n>/decision.quarantined.json` for an invalid one's bytes: empty when none could
 * be read, a link or a fifo), and records it in the ledger (`task.decision`). Answers where it is
 * kept, relative to the run directory.
 */
export async function keepDecision(
  o: {
    runDir: string;
    artifactsDir: string;
    taskId: string;
    attempt: number;
    redactor: Redactor;
    ledger: Pick<Ledger, "append">;
  },
  read: Exclude<DecisionRead, { kind: "none" }>,
): Promise<string> {
  const rel = keptDecisionRel(o.attempt, read.kind);
  writeFresh(
    o.artifactsDir,
    rel,
    read.kind === "valid"
      ? `${JSON.stringify(o.redactor.redactDeep(read.decision), null, 2)}\n`
      : o.redactor.redactBytes(read.bytes ?? Buffer.alloc(0)),
  );
  const kept = relative(o.runDir, join(o.artifactsDir, rel));
  // The ledger redacts what it records.
  await o.ledger.append(
    "task.decision",
    read.kind === "valid"
      ? {
          attempt: o.attempt,
          kind: "valid",
          status: read.decision.decision.status,
          reason: read.decision.decision.reason,
          confidence: read.decision.decision.confidence,
          recommended_next_actor: read.decision.routing?.recommended_next_actor ?? null,
          file: kept,
        }
      : { attempt: o.attempt, kind: "invalid", problems: read.problems, file: kept },
    o.taskId,
  );
  return kept;
}

/** Attempt n's decision as the attempt loop uses it: for the policy, the attempt's record, the next feedback. */
export interface TakenDecision {
  /** What the next-attempt policy reads (src/task/next-attempt.ts); its words redacted. */
  seen: DecisionSeen;
  /** The attempt record's `decision` (state.json's history, the report's attempt_history); null: none. */
  record: AttemptRecord["decision"];
  /** The next attempt's feedback block's `decision`: an escalation's reason and notes; null otherwise. */
  feedback: FeedbackBlock["decision"];
}

/**
 * Once attempt n's agent ended and its gates ran: its decision read (readDecision), kept and
 * recorded (keepDecision), then removed, so that it is read once and never taken for a later
 * attempt's (a retry from its work keeps its worktree; a set-up that fails launches no agent).
 * A process that died after keeping it and before its record finds the kept copy instead.
 */
export async function takeDecision(
  o: Parameters<typeof keepDecision>[0],
  where: DecisionWhere,
): Promise<TakenDecision> {
  const read = readDecision(where);
  if (read.kind === "none") {
    const earlier = keptCopy(o);
    return earlier === null ? NO_DECISION : taken(o.redactor, earlier.read, earlier.kept);
  }
  const kept = await keepDecision(o, read);
  const at = decisionPlace(where);
  removeInside(at.root, at.rel);
  return taken(o.redactor, read, kept);
}

const NO_DECISION: TakenDecision = { seen: { kind: "none" }, record: null, feedback: null };

/** Attempt n's decision as an earlier process kept it, if it did (it died before its record). */
function keptCopy(o: { runDir: string; artifactsDir: string; attempt: number }): {
  read: Exclude<DecisionRead, { kind: "none" }>;
  kept: string;
} | null {
  for (const kind of ["valid", "invalid"] as const) {
    const rel = keptDecisionRel(o.attempt, kind);
    const read = readAt(o.artifactsDir, rel);
    if (read.kind === "none") continue;
    const kept = relative(o.runDir, join(o.artifactsDir, rel));
    // A quarantine holds what was read: nothing, when the agent's file could not be.
    if (kind === "invalid" && read.kind === "invalid" && read.bytes?.length === 0)
      return { read: { ...read, problems: ["not read (a link, a fifo, or no regular file)"] }, kept };
    return { read, kept };
  }
  return null;
}

function taken(
  redactor: Redactor,
  read: Exclude<DecisionRead, { kind: "none" }>,
  kept: string,
): TakenDecision {
  if (read.kind === "invalid") {
    const problems = read.problems.map((p) => redactor.redact(p));
    return {
      seen: { kind: "invalid", problems },
      record: {
        status: "invalid",
        reason: problems.join("; "),
        confidence: null,
        recommended_next_actor: null,
        file: kept,
      },
      feedback: null,
    };
  }
  const d = redactor.redactDeep(read.decision);
  const actor = d.routing?.recommended_next_actor ?? null;
  return {
    seen: { kind: "valid", status: d.decision.status, reason: d.decision.reason, human: actor === "human" },
    record: {
      status: d.decision.status,
      reason: d.decision.reason,
      confidence: d.decision.confidence,
      recommended_next_actor: actor,
      file: kept,
    },
    feedback:
      d.decision.status === "escalate_to_max"
        ? { status: d.decision.status, reason: d.decision.reason, notes: d.result?.notes ?? null }
        : null,
  };
}
