/**
 * The review gate (success_criteria.review): once an attempt passed its other gates, a reviewer
 * agent reads the task, its change, its handoff and its gates in a copy of the work it cannot
 * change (src/git/review-copy.ts; read-only in its sandbox when it has one), and writes a verdict.
 * What it changes anyway is discarded with the copy and named. Its usage is the task's.
 */
import { mkdirSync, readFileSync, rmSync } from "node:fs";
import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import { addUsage, type Usage } from "../contract/agent-result.js";
import type { Gate } from "../contract/report.js";
import { type ReviewComment, type ReviewRecord, ReviewVerdict } from "../contract/review.js";
import { errorText } from "../errors.js";
import { matchesAny } from "../fs/find-files.js";
import { sessionPrefix } from "../fs/names.js";
import { Refused, readInside, writeFresh } from "../fs/no-follow.js";
import { changeText, makeReviewCopy, reviewCopyChanges } from "../git/review-copy.js";
import type { ExitRecord, RunningAttempt } from "../runner/task-runner.js";
import { cappedArgv } from "../spend/budget.js";
import { agentOutcome } from "./agent-output.js";
import { type AttemptSide, attemptEnv } from "./attempt.js";
import { amendedLast } from "./attempt-history.js";
import { classifyExit } from "./outcome.js";
import { reviewPrompt } from "./review-prompt.js";
import { endSandbox, sandboxFor } from "./sandbox.js";
import { outOfBudget, usdLeftFor } from "./spend.js";
import { REVIEW_FILES_DIR, type ReviewPlan, type TaskPlan, VERDICT_IN_COPY } from "./task-plan.js";
import type { TaskRun } from "./task-run.js";

/** At most this much of the change is quoted in the prompt (the reviewer can run git diff for the rest). */
const PATCH_BYTES = 200 * 1024;
const CONTEXT_BYTES = 256 * 1024;
const HANDOFF_BYTES = 64 * 1024;
const VERDICT_BYTES = 1024 * 1024;

/** What a review found, for the next attempt's feedback section. */
export interface ReviewFound {
  reviewer: string;
  /** null: it wrote no valid verdict (`problems` say why). */
  verdict: "request_changes" | null;
  summary: string | null;
  comments: ReviewComment[];
  problems: string[];
}

/** A review's end: its gate, and why it failed the attempt (none: approved). */
export interface ReviewEnd {
  gate: Gate;
  failed: { reason: "review" | "budget"; detail: string; found: ReviewFound | null } | null;
}

/** The session a task's reviewer runs in: `_` starts no task id, so it is never a task's. */
export function reviewSession(runId: string, taskId: string): string {
  return `${sessionPrefix(runId)}_review-${taskId}`;
}

/** Runs the attempt's review to its verdict; "detached" when the run detached meanwhile (a resume reviews again). */
export async function reviewAttempt(
  a: AttemptSide,
  t: Readonly<TaskRun>,
  p: TaskPlan,
  review: ReviewPlan,
): Promise<ReviewEnd | "detached"> {
  const { run, ports, recorder } = a;
  const reviewer = review.agent;
  const failed = (
    detail: string,
    found: ReviewFound | null,
    reason: "review" | "budget" = "review",
  ): ReviewEnd => ({
    gate: { name: "review", required: true, passed: false, detail },
    failed: { reason, detail, found },
  });
  if (!run.git || !t.git.startCommit || !t.git.commit)
    return failed("a review needs a git repository, and the workspace is none", null);
  const spent = outOfBudget(run, recorder, p);
  if (spent !== null) return failed(`${spent}; its review could not run`, null, "budget");
  const { startCommit: from, commit: to } = t.git;
  try {
    await makeReviewCopy(run.git.root, review.copy, to, REVIEW_FILES_DIR);
    mkdirSync(join(review.copy, REVIEW_FILES_DIR), { recursive: true, mode: 0o700 });
    await writeBrief(a, t, p, review, { from, to });
  } catch (error) {
    rmSync(review.copy, { recursive: true, force: true });
    return failed(`its review could not be prepared: ${ports.redactor.redact(errorText(error))}`, null);
  }
  let ran: Ran | "detached";
  try {
    ran = await runReviewer(a, t, review);
  } finally {
    await ports.runner.close([reviewSession(run.runId, t.id)]);
  }
  if (ran === "detached") {
    rmSync(review.copy, { recursive: true, force: true });
    return "detached";
  }
  const discarded = await reviewCopyChanges(
    review.copy,
    to,
    (path) => path.startsWith(`${REVIEW_FILES_DIR}/`) || matchesAny(path, reviewer.scratch),
  ).catch((error: unknown) => [`(could not be checked: ${ports.redactor.redact(errorText(error))})`]);
  const read = readVerdict(a, t, p, review);
  rmSync(review.copy, { recursive: true, force: true });
  const problems = [...read.problems];
  if (ran.how !== null && read.verdict === null) problems.unshift(`its reviewer ${ran.how} (${ran.logs})`);
  const verdict = read.verdict;
  const record: ReviewRecord = {
    agent: reviewer.name,
    verdict: verdict?.verdict ?? "invalid",
    comments: verdict?.comments.length ?? 0,
    file: read.file,
    discarded,
    usage: ran.usage,
  };
  recorder.spent(t.id, {
    result: { usage: ran.usage ? addUsage([t.result.usage, ran.usage]) : t.result.usage },
    history: amendedLast(t.history, { review: record }),
  });
  await ports.ledger.append(
    "task.reviewed",
    {
      attempt: t.attempts,
      agent: reviewer.name,
      verdict: record.verdict,
      comments: record.comments,
      file: record.file,
      discarded,
    },
    t.id,
  );
  const named = discarded.length
    ? `; what it changed in its copy was discarded: ${discarded.join(", ")}`
    : "";
  if (verdict === null)
    return failed(`its reviewer ${reviewer.name} wrote no valid verdict: ${problems.join("; ")}${named}`, {
      reviewer: reviewer.name,
      verdict: null,
      summary: null,
      comments: [],
      problems,
    });
  const summary = verdict.summary?.trim() || null;
  if (verdict.verdict === "approve")
    return {
      gate: {
        name: "review",
        required: true,
        passed: true,
        detail: `approved by ${reviewer.name}${summary ? `: ${clip(summary)}` : ""}${named}`,
      },
      failed: null,
    };
  const first = verdict.comments[0]!;
  const where = first.file ? `${first.file}${first.line ? `:${first.line}` : ""}: ` : "";
  return failed(
    `its reviewer ${reviewer.name} requested changes (${verdict.comments.length} comment${verdict.comments.length === 1 ? "" : "s"}): ${where}${clip(first.body)}${named}`,
    {
      reviewer: reviewer.name,
      verdict: "request_changes",
      summary,
      comments: verdict.comments,
      problems: [],
    },
  );
}

const clip = (text: string, n = 300): string => (text.length > n ? `${text.slice(0, n)}…` : text);

/** The reviewer's prompt, written (private) where its CLI is given it. */
async function writeBrief(
  a: AttemptSide,
  t: Readonly<TaskRun>,
  p: TaskPlan,
  review: ReviewPlan,
  change: { from: string; to: string },
): Promise<void> {
  const { run, ports } = a;
  const redact = (text: string): string => ports.redactor.redact(text);
  const diff = await changeText(run.git!.root, change.from, change.to, PATCH_BYTES);
  let handoff: string | null = null;
  if (p.gates.handoff)
    try {
      handoff = redact(readInside(p.workspace.artifactsDir, "handoff.md", HANDOFF_BYTES).toString("utf8"));
    } catch {
      handoff = "(its handoff could not be read)";
    }
  const context = readFileSync(p.prompt.context).subarray(0, CONTEXT_BYTES).toString("utf8");
  const text = reviewPrompt({
    taskId: t.id,
    attempt: t.attempts,
    author: t.history.at(-1)?.agent ?? t.agent,
    context: redact(context),
    change: { ...change, stat: redact(diff.stat), patch: redact(diff.patch), cut: diff.cut },
    handoff,
    gates: t.result.gates,
    verdict: review.verdict,
    instructions: review.instructions,
  });
  mkdirSync(join(review.promptFile, ".."), { recursive: true, mode: 0o700 });
  await writeFile(review.promptFile, text, { mode: 0o600 });
}

/** How the reviewer's run ended: in words when not with exit 0 (null), its logs, its usage. */
interface Ran {
  how: string | null;
  logs: string;
  usage: Usage | null;
}

/** Launches the reviewer in its copy, and waits for its end (its timeout, the run's stop, a detach). */
async function runReviewer(
  a: AttemptSide,
  t: Readonly<TaskRun>,
  review: ReviewPlan,
): Promise<Ran | "detached"> {
  const { run, ports, stop, recorder } = a;
  const agent = review.agent;
  const session = reviewSession(run.runId, t.id);
  const stem = ports.logNames.next(`review-${agent.name}`, ports.now());
  const logs = { stdout: `logs/${stem}.out`, stderr: `logs/${stem}.err` };
  const logsText = `output in ${logs.stdout} and ${logs.stderr}`;
  const attemptDir = join(run.privateDir, "reviews", t.id, String(t.attempts));
  const box = join(run.privateDir, "sandbox", "reviews", t.id, String(t.attempts));
  // What a dead driver's review left is not this one's.
  await ports.runner.close([session]);
  rmSync(attemptDir, { recursive: true, force: true });
  mkdirSync(join(attemptDir, ".."), { recursive: true, mode: 0o700 });
  const startedAt = ports.now();
  let running: RunningAttempt;
  try {
    const wrap = agent.sandbox
      ? await sandboxFor(
          run,
          ports,
          agent.sandbox,
          {
            worktree: null,
            branch: null,
            cwd: review.copy,
            readOnly: true,
            home: agent.env.HOME ?? "/",
            writable: { folders: [join(review.copy, REVIEW_FILES_DIR)], files: [] },
            readable: [review.promptFile, ...agent.argv.filter((x) => x.startsWith("/"))],
          },
          box,
        )
      : undefined;
    const p = run.plans.get(t.id)!;
    running = await ports.runner.launch({
      runId: run.runId,
      taskId: t.id,
      attempt: t.attempts,
      session,
      argv: [
        ...(agent.budgetCap
          ? cappedArgv(agent.argv, agent.budgetCap, usdLeftFor(run, recorder, p))
          : agent.argv),
      ],
      env: attemptEnv(agent, t.attempts),
      cwd: review.cwd,
      tty: agent.tty,
      ...(agent.delivery === "stdin" && !agent.tty ? { stdin: review.promptFile } : {}),
      stdoutLog: join(run.runDir, logs.stdout),
      stderrLog: join(run.runDir, logs.stderr),
      attemptDir,
      redact: [...run.redactSources],
      maxLogBytes: run.maxLogBytes,
      ...(agent.memoryMb ? { memoryMb: agent.memoryMb } : {}),
      ...(wrap ? { wrap } : {}),
      killGraceMs: run.killGraceMs,
      ...(run.processEnv.TERMORCH_CGROUP === "off" ? { cgroup: false } : {}),
    });
  } catch (error) {
    return {
      how: `could not start: ${ports.redactor.redact(errorText(error))}`,
      logs: logsText,
      usage: null,
    };
  }
  await ports.ledger.append(
    "task.review_started",
    { attempt: t.attempts, agent: agent.name, session, logs },
    t.id,
  );
  let timedOut = false;
  let stopped = false;
  const timer =
    review.timeoutS === undefined
      ? null
      : setTimeout(() => {
          timedOut = true;
          void running.stop(run.killGraceMs);
        }, review.timeoutS * 1000);
  let unsubscribe = (): void => {};
  // A detach ends the review too: the resumed run reviews the attempt again.
  const ending = new Promise<void>((resolve) => {
    unsubscribe = stop.onChange(() => {
      if (stop.ending || stop.detaching) {
        stopped = true;
        resolve();
      }
    });
  });
  const record: ExitRecord = await Promise.race([
    running.exited,
    ending.then(() => running.stop(run.killGraceMs)),
  ]);
  if (timer) clearTimeout(timer);
  unsubscribe();
  if (agent.sandbox) await endSandbox(box, { worktree: null, branch: null });
  if (stop.detaching) return "detached";
  const outcome = classifyExit(record, { timeoutS: timedOut ? (review.timeoutS ?? null) : null, stopped });
  const usage = agent.output
    ? agentOutcome(
        run.runDir,
        ports.redactor,
        { ...t, result: { ...t.result, logs }, current: { ...t.current, startedAt } },
        agent,
        review.cwd,
        agent.output,
        { record, ...outcome },
        ports.now(),
      ).account.usage
    : null;
  const how =
    outcome.reason === null
      ? null
      : `ended: ${outcome.reason}${outcome.detail ? ` (${outcome.detail})` : ""}`;
  return { how, logs: logsText, usage };
}

/** The verdict it wrote, validated, and kept (redacted) as artifacts/<task>/attempt-<n>/review.json. */
function readVerdict(
  a: AttemptSide,
  t: Readonly<TaskRun>,
  p: TaskPlan,
  review: ReviewPlan,
): { verdict: ReviewVerdict | null; problems: string[]; file: string | null } {
  const { ports } = a;
  let text: string;
  try {
    const bytes = readInside(review.copy, VERDICT_IN_COPY, VERDICT_BYTES + 1);
    if (bytes.length > VERDICT_BYTES)
      return { verdict: null, problems: [`its verdict is over ${VERDICT_BYTES} bytes`], file: null };
    text = ports.redactor.redact(bytes.toString("utf8"));
  } catch (error) {
    const why =
      error instanceof Refused && error.why === "missing"
        ? "it wrote no verdict ($TERMORCH_VERDICT)"
        : `its verdict could not be read: ${error instanceof Error ? error.message : String(error)}`;
    return { verdict: null, problems: [why], file: null };
  }
  const rel = `attempt-${t.attempts}/review.json`;
  writeFresh(p.workspace.artifactsDir, rel, text);
  const file = join("artifacts", t.id, rel);
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (error) {
    return { verdict: null, problems: [`its verdict is not JSON: ${errorText(error)}`], file };
  }
  const parsed = ReviewVerdict.safeParse(json);
  if (!parsed.success)
    return {
      verdict: null,
      problems: parsed.error.issues.map((i) => `${i.path.length ? `${i.path.join(".")}: ` : ""}${i.message}`),
      file,
    };
  return { verdict: parsed.data, problems: [], file };
}
