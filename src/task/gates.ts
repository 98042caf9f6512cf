import { existsSync } from "node:fs";
import type { Gate } from "../contract/report.js";
import { errorText } from "../errors.js";
import { matchesAny } from "../fs/find-files.js";
import { Refused, readInside, writeFresh } from "../fs/no-follow.js";
import { withTrailers } from "../git/repo.js";
import { approvalWait, awaitDecision, decisionText } from "./approval.js";
import { attemptEnv } from "./attempt.js";
import { commitOnTaskBranch } from "./commit.js";
import type { GateFindings } from "./feedback-facts.js";
import { describeGitControls, gitControlFiles } from "./git-controls.js";
import { checkHandoff } from "./handoff.js";
import type { AttemptOutcome } from "./outcome.js";
import type { Ports } from "./ports.js";
import type { TaskRecorder } from "./recorder.js";
import { findRequired } from "./required-artifacts.js";
import { reviewAttempt } from "./review.js";
import { inWorkspace, type RunPlan, trailersOf } from "./run-plan.js";
import { agentWork } from "./sandbox.js";
import { type SecretsFound, secretsGate } from "./secrets-gate.js";
import { setupGates } from "./setup.js";
import type { RunStop } from "./stop.js";
import { type AgentPlan, handoffPlace, type TaskPlan } from "./task-plan.js";
import type { TaskRun } from "./task-run.js";
import { testsGate } from "./tests-gate.js";

/** What a gate looks at: the task after its attempt exited 0, and the run around it. */
interface GateScope {
  run: RunPlan;
  ports: Ports;
  stop: RunStop;
  recorder: TaskRecorder;
  t: Readonly<TaskRun>;
  p: TaskPlan;
  /** The agent its attempt ran. */
  agent: AgentPlan;
  /** Failures of earlier gates that do not end the checks at once (a later gate may still be told). */
  failures: readonly string[];
  /** What the failing gates found, by kind, for the next attempt's feedback section. */
  found: GateFindings;
}

/** A gate's verdict: the gates it adds; `end`: the attempt fails here; `failure`: it fails once all ran. */
interface Verdict {
  gates: Gate[];
  end?: AttemptOutcome;
  failure?: string;
}

type GateStep = (s: GateScope) => Promise<Verdict | "detached">;

/**
 * Per-task gates in the order docs/guides/how-tasks-run.md gives (docs/ARCHITECTURE.md: the pipeline), after the core gate
 * passed. Each gate is one step; the first to `end` the attempt stops the rest.
 */
const TASK_GATES: readonly GateStep[] = [
  commitGate,
  changesGate,
  handoffGate,
  requiredArtifactsGate,
  allowedPathsGate,
  gitControlsGate,
  testsCmdGate,
  reviewGate,
  approvalGate,
];

/** Runs the task's gates; answers the failing reason (null: every gate passed) or "detached". */
export async function runGates(
  s: Omit<GateScope, "failures" | "found">,
  found: GateFindings,
): Promise<AttemptOutcome | "detached"> {
  const { recorder, t } = s;
  let gates: Gate[] = [
    ...setupGates(t),
    { name: "core", required: true, passed: true, detail: "exit code 0" },
  ];
  recorder.note(t.id, { result: { gates } });
  const failures: string[] = [];
  for (const step of TASK_GATES) {
    const verdict = await step({ ...s, failures, found });
    if (verdict === "detached") return "detached";
    gates = [...gates, ...verdict.gates];
    recorder.note(t.id, { result: { gates } });
    if (verdict.end) return verdict.end;
    if (verdict.failure) failures.push(verdict.failure);
  }
  if (failures.length === 0) return { reason: null, detail: null };
  return { reason: "validation", detail: failures.join("; ") };
}

/**
 * The message of termorch's commit of an attempt's work: which attempt it is, and for a redo
 * which redo of which conflict, in the subject and as trailers. A redone task's earlier result
 * can stay in the merged history (a replayed dependent's start), so the two must not read alike.
 */
export function taskCommitMessage(
  t: Pick<TaskRun, "id" | "attempts" | "redo">,
  agent: string,
  runId: string,
): string {
  const redo = t.redo.progress
    ? `: redo ${t.redo.progress.n} of its conflict with ${t.redo.progress.with.join(", ") || "the tasks before it"}`
    : "";
  return withTrailers(`termorch: task ${t.id} (agent ${agent}, run ${runId}, attempt ${t.attempts}${redo})`, {
    ...trailersOf(runId, t.id),
    "Termorch-Attempt": String(t.attempts),
    ...(t.redo.progress ? { "Termorch-Redo": String(t.redo.progress.n) } : {}),
  });
}

/**
 * The secrets gate, then the commit of what the agent left in its worktree on the task branch:
 * a secret the agent wrote into its work must not reach a commit of termorch's.
 */
async function commitGate({ run, ports, recorder, t, p, agent, found }: GateScope): Promise<Verdict> {
  const { worktree, keepInRepo } = p.workspace;
  if (!run.git || worktree === null) return { gates: [] };
  const failed = (name: string, detail: string): Verdict => ({
    gates: [{ name, required: true, passed: false, detail }],
    end: { reason: "validation", detail },
  });
  // Without its worktree there is nothing to commit or check, and git cannot even start there.
  if (!existsSync(worktree)) {
    const detail = `its worktree ${worktree} was deleted while the agent ran (by the agent?); its work is lost`;
    return { ...failed("commit", detail), end: { reason: "lost", detail } };
  }
  let secrets: SecretsFound | null = null;
  let secretsError: unknown = null;
  if (t.git.startCommit)
    secrets = await secretsGate(ports, worktree, t.git.startCommit, keepInRepo, agent.scratch).catch(
      (error: unknown) => {
        secretsError = error;
        return null;
      },
    );
  if (secrets && !secrets.gate.passed) {
    found.secrets = secrets.places;
    return { gates: [secrets.gate], end: { reason: "validation", detail: secrets.gate.detail } };
  }
  const gates = secrets ? [secrets.gate] : [];
  try {
    const commit = await commitOnTaskBranch(ports, recorder, run.privateDir, t, worktree, {
      message: taskCommitMessage(t, agent.name, run.runId),
      exclude: [...keepInRepo],
      scratch: agent.scratch,
      ...(t.git.startCommit ? { start: t.git.startCommit } : {}),
      identity: run.identity,
    });
    recorder.note(t.id, { git: { commit } });
  } catch (error) {
    const failure = failed(
      "commit",
      `could not commit its changes: ${ports.redactor.redact(errorText(error))}`,
    );
    return { ...failure, gates: [...gates, ...failure.gates] };
  }
  // The commit worked where the look for secrets could not (git failed there): nothing is let through unseen.
  if (secretsError !== null) {
    const failure = failed(
      "secrets",
      `could not look for secrets in its changes: ${ports.redactor.redact(errorText(secretsError))}`,
    );
    return { ...failure, gates: [...gates, ...failure.gates] };
  }
  return { gates };
}

/**
 * An agent that exits 0 having done nothing (codex when its patch did not apply; an interactive
 * agent whose prompt never arrived) must not pass as done: no diff against its start and no
 * commit, and none of its required artifacts, fails, unless the task says its work is no change.
 */
async function changesGate({ run, t, p, agent }: GateScope): Promise<Verdict> {
  const verdict = (passed: boolean | null, detail: string): Verdict => ({
    gates: [{ name: "changes", required: agent.expectChanges, passed, detail }],
    ...(passed === false ? { end: { reason: "no_changes" as const, detail } } : {}),
  });
  if (!agent.expectChanges) return verdict(null, "not checked: expect_changes is false");
  if (!run.git || !t.git.startCommit || !t.git.commit)
    return verdict(null, "not checked: the workspace is not a git repository");
  if (t.git.commit !== t.git.startCommit) return verdict(true, `committed ${t.git.commit.slice(0, 12)}`);
  for (const pattern of p.gates.requiredArtifacts)
    if ((await findRequired(p.workspace, pattern)).found.length > 0)
      return verdict(true, `no change, but its required artifact ${pattern} is there`);
  return verdict(
    false,
    "its agent exited 0 having changed nothing in its worktree (no diff against its start, no commit)" +
      (p.gates.requiredArtifacts.length ? " and produced none of its required artifacts" : "") +
      '; if that is its job, give the task or its agent "expect_changes": false',
  );
}

/**
 * The ALTO handoff the agent filled in: its required sections there, and every file it lists
 * under Files Touched one the task changed (those it left out are named, not held against it).
 */
async function handoffGate({ run, ports, t, p, found }: GateScope): Promise<Verdict> {
  if (!p.gates.handoff) return { gates: [] };
  const verdict = (passed: boolean | null, detail: string): Verdict => ({
    gates: [{ name: "handoff", required: true, passed, detail }],
    ...(passed === false ? { end: { reason: "validation" as const, detail } } : {}),
  });
  const at = handoffPlace(p.workspace);
  let text: string;
  try {
    // Through no link: the agent may have moved its folder and left a link to a file it cannot see.
    text = readInside(at.root, at.rel).toString("utf8");
  } catch (error) {
    if (error instanceof Refused && error.why !== "missing")
      return verdict(false, `its handoff ($TERMORCH_HANDOFF) was not read: ${error.message}`);
    return verdict(false, "its handoff ($TERMORCH_HANDOFF) is gone: the agent was to edit it, not remove it");
  }
  // Kept with the artifacts, redacted as it is written (a secret quoted in it never reaches a
  // file of termorch's, whatever comes after): the report points to it and dependents read it.
  const { artifactsDir } = p.workspace;
  if (at.root !== artifactsDir) writeFresh(artifactsDir, "handoff.md", ports.redactor.redact(text));
  if (!run.settings.verify) return verdict(null, "skipped (verify: false)");
  const { missing, listed } = checkHandoff(text);
  if (missing.length) {
    found.handoff = { missing_sections: missing, listed_not_changed: [], changed_not_listed: [] };
    return verdict(false, `its handoff lacks ${missing.join(", ")} (filled in)`);
  }
  if (!run.git || !t.git.startCommit || !t.git.commit)
    return verdict(true, "sections present; Files Touched not checked: no git");
  const changed = inWorkspace(
    run.git,
    await ports.workspace.changedFiles(run.git.root, t.git.startCommit, t.git.commit),
  );
  const untouched = listed.filter((f) => !changed.includes(f));
  const unlisted = changed.filter((f) => !listed.includes(f));
  const leftOut = unlisted.length ? `; changed but not listed: ${unlisted.join(", ")}` : "";
  if (untouched.length) {
    found.handoff = { missing_sections: [], listed_not_changed: untouched, changed_not_listed: unlisted };
    return verdict(
      false,
      `its handoff lists files the task did not change: ${untouched.join(", ")}${leftOut}`,
    );
  }
  return verdict(true, `sections present, ${listed.length} files listed, all changed${leftOut}`);
}

async function requiredArtifactsGate({ run, p, found }: GateScope): Promise<Verdict> {
  const required = p.gates.requiredArtifacts;
  const gate = (required: boolean, passed: boolean | null, detail: string): Gate => ({
    name: "required_artifacts",
    required,
    passed,
    detail,
  });
  if (required.length === 0) return { gates: [gate(false, null, "none required")] };
  if (!run.settings.verify) return { gates: [gate(true, null, "skipped (verify: false)")] };
  const missing: string[] = [];
  const refused: string[] = [];
  for (const pattern of required) {
    const matched = await findRequired(p.workspace, pattern);
    if (matched.found.length === 0) missing.push(pattern);
    refused.push(...matched.refused);
  }
  if (missing.length === 0) return { gates: [gate(true, true, `present: ${required.join(", ")}`)] };
  // A match that is a link out of the worktree, or no regular file, is named: the agent sees why.
  const why = refused.length ? ` (not taken: ${refused.join("; ")})` : "";
  found.missingArtifacts = missing;
  return {
    gates: [gate(true, false, `missing: ${missing.join(", ")}${why}`)],
    failure: `required artifacts missing: ${missing.join(", ")}${why}`,
  };
}

async function allowedPathsGate({ run, ports, t, p, found }: GateScope): Promise<Verdict> {
  const allowed = p.gates.allowedPaths;
  const gate = (required: boolean, passed: boolean | null, detail: string): Gate => ({
    name: "allowed_paths",
    required,
    passed,
    detail,
  });
  if (!allowed) return { gates: [gate(false, null, "no restriction")] };
  if (!run.git || !t.git.startCommit || !t.git.commit)
    return { gates: [gate(true, null, "skipped: the workspace is not a git repository")] };
  const changed = inWorkspace(
    run.git,
    await ports.workspace.changedFiles(run.git.root, t.git.startCommit, t.git.commit),
  );
  const outside = changed.filter((f) => !matchesAny(f, allowed));
  if (outside.length === 0) return { gates: [gate(true, true, `all changes within ${allowed.join(", ")}`)] };
  found.outsideAllowed = outside;
  return {
    gates: [gate(true, false, `changed outside ${allowed.join(", ")}: ${outside.join(", ")}`)],
    failure: `changed files outside allowed_paths: ${outside.join(", ")}`,
  };
}

/**
 * Files of its changes that steer git (git-controls.ts): named in the report, and refused when the
 * task says so. No gate is shown when there are none and none are refused.
 */
async function gitControlsGate({ run, ports, recorder, t, p }: GateScope): Promise<Verdict> {
  const refuse = p.gates.refuseGitControls;
  const gate = (passed: boolean | null, detail: string): Gate => ({
    name: "git_control_files",
    required: refuse,
    passed,
    detail,
  });
  if (!run.git || !t.git.startCommit || !t.git.commit || t.git.commit === t.git.startCommit) {
    if (t.git.controls.length > 0) recorder.note(t.id, { git: { controls: [] } });
    return { gates: refuse ? [gate(null, "not checked: no commit of its changes")] : [] };
  }
  const found = gitControlFiles(
    await ports.workspace.changedEntries(run.git.root, t.git.startCommit, t.git.commit),
  );
  recorder.note(t.id, { git: { controls: found } });
  if (found.length === 0) return { gates: refuse ? [gate(true, "none in its changes")] : [] };
  const named = describeGitControls(found);
  if (!refuse) return { gates: [gate(null, `named in the report, merged like any file: ${named}`)] };
  return {
    gates: [gate(false, `its changes add or change what steers git: ${named}`)],
    failure: `its changes add or change what steers git (success_criteria.git_control_files is "refuse"): ${named}`,
  };
}

async function testsCmdGate({
  run,
  ports,
  stop,
  t,
  p,
  agent,
  failures,
  found,
}: GateScope): Promise<Verdict | "detached"> {
  const testsCmd = p.gates.testsCmd;
  if (!testsCmd)
    return { gates: [{ name: "tests_cmd", required: false, passed: null, detail: "none given" }] };
  if (!run.settings.verify)
    return {
      gates: [{ name: "tests_cmd", required: true, passed: null, detail: "skipped (verify: false)" }],
    };
  if (failures.length > 0)
    return {
      gates: [{ name: "tests_cmd", required: true, passed: null, detail: "not run: an earlier gate failed" }],
    };
  const gate = await testsGate(run, ports, stop, {
    name: "tests_cmd",
    command: testsCmd,
    cwd: p.workspace.cwd,
    env: attemptEnv(agent, t.attempts),
    timeoutS: agent.timeoutS,
    logName: `tests-${t.id}`,
    taskId: t.id,
    attempt: t.attempts,
    ...(agent.sandbox ? { sandbox: { setting: agent.sandbox, work: agentWork(p, agent) } } : {}),
    onEnd: (ran) => {
      found.tests = ran;
    },
  });
  if (gate === "detached") return "detached";
  return { gates: [gate], ...(gate.passed ? {} : { failure: `tests_cmd failed (${gate.detail})` }) };
}

/**
 * Last: a reviewer judges a change that passed every other gate (review.ts). Its comments, or
 * why its verdict is not one, are what the next attempt is told.
 */
async function reviewGate({
  run,
  ports,
  stop,
  recorder,
  t,
  p,
  failures,
  found,
}: GateScope): Promise<Verdict | "detached"> {
  if (!p.review) return { gates: [] };
  const gate = (passed: boolean | null, detail: string): Verdict => ({
    gates: [{ name: "review", required: true, passed, detail }],
  });
  if (!run.settings.verify) return gate(null, "skipped (verify: false)");
  if (failures.length > 0) return gate(null, "not run: an earlier gate failed");
  const reviewed = await reviewAttempt({ run, ports, stop, recorder }, t, p, p.review);
  if (reviewed === "detached") return "detached";
  if (reviewed.failed === null) return { gates: [reviewed.gate] };
  if (reviewed.failed.found) found.review = reviewed.failed.found;
  return { gates: [reviewed.gate], end: { reason: reviewed.failed.reason, detail: reviewed.failed.detail } };
}

/**
 * Last of all: a person approves the result (its `approval` "result") once every other gate
 * passed. A rejection's reason is what the next attempt is told.
 */
async function approvalGate({
  run,
  ports,
  stop,
  recorder,
  t,
  p,
  failures,
  found,
}: GateScope): Promise<Verdict | "detached"> {
  if (p.approval?.at !== "result") return { gates: [] };
  const gate = (passed: boolean | null, detail: string): Gate => ({
    name: "approval",
    required: true,
    passed,
    detail,
  });
  if (failures.length > 0) return { gates: [gate(null, "not asked: an earlier gate failed")] };
  const wait = approvalWait(p.approval, t.attempts, ports.now(), t.waiting.approval);
  const end = await awaitDecision({ run, ports, stop }, t.id, wait, p.approval.onTimeout, (w) =>
    recorder.markWaitingApproval(t.id, w),
  );
  if (end === "detached") return "detached";
  const detail = decisionText(end, wait);
  if (end === "stopped") return { gates: [gate(null, detail)], end: { reason: "cancelled", detail } };
  if (end !== "timeout" && end.decision === "approve") return { gates: [gate(true, detail)] };
  found.rejection = {
    by: end === "timeout" ? "termorch" : end.by,
    reason: end === "timeout" ? detail : end.reason,
  };
  return { gates: [gate(false, detail)], end: { reason: "rejected", detail: `its result was ${detail}` } };
}
