/**
 * The review gate (success_criteria.review): once an attempt passed its other gates, a reviewer
 * agent reads the task, its change, its handoff and its gates in a copy of the work it cannot
 * change (src/git/review-copy.ts; read-only in its sandbox, one of its own where none is
 * configured and the machine can make it), and writes a verdict.
 * What it changes anyway is discarded with the copy and named. Its usage is the task's.
 */
import { lstatSync, mkdirSync, readFileSync, realpathSync, rmSync } from "node:fs";
import { writeFile } from "node:fs/promises";
import { dirname, join, posix, relative } from "node:path";
import { addUsage, type Usage } from "../contract/agent-result.js";
import type { Gate } from "../contract/report.js";
import { type ReviewComment, type ReviewRecord, ReviewVerdict } from "../contract/review.js";
import { errorText } from "../errors.js";
import { endRecordedCgroup } from "../fs/cgroup.js";
import { executableOnPath } from "../fs/executable.js";
import { matchesAny } from "../fs/find-files.js";
import { sessionPrefix } from "../fs/names.js";
import { Refused, readInside, writeFresh } from "../fs/no-follow.js";
import { cgroupRecordOf } from "../fs/private-dir.js";
import { changeText, makeReviewCopy, reviewCopyChanges } from "../git/review-copy.js";
import type { ExitRecord, RunningAttempt } from "../runner/task-runner.js";
import { sandboxTools } from "../sandbox/probe.js";
import { cappedArgv } from "../spend/budget.js";
import { agentOutcome } from "./agent-output.js";
import { type AttemptSide, attemptEnv, runnerBounds } from "./attempt.js";
import { amendedLast } from "./attempt-history.js";
import { classifyExit } from "./outcome.js";
import { reviewPrompt } from "./review-prompt.js";
import { endSandbox, sandboxFor } from "./sandbox.js";
import { outOfBudget, usdLeftFor } from "./spend.js";
import {
  type AgentPlan,
  INTEGRATION_REVIEW,
  REVIEW_FILES_DIR,
  type ReviewPlan,
  type TaskPlan,
  VERDICT_IN_COPY,
} from "./task-plan.js";
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

/** What every reviewer's session of a run starts with: `_` starts no task id, so it is never a task's. */
export function reviewSessionPrefix(runId: string): string {
  return `${sessionPrefix(runId)}_review-`;
}

/** The session a reviewer runs in. */
export function reviewSession(runId: string, id: string): string {
  return `${reviewSessionPrefix(runId)}${id}`;
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
  const reviewed = await reviewChange(a, review, {
    id: t.id,
    attempt: t.attempts,
    from: t.git.startCommit,
    to: t.git.commit,
    heading: `Review of task ${t.id}, attempt ${t.attempts}`,
    intro: `Agent ${t.history.at(-1)?.agent ?? t.agent} did the task below, and its change passed termorch's mechanical checks.`,
    context: () => readFileSync(p.prompt.context).subarray(0, CONTEXT_BYTES).toString("utf8"),
    handoff: p.gates.handoff ? { root: p.workspace.artifactsDir, rel: "handoff.md" } : null,
    gates: t.result.gates,
    keep: { root: p.workspace.artifactsDir, rel: `attempt-${t.attempts}/review.json` },
    usdLeft: () => usdLeftFor(run, recorder, p),
  });
  if (reviewed === "detached") return "detached";
  if (typeof reviewed === "string") return failed(reviewed, null);
  const record = recordOf(reviewer.name, reviewed);
  recorder.spent(t.id, {
    result: { usage: reviewed.usage ? addUsage([t.result.usage, reviewed.usage]) : t.result.usage },
    history: amendedLast(t.history, { review: record }),
  });
  await ports.ledger.append("task.reviewed", { attempt: t.attempts, ...ledgerFacts(record) }, t.id);
  const judged = judge(reviewer.name, reviewed);
  return {
    gate: { name: "review", required: true, passed: judged.approved, detail: judged.detail },
    failed: judged.approved ? null : { reason: "review", detail: judged.detail, found: judged.found },
  };
}

/** A review's record, as an attempt's (and the merge's) report keeps it. */
export function recordOf(agent: string, r: Reviewed): ReviewRecord {
  return {
    agent,
    verdict: r.verdict?.verdict ?? "invalid",
    comments: r.verdict?.comments.length ?? 0,
    file: r.file,
    discarded: r.discarded,
    usage: r.usage,
  };
}

/** What the ledger's `task.reviewed` and `run.reviewed` say of it. */
export function ledgerFacts(record: ReviewRecord): Omit<ReviewRecord, "usage"> {
  const { usage: _, ...facts } = record;
  return facts;
}

/** A verdict in a line (a gate's detail), and what the work's next attempt is told. */
export function judge(
  reviewer: string,
  r: Reviewed,
): { approved: boolean; detail: string; found: ReviewFound } {
  const named = r.discarded.length
    ? `; what it changed in its copy was discarded: ${r.discarded.join(", ")}`
    : "";
  const verdict = r.verdict;
  if (verdict === null)
    return {
      approved: false,
      detail: `its reviewer ${reviewer} wrote no valid verdict: ${r.problems.join("; ")}${named}`,
      found: { reviewer, verdict: null, summary: null, comments: [], problems: r.problems },
    };
  const summary = verdict.summary?.trim() || null;
  const found: ReviewFound = {
    reviewer,
    verdict: "request_changes",
    summary,
    comments: verdict.comments,
    problems: [],
  };
  if (verdict.verdict === "approve")
    return {
      approved: true,
      detail: `approved by ${reviewer}${summary ? `: ${clip(summary)}` : ""}${named}`,
      found,
    };
  const first = verdict.comments[0]!;
  const where = first.file ? `${first.file}${first.line ? `:${first.line}` : ""}: ` : "";
  const n = verdict.comments.length;
  return {
    approved: false,
    detail: `its reviewer ${reviewer} requested changes (${n} comment${n === 1 ? "" : "s"}): ${where}${clip(first.body)}${named}`,
    found,
  };
}

const clip = (text: string, n = 300): string => (text.length > n ? `${text.slice(0, n)}…` : text);

/** The change a reviewer judges, and what it is told of it. */
export interface ReviewSubject {
  /** Whose change: a task's id, or the run's (`integration`): its session and private folders. */
  id: string;
  attempt: number;
  from: string;
  to: string;
  heading: string;
  intro: string;
  /** What was asked (read only when the review runs). */
  context: () => string;
  /** Where its handoff is kept; null: none asked. */
  handoff: { root: string; rel: string } | null;
  gates: readonly Gate[];
  /** Where its verdict is kept: `rel` below `root`, in the run directory. */
  keep: { root: string; rel: string };
  /** What the budgets leave a CLI with a cap of its own, in USD (null: no bound). */
  usdLeft: () => number | null;
}

/** What a reviewer came to. */
export interface Reviewed {
  /** null: none, or one that does not validate (`problems` say why). */
  verdict: ReviewVerdict | null;
  problems: string[];
  /** The kept verdict, relative to the run directory; null: none written. */
  file: string | null;
  /** What it changed in its copy (discarded). */
  discarded: string[];
  usage: Usage | null;
}

/**
 * A review of `s.from..s.to`: the copy made, the prompt written, the reviewer run to its end,
 * its verdict read and kept, what it changed named, the copy removed. A string: it could not be
 * prepared (why); "detached": the run detached meanwhile.
 */
export async function reviewChange(
  a: Pick<AttemptSide, "run" | "ports" | "stop">,
  review: ReviewPlan,
  s: ReviewSubject,
): Promise<Reviewed | string | "detached"> {
  const { run, ports } = a;
  const done = await runInCopy(
    a,
    review,
    {
      id: s.id,
      attempt: s.attempt,
      commit: s.to,
      usdLeft: s.usdLeft,
      started: (facts) =>
        s.id === INTEGRATION_REVIEW
          ? ports.ledger.append("run.review_started", facts)
          : ports.ledger.append("task.review_started", facts, s.id),
    },
    () => writeBrief(a, review, s),
    () => readVerdict(ports, review, s.keep),
  );
  if (done === "detached") return done;
  if (typeof done === "string") return `its review could not be prepared: ${done}`;
  const { ran, discarded, found: read } = done;
  const problems =
    ran.how !== null && read.verdict === null
      ? [`its reviewer ${ran.how} (${ran.logs})`, ...read.problems]
      : read.problems;
  return {
    verdict: read.verdict,
    problems,
    file: read.file && relative(run.runDir, join(s.keep.root, s.keep.rel)),
    discarded,
    usage: ran.usage,
  };
}

/** An agent run in a copy of the repository (a reviewer, the planner): who, which commit, its bound. */
export interface CopyRun {
  /** Its session and private folders' name. */
  id: string;
  attempt: number;
  /** The commit its copy is checked out at. */
  commit: string;
  /** What the budgets leave a CLI with a cap of its own, in USD (null: no bound). */
  usdLeft: () => number | null;
  /** Records its launch (the ledger's event of its kind). */
  started: (facts: StartedFacts) => Promise<unknown>;
}

/** What the ledger says of its launch. */
export type StartedFacts = {
  attempt: number;
  agent: string;
  session: string;
  logs: { stdout: string; stderr: string };
  sandboxed: boolean;
};

/** How an agent run in a copy ended, what it changed there (discarded), and what `collect` read of it. */
export interface CopyRan<T> {
  ran: Ran;
  discarded: string[];
  found: T;
}

/**
 * Runs `plan.agent` in a copy of the repository at `c.commit` (src/git/review-copy.ts), read-only
 * where it can be boxed: the copy made afresh, `brief` written, the agent run to its end,
 * `collect` read from the copy, what it changed there named, the copy removed. A string: why it
 * could not be prepared (redacted); "detached": the run detached meanwhile.
 */
export async function runInCopy<T>(
  a: Pick<AttemptSide, "run" | "ports" | "stop">,
  plan: ReviewPlan,
  c: CopyRun,
  brief: () => Promise<void>,
  collect: () => T,
): Promise<CopyRan<T> | string | "detached"> {
  const { run, ports } = a;
  try {
    await makeReviewCopy(run.git!.root, plan.copy, c.commit, REVIEW_FILES_DIR);
    await brief();
  } catch (error) {
    removeCopy(plan.copy);
    return ports.redactor.redact(errorText(error));
  }
  let ran: Ran | "detached";
  try {
    ran = await runReviewer(a, plan, c);
  } finally {
    await ports.runner.close([reviewSession(run.runId, c.id)]);
  }
  if (ran === "detached") {
    removeCopy(plan.copy);
    return "detached";
  }
  // termorch's folder at the copy's root (a verdict), and at the workspace's place in it (a plan).
  const ownFiles = [
    ...new Set([`${REVIEW_FILES_DIR}/`, posix.join(relative(plan.copy, plan.cwd), REVIEW_FILES_DIR, "/")]),
  ];
  const discarded = await reviewCopyChanges(
    plan.copy,
    c.commit,
    (path) => ownFiles.some((own) => path.startsWith(own)) || matchesAny(path, plan.agent.scratch),
  ).catch((error: unknown) => [`(could not be checked: ${ports.redactor.redact(errorText(error))})`]);
  try {
    return { ran, discarded, found: collect() };
  } finally {
    removeCopy(plan.copy);
  }
}

/** The reviewer's prompt, written (private) where its CLI is given it. */
async function writeBrief(
  a: Pick<AttemptSide, "run" | "ports">,
  review: ReviewPlan,
  s: ReviewSubject,
): Promise<void> {
  const { run, ports } = a;
  const redact = (text: string): string => ports.redactor.redact(text);
  const diff = await changeText(run.git!.root, s.from, s.to, PATCH_BYTES);
  let handoff: string | null = null;
  if (s.handoff)
    try {
      handoff = redact(readInside(s.handoff.root, s.handoff.rel, HANDOFF_BYTES).toString("utf8"));
    } catch {
      handoff = "(its handoff could not be read)";
    }
  const text = reviewPrompt({
    heading: s.heading,
    intro: s.intro,
    context: redact(s.context()),
    change: { from: s.from, to: s.to, stat: redact(diff.stat), patch: redact(diff.patch), cut: diff.cut },
    handoff,
    gates: s.gates,
    verdict: review.verdict,
    instructions: review.instructions,
  });
  mkdirSync(dirname(review.promptFile), { recursive: true, mode: 0o700 });
  await writeFile(review.promptFile, text, { mode: 0o600 });
}

/** How the reviewer's run ended: in words when not with exit 0 (null), its logs, its usage. */
export interface Ran {
  how: string | null;
  logs: string;
  usage: Usage | null;
}

/** Launches the reviewer in its copy, and waits for its end (its timeout, the run's stop, a detach). */
async function runReviewer(
  a: Pick<AttemptSide, "run" | "ports" | "stop">,
  review: ReviewPlan,
  s: CopyRun,
): Promise<Ran | "detached"> {
  const { run, ports, stop } = a;
  // Its own sandbox where none is configured, when this machine can make one.
  const agent =
    review.boxed && typeof sandboxTools(run.processEnv.PATH) !== "string" ? review.boxed : review.agent;
  const session = reviewSession(run.runId, s.id);
  const stem = ports.logNames.next(`review-${agent.name}`, ports.now());
  const logs = { stdout: `logs/${stem}.out`, stderr: `logs/${stem}.err` };
  const logsText = `output in ${logs.stdout} and ${logs.stderr}`;
  const attemptDir = join(run.privateDir, "reviews", s.id, String(s.attempt));
  const box = join(run.privateDir, "sandbox", "reviews", s.id, String(s.attempt));
  // Kept when the run ends (as an attempt's is), so that clean finds what a killed supervisor left.
  const cgroupRecord = cgroupRecordOf(run.privateDir, `${s.id}.review`, s.attempt);
  // What a dead driver's review left is not this one's: its session, its processes, its files.
  await ports.runner.close([session]);
  await endRecordedCgroup(cgroupRecord, run.killGraceMs);
  rmSync(attemptDir, { recursive: true, force: true });
  mkdirSync(join(attemptDir, ".."), { recursive: true, mode: 0o700 });
  // Its CLI writes it afresh (copilot's usage): an earlier review's is not counted again.
  rmSync(agent.usageFile, { force: true });
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
            chdir: review.cwd,
            readOnly: true,
            home: agent.env.HOME ?? "/",
            writable: {
              folders: [...new Set([review.copy, review.cwd].map((d) => join(d, REVIEW_FILES_DIR)))],
              files: [],
            },
            // Its CLI as its PATH finds it, wherever that is (a folder under /tmp, which the sandbox replaces).
            readable: [review.promptFile, ...cliPlaces(agent)],
          },
          box,
        )
      : undefined;
    running = await ports.runner.launch({
      runId: run.runId,
      taskId: s.id,
      attempt: s.attempt,
      session,
      argv: [...(agent.budgetCap ? cappedArgv(agent.argv, agent.budgetCap, s.usdLeft()) : agent.argv)],
      env: attemptEnv(agent, s.attempt),
      cwd: review.cwd,
      tty: agent.tty,
      ...(agent.delivery === "stdin" && !agent.tty ? { stdin: review.promptFile } : {}),
      stdoutLog: join(run.runDir, logs.stdout),
      stderrLog: join(run.runDir, logs.stderr),
      attemptDir,
      ...runnerBounds(run, agent),
      ...(wrap ? { wrap } : {}),
      cgroupRecord,
    });
  } catch (error) {
    return {
      how: `could not start: ${ports.redactor.redact(errorText(error))}`,
      logs: logsText,
      usage: null,
    };
  }
  await s.started({
    attempt: s.attempt,
    agent: agent.name,
    session,
    logs,
    sandboxed: agent.sandbox !== null,
  });
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
  // What it left running in its cgroup (a supervisor killed meanwhile) is ended with it.
  await endRecordedCgroup(cgroupRecord, run.killGraceMs);
  if (agent.sandbox) await endSandbox(box, { worktree: null, branch: null });
  if (stop.detaching) return "detached";
  const outcome = classifyExit(record, { timeoutS: timedOut ? (review.timeoutS ?? null) : null, stopped });
  const usage = agent.output
    ? agentOutcome(
        run.runDir,
        ports.redactor,
        { result: { logs }, current: { startedAt } },
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

/**
 * Where its CLI is, wherever that is (a folder under /tmp is the sandbox's own and shows nothing
 * of the machine's): its command line's absolute paths, its PATH's folders, and the package its
 * program is in (an npm-installed CLI's whole node_modules, where its dependencies are).
 */
function cliPlaces(agent: Pick<AgentPlan, "argv" | "env">): string[] {
  const places = [
    ...agent.argv.filter((x) => x.startsWith("/")),
    ...(agent.env.PATH ?? "").split(":").filter((d) => d.startsWith("/")),
  ];
  const program = agent.argv[0] ?? "";
  const found = program.startsWith("/") ? program : executableOnPath(program, agent.env.PATH);
  if (found) {
    let real: string;
    try {
      real = realpathSync(found);
    } catch {
      return places;
    }
    const at = real.lastIndexOf("/node_modules/");
    places.push(at >= 0 ? real.slice(0, at + "/node_modules".length) : dirname(real));
  }
  return places;
}

/** Removes a review's copy; what cannot be removed (a reviewer made it unwritable) is left to `clean`. */
function removeCopy(copy: string): void {
  try {
    rmSync(copy, { recursive: true, force: true });
  } catch {
    // Under the run's worktrees folder, which `termorch clean` removes.
  }
}

/** The verdict it wrote, validated, and kept (redacted) at `keep`. */
function readVerdict(
  ports: Pick<AttemptSide["ports"], "redactor" | "log">,
  review: ReviewPlan,
  keep: { root: string; rel: string },
): { verdict: ReviewVerdict | null; problems: string[]; file: string | null } {
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
        : `its verdict could not be read: ${errorText(error)}`;
    return { verdict: null, problems: [why], file: null };
  }
  let file: string | null = keep.rel;
  try {
    mkdirSync(keep.root, { recursive: true, mode: 0o700 });
    // Its folder may hold what the task's agent left (a link, a file): termorch's folder is made there.
    const folder = join(keep.root, dirname(keep.rel));
    if (lstatSync(folder, { throwIfNoEntry: false })?.isDirectory() === false)
      rmSync(folder, { force: true });
    writeFresh(keep.root, keep.rel, text);
  } catch (error) {
    ports.log.warn(
      { file: join(keep.root, keep.rel), err: errorText(error) },
      "could not keep the review's verdict",
    );
    file = null;
  }
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
