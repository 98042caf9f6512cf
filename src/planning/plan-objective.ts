/**
 * `termorch plan`: a planner agent reads an objective and the repository, in a copy it cannot
 * change (as a reviewer does: src/task/review.ts runInCopy), and writes an assignments file with
 * a context file per task. termorch checks it exactly as `termorch validate` does; every problem
 * goes back to the planner in a feedback section, until the plan validates or the tries run out.
 * The workspace gets the plan only once it is valid, and nothing of one that is not.
 */
import { existsSync, mkdirSync, statSync } from "node:fs";
import { writeFile } from "node:fs/promises";
import { dirname, isAbsolute, join, posix, relative, resolve } from "node:path";
import pino, { type Logger } from "pino";
import { agentFor } from "../agent/command.js";
import { addUsage, type Usage } from "../contract/agent-result.js";
import { Assignments, type Budget } from "../contract/assignments.js";
import type { FeedbackBlock } from "../contract/feedback-block.js";
import { jsonSchemaOf } from "../contract/json-schema.js";
import type { PlanAnswer, PlanTry } from "../contract/plan.js";
import { RunState } from "../contract/state.js";
import { formatProblem, InputError, Interrupted, PlanFailed } from "../errors.js";
import { pidAlive } from "../fs/proc.js";
import { repoInfo, TERMORCH_IDENTITY } from "../git/repo.js";
import { agentRows, checkPlannerAgent } from "../input/agent-binaries.js";
import type { RunAgent, RunInput } from "../input/assignments-file.js";
import { loadConfig } from "../input/config-file.js";
import { readObjective } from "../input/objective-file.js";
import { openRun } from "../run/open-run.js";
import { runnerFor } from "../run/runner.js";
import { type Validated, validateAssignments } from "../run/validate.js";
import type { TaskRunner } from "../runner/task-runner.js";
import { budgetSpent, limits, spentOf, usdLeft } from "../spend/budget.js";
import { costKnown, priceOf } from "../spend/pricing.js";
import { feedbackSection } from "../task/feedback.js";
import { runInCopy } from "../task/review.js";
import { planRun } from "../task/run-plan.js";
import { runRedaction } from "../task/run-redaction.js";
import { PLANNER, planPlanner, REVIEW_FILES_DIR } from "../task/task-plan.js";
import {
  type Draft,
  draftFiles,
  type PlanPlace,
  planDirOf,
  publishPlan,
  readDraft,
  removeDeadStaging,
  removePlan,
  stagedOf,
  writePlan,
} from "./plan-files.js";
import { deadPlanners, planIdOf, plansDirOf, removeDeadCopies } from "./plan-leftovers.js";
import { plannerFieldProblems } from "./planner-fields.js";
import { PLAN_FILES, plannerPrompt } from "./planner-prompt.js";
import { testCommandsOf } from "./test-commands.js";

export const DEFAULT_MAX_TASKS = 8;
export const DEFAULT_PLAN_TRIES = 3;
const MAX_PLAN_TRIES = 10;
const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

export interface PlanOptions {
  objectiveFile: string;
  /** The planner: any preset or config agent; default: the config's defaults.planner. */
  agent?: string;
  /** The assignments file to write; default: assignments.json in the workspace. */
  out?: string;
  maxTasks?: number;
  tries?: number;
  /**
   * Variables of termorch's environment the planner gets (its API key), by name; the plan's
   * `environment.env_vars` lists them too, for its tasks' agents. Never a value: none is written.
   */
  envVars?: readonly string[];
  /** Replace an assignments file (and its plan folder) that is there already. */
  force?: boolean;
  configFile?: string;
  /** The repository the plan is for; default: cwd. */
  workspace?: string;
  /** Seconds one try of the planner may take; default: its agent's timeout. */
  timeoutS?: number;
  /** What its tries may spend, instead of its config entry's budget (null: none given): no try starts once it is spent. */
  budget?: Budget | null;
  env?: Readonly<Record<string, string | undefined>>;
  cwd?: string;
  logger?: Logger;
  /** Aborting ends the planner and leaves nothing in the workspace (exit 130). */
  signal?: AbortSignal;
  /** Each try's end: its problems (none: taken). */
  onTry?: (t: PlanTry) => void;
  /** Where planning sessions keep their prompts, logs and ledger; default: the per-user folder's plans/. */
  plansDir?: string;
  seams?: { runner?: TaskRunner };
}

/** Plans the objective's work: the validated assignments file written, and its plan. */
export async function planObjective(o: PlanOptions): Promise<PlanAnswer> {
  const startedAt = Date.now();
  const env = o.env ?? process.env;
  const cwd = o.cwd ?? process.cwd();
  const asked = await checkRequest(o, env, cwd);
  const session = await openSession(o, asked, { env, cwd, startedAt });
  const { side, sessionDir } = session;
  const { planner } = session.brief;
  const history: PlanTry[] = [];
  let feedback: string | null = null;
  let firstPrompt: number | undefined;
  try {
    const budget = asked.budget ?? undefined;
    for (let n = 1; n <= asked.tries; n++) {
      const spent = spentOf(history.map((h) => h.usage));
      const why = budgetSpent(budget, spent, "the planner's");
      if (why)
        throw notTaken(
          n === 1
            ? `${why} before its first try`
            : `${why}, and none of its ${n - 1} ${n === 2 ? "try" : "tries"} wrote a valid plan`,
          history,
          sessionDir,
        );
      const t = await oneTry(session, n, feedback, usdLeft(budget, spent));
      firstPrompt ??= t.promptBytes;
      history.push(t.record);
      await side.ports.ledger.append("plan.tried", { attempt: n, problems: t.record.problems });
      o.onTry?.(t.record);
      if (t.validated && t.draft) {
        const taken = await publish(session, t.draft, asked.final);
        return answerOf(taken, asked.final, t.draft, {
          planner,
          budget: asked.budget,
          history,
          startedAt,
          promptBytes: firstPrompt,
          logs: sessionDir,
        });
      }
      feedback = feedbackSection(feedbackOf(n, planner, t.record.problems), { runDir: sessionDir });
    }
  } finally {
    removePlan(session.staged);
    await side.ports.ledger.close();
  }
  const tries = asked.tries;
  throw notTaken(
    `the planner ${planner} wrote no valid plan in ${tries} ${tries === 1 ? "try" : "tries"}`,
    history,
    sessionDir,
  );
}

/** No plan taken (exit 1): why, what the last try got wrong, where the session is. */
function notTaken(why: string, history: readonly PlanTry[], sessionDir: string): PlanFailed {
  const last = history.at(-1);
  const wrong = last
    ? `; what its last try got wrong:\n${last.problems.map((p) => `- ${p}`).join("\n")}`
    : "";
  return new PlanFailed(
    `${why}${wrong}\nIts prompts, logs and ledger are in ${sessionDir}; nothing was written to the workspace.`,
  );
}

/** What a planning was asked for, checked before anything starts. */
interface Request {
  objectiveFile: string;
  objective: string;
  maxTasks: number;
  tries: number;
  envVars: string[];
  config: RunInput["config"];
  configFile: string | null;
  planner: RunAgent;
  /** What its tries may spend; null: no limit. */
  budget: Budget | null;
  workspace: string;
  repo: { root: string; head: string; ref: string | null };
  final: PlanPlace;
}

/** Every check of the request: each refusal exits 2, before anything is started or written. */
async function checkRequest(
  o: PlanOptions,
  env: Readonly<Record<string, string | undefined>>,
  cwd: string,
): Promise<Request> {
  const objectiveFile = resolve(cwd, o.objectiveFile);
  const objective = readObjective(objectiveFile);
  const maxTasks = o.maxTasks ?? DEFAULT_MAX_TASKS;
  const tries = o.tries ?? DEFAULT_PLAN_TRIES;
  if (tries > MAX_PLAN_TRIES)
    throw new InputError(
      [{ field: "--tries", message: `${tries} tries, over termorch's bound of ${MAX_PLAN_TRIES}` }],
      "A planner that needs more tries needs another objective or another agent.",
    );
  const envVars = [...new Set(o.envVars ?? [])];
  const badNames = envVars.filter((v) => !ENV_NAME.test(v));
  if (badNames.length)
    throw new InputError(
      badNames.map((v) => ({
        field: "--env",
        message: `"${v}" is not a variable's name (NAME, never NAME=VALUE: a value would be written into the plan)`,
      })),
      "Export the variable, and pass its name alone.",
    );
  const { config, file: configFile } = await loadConfig(o.configFile, env, cwd);
  const name = o.agent ?? config.defaults.planner;
  if (name === undefined)
    throw new InputError(
      [
        {
          field: "--agent",
          message: "no planner agent was named, and the config's defaults.planner names none",
        },
      ],
      `Pass --agent NAME (one of: ${installedAgents(config, env).join(", ") || "no agent's CLI is installed"}).`,
    );
  const planner: RunAgent | null = plannerOf(name, config);
  if (planner === null)
    throw new InputError(
      [
        {
          field: "--agent",
          message: `unknown agent "${name}": it is no preset, and the config defines no agent of that name`,
        },
      ],
      `Pass --agent NAME (one of: ${installedAgents(config, env).join(", ")}); termorch agents lists them.`,
    );
  const budget = plannerBudget(planner, o.budget, config);
  const workspace = resolve(cwd, o.workspace ?? ".");
  const repo = await repoInfo(workspace);
  if (!repo?.head)
    throw new InputError(
      [
        {
          file: workspace,
          message: repo ? "the repository has no commit yet" : "the workspace is not a git repository",
        },
      ],
      "termorch plan reads a repository's committed files: run it in one that has a commit.",
    );
  const final = placeOf(
    resolve(cwd, o.out ?? join(workspace, "assignments.json")),
    workspace,
    o.force ?? false,
  );
  const unset = envVars.filter((v) => env[v] === undefined);
  if (unset.length)
    throw new InputError(
      unset.map((v) => ({ field: "--env", message: `${v} is not set in this environment` })),
      "Export it first, or leave it out; nothing was started.",
    );
  return {
    objectiveFile,
    objective,
    maxTasks,
    tries,
    envVars,
    config,
    configFile,
    planner,
    budget,
    workspace,
    repo: { root: repo.root, head: repo.head, ref: repo.ref },
    final,
  };
}

/**
 * The planning's session, opened as a run of no task (its ledger, its runner, its stop following
 * the caller's signal) with its planner planned in a copy of the repository.
 */
async function openSession(
  o: PlanOptions,
  r: Request,
  at: { env: Readonly<Record<string, string | undefined>>; cwd: string; startedAt: number },
): Promise<Session> {
  const { env, cwd, startedAt } = at;
  const { config, repo, workspace, envVars } = r;
  const planId = planIdOf(startedAt, process.pid);
  const staged = stagedOf(r.final, planId);
  const plansDir = o.plansDir ?? (await plansDirOf());
  const sessionDir = join(plansDir, planId);
  const input = plannerInput({ ...r, planId });
  checkPlannerAgent(input, env, r.planner);
  const runner = runnerFor(env.TERMORCH_TMUX_SOCKET || config.tmux.socket || "termorch", input, o);
  // What an earlier planning killed before its end left: its planner still at work, its staging,
  // its copy of the repository.
  const dead = deadPlanners(await runner.openSessions());
  if (dead.length) await runner.close(dead);
  removeDeadStaging(r.final, (pid) => !pidAlive(pid));
  removeDeadCopies(plansDir);
  mkdirSync(join(sessionDir, "logs"), { recursive: true, mode: 0o700 });
  const redaction = runRedaction(input, env);
  const prefix = relative(repo.root, workspace);
  const place = {
    runId: planId,
    runDir: sessionDir,
    gitPrefix: prefix,
    processEnv: env,
    worktreesDir: join(sessionDir, "copy"),
  };
  const side = await openRun(
    planRun({
      input,
      git: { root: repo.root, baseCommit: repo.head, targetRef: repo.ref, prefix },
      baseDir: cwd,
      cwd,
      settings: RunState.shape.options.parse({
        max_parallel: 1,
        schedule: "eager",
        fail_fast: false,
        verify: true,
        sessions: "clean",
        keep_branches: false,
        allow_dirty: true,
      }),
      identity: TERMORCH_IDENTITY,
      env,
      redactSources: redaction.redactor.sources,
      startedAt,
      fault: null,
      resumed: false,
      ...place,
    }),
    {
      runner,
      log: o.logger ?? pino({ level: "silent" }),
      redaction,
      restored: null,
      ...(o.signal ? { signal: o.signal } : {}),
    },
  );
  const plan = planPlanner(input, place, r.planner, o.timeoutS);
  // termorch's folder at the workspace's place in its copy: where its sandbox lets it write.
  const planRel = posix.join(prefix, REVIEW_FILES_DIR, "plan");
  const testCommands = testCommandsOf(workspace);
  return {
    side,
    sessionDir,
    planId,
    plan,
    commit: repo.head,
    planRel,
    staged,
    force: o.force ?? false,
    check: { configFile: o.configFile, env, cwd, maxTasks: r.maxTasks, envVars },
    brief: {
      objective: r.objective,
      schema: JSON.stringify(jsonSchemaOf("assignments")),
      agents: installedAgents(config, env),
      planner: r.planner.name,
      maxTasks: r.maxTasks,
      planDir: join(plan.copy, planRel),
      testCommands,
    },
  };
}

/** What every try of one planning shares. */
interface Session {
  side: Awaited<ReturnType<typeof openRun>>;
  /** Its own name for its staging files and session folder. */
  planId: string;
  /** Its prompts, logs and ledger. */
  sessionDir: string;
  plan: ReturnType<typeof planPlanner>;
  commit: string;
  /** The plan folder, relative to the copy. */
  planRel: string;
  staged: PlanPlace;
  force: boolean;
  check: CheckOptions;
  brief: Omit<Parameters<typeof plannerPrompt>[0], "feedback">;
}

/** One try: the planner run in a fresh copy, what it wrote read and checked (staged, never published). */
async function oneTry(
  s: Session,
  n: number,
  feedback: string | null,
  /** USD its budget leaves it (a CLI with a cap of its own is given it); null: no bound. */
  left: number | null,
): Promise<{ record: PlanTry; draft: Draft | null; validated: Validated | null; promptBytes: number }> {
  const { side, plan } = s;
  const started = Date.now();
  const prompt = plannerPrompt({ ...s.brief, feedback });
  const done = await runInCopy(
    side,
    plan,
    {
      id: PLANNER,
      attempt: n,
      commit: s.commit,
      usdLeft: () => left,
      started: (facts) => side.ports.ledger.append("plan.planner_started", facts),
    },
    async () => {
      mkdirSync(join(plan.copy, s.planRel, PLAN_FILES.tasks), { recursive: true });
      mkdirSync(dirname(plan.promptFile), { recursive: true, mode: 0o700 });
      await writeFile(plan.promptFile, prompt, { mode: 0o600 });
      // Each try's kept: what the planner was told, feedback and all.
      await writeFile(join(dirname(plan.promptFile), `planner-${n}.md`), prompt, { mode: 0o600 });
    },
    () => readDraft(plan.copy, s.planRel),
  );
  if (side.stop.cancelled || done === "detached")
    throw new Interrupted("termorch plan was interrupted; nothing was written");
  let problems: string[];
  let usage: Usage | null = null;
  let draft: Draft | null = null;
  if (typeof done === "string") problems = [`the planner could not be prepared: ${done}`];
  else {
    usage = done.ran.usage;
    draft = done.found;
    problems = [
      ...(done.ran.how ? [`the planner ${done.ran.how} (${done.ran.logs})`] : []),
      ...(done.discarded.length
        ? [
            `you changed files of the repository, which a planner must not: ${done.discarded.join(", ")} (discarded); write only in ${s.brief.planDir}`,
          ]
        : []),
      ...draft.problems,
      ...(draft.assignments ? plannerFieldProblems(draft.assignments, s.brief.testCommands) : []),
      // Nothing a planner writes may carry a secret's value into the workspace.
      ...draftFiles(draft)
        .filter(([, bytes]) => {
          const text = bytes.toString("utf8");
          return side.ports.redactor.redact(text) !== text;
        })
        .map(([name]) => `${name} holds a secret's value or a credential; never write one into a plan`),
    ];
  }
  let validated: Validated | null = null;
  if (problems.length === 0 && draft) {
    const checked = await checkDraft(draft, s.staged, s.check);
    if (Array.isArray(checked)) problems = checked;
    else validated = checked;
  }
  if (validated === null) removePlan(s.staged);
  return {
    record: {
      try: n,
      problems: problems.map((p) => side.ports.redactor.redact(p)),
      usage,
      duration_ms: Date.now() - started,
    },
    draft,
    validated,
    promptBytes: Buffer.byteLength(prompt),
  };
}

/**
 * The staged plan under its final names, checked there once more (what the user gets); a plan
 * that stood there (`--force`) is put back if anything fails, or the run is interrupted first.
 */
async function publish(s: Session, draft: Draft, final: PlanPlace): Promise<Validated> {
  if (s.side.stop.cancelled) throw new Interrupted("termorch plan was interrupted; nothing was written");
  // What appeared there while it planned is the user's, not a plan to replace (without --force).
  if (!s.force) placeOf(final.file, final.workspace, false);
  const placed = publishPlan(draft, s.staged, final, s.check.envVars, s.planId);
  let taken: Validated | string[];
  try {
    taken = await checkDraft(null, final, s.check);
    if (s.side.stop.cancelled) throw new Interrupted("termorch plan was interrupted; nothing was written");
  } catch (error) {
    placed.undo();
    throw error;
  }
  if (Array.isArray(taken)) {
    placed.undo();
    throw new PlanFailed(`the plan validated in its staging folder but not in place:\n${taken.join("\n")}`);
  }
  placed.done();
  return taken;
}

/** The agents a task can name whose CLI is on PATH (a config's own command counts as there). */
function installedAgents(
  config: RunInput["config"],
  env: Readonly<Record<string, string | undefined>>,
): string[] {
  return agentRows(config, env.PATH)
    .filter((r) => r.on_path !== false)
    .map((r) => r.name);
}

/**
 * The planner's budget: the one asked for, else its config entry's; null: none. One in USD over
 * a CLI whose cost termorch cannot know (reported by none, priced by no `prices`) is refused, as
 * `validate` refuses it for a task (exit 2).
 */
function plannerBudget(
  planner: RunAgent,
  asked: Budget | null | undefined,
  config: RunInput["config"],
): Budget | null {
  // The one asked for replaces the entry's, as a task's own budget does.
  const budget = limits(asked) ? asked : planner.agent.budget;
  if (!limits(budget)) return null;
  const price = priceOf(config.prices, { name: planner.name, model: planner.agent.model });
  if (
    budget.max_cost_usd !== undefined &&
    !costKnown({ output: planner.agent.output, interactive: false }, price)
  )
    throw new InputError(
      [
        {
          field:
            asked?.max_cost_usd === undefined
              ? `agents.${planner.name}.budget.max_cost_usd`
              : "--max-cost-usd",
          message: `a budget in USD cannot be kept: the planner ${planner.name} reports no cost and the config's "prices" have none for it${planner.agent.model ? ` or its model "${planner.agent.model}"` : ""}`,
        },
      ],
      `Add "prices": {"${planner.name}": {"input": <USD per million>, "output": <USD per million>}} to the config, or give the budget in tokens (--max-tokens).`,
    );
  return budget;
}

function plannerOf(name: string, config: RunInput["config"]): RunAgent | null {
  const agent = agentFor({ agent: name }, config);
  return agent ? { name, agent, escalation: { index: 0, list: "review" } } : null;
}

/** Where the plan goes, refused (exit 2, nothing written) where it would overwrite or leave the workspace. */
function placeOf(file: string, workspace: string, force: boolean): PlanPlace {
  const place = { file, dir: planDirOf(file), workspace };
  const problems: string[] = [];
  if (!file.endsWith(".json")) problems.push(`the assignments file ${file} must end in .json`);
  const inWorkspace = relative(workspace, dirname(file));
  if (inWorkspace === ".." || inWorkspace.startsWith("../") || isAbsolute(inWorkspace))
    problems.push(
      `the assignments file ${file} is outside the workspace ${workspace}: its tasks' context files must be inside it`,
    );
  if (!statSync(dirname(file), { throwIfNoEntry: false })?.isDirectory())
    problems.push(`the folder ${dirname(file)} does not exist`);
  if (!force)
    for (const p of [place.file, place.dir]) if (existsSync(p)) problems.push(`${p} exists already`);
  if (problems.length)
    throw new InputError(
      problems.map((message) => ({ field: "--out", message })),
      "Pass another --out, or --force to replace a plan that is there; nothing was started.",
    );
  return place;
}

/**
 * The input of the planner's session: a run of no task, so that its planner runs through what
 * runs a reviewer (its copy, sandbox, session, logs and ledger).
 */
function plannerInput(p: {
  objectiveFile: string;
  configFile: string | null;
  planId: string;
  workspace: string;
  config: RunInput["config"];
  planner: RunAgent;
  envVars: readonly string[];
}): RunInput {
  const assignments = Assignments.parse({
    run_id: p.planId,
    tasks: [{ id: PLANNER, agent: p.planner.name, context_path: p.objectiveFile }],
    environment: { workspace_dir: p.workspace, env_vars: p.envVars },
  });
  return {
    file: p.objectiveFile,
    sha256: "",
    configFile: p.configFile,
    runId: p.planId,
    // The planner is no task of its session: it has none.
    assignments: { ...assignments, tasks: [] },
    workspace: p.workspace,
    tasks: [],
    config: p.config,
    mergeReviewer: null,
  };
}

interface CheckOptions {
  configFile: string | undefined;
  env: Readonly<Record<string, string | undefined>>;
  cwd: string;
  maxTasks: number;
  envVars: readonly string[];
}

/**
 * The draft staged at `at` (null: what is there already) checked as `termorch validate` checks
 * a file, and against --max-tasks: its plan, or its problems as the planner should read them
 * (paths in its own plan folder).
 */
async function checkDraft(
  draft: Draft | null,
  at: PlanPlace,
  c: CheckOptions,
): Promise<Validated | string[]> {
  if (draft) writePlan(draft, at, c.envVars);
  const theirs = (text: string): string =>
    text.split(`${at.dir}/`).join("").split(at.file).join(PLAN_FILES.assignments);
  let validated: Validated;
  try {
    validated = await validateAssignments({ file: at.file, config: c.configFile, env: c.env, cwd: c.cwd });
  } catch (error) {
    if (!(error instanceof InputError)) throw error;
    return error.problems.map((p) => theirs(formatProblem(p)));
  }
  const problems: string[] = [];
  const n = validated.input.tasks.length;
  if (n > c.maxTasks)
    problems.push(`${PLAN_FILES.assignments}: ${n} tasks, over the ${c.maxTasks} asked for (--max-tasks)`);
  // What a plan adds to a valid file: each task names the files it will own (what collisions are predicted from).
  validated.input.tasks.forEach((r, i) => {
    if (!r.task.allowed_paths?.length)
      problems.push(
        `${PLAN_FILES.assignments}, field tasks[${i}].allowed_paths, task ${r.task.id}: a planned task names the files it expects to own`,
      );
  });
  return problems.length ? problems : validated;
}

/** The feedback block of a try that was not taken: the failures-that-teach section's facts. */
function feedbackOf(n: number, agent: string, problems: string[]): FeedbackBlock {
  return {
    schema_version: 1,
    task: PLANNER,
    attempt: n,
    agent,
    reason: "validation",
    detail: `termorch found ${problems.length} ${problems.length === 1 ? "problem" : "problems"} in the plan it wrote`,
    failed_gates: [{ name: "validate", detail: problems[0] ?? null }],
    tests: null,
    missing_artifacts: [],
    handoff: null,
    outside_allowed_paths: [],
    timeout_s: null,
    agent_error: null,
    screen: null,
    secrets: [],
    decision: null,
    review: null,
    rejection: null,
    plan_problems: problems,
    summary: null,
    changed_files: [],
    next_starts_from: "base",
  };
}

function answerOf(
  v: Validated,
  at: ReturnType<typeof stagedOf>,
  draft: Draft,
  p: {
    planner: string;
    budget: Budget | null;
    history: PlanTry[];
    startedAt: number;
    promptBytes: number;
    logs: string;
  },
): PlanAnswer {
  const usages = p.history.map((t) => t.usage).filter((u): u is Usage => u !== null);
  return {
    valid: true,
    file: at.file,
    plan_dir: at.dir,
    run_id: v.input.runId,
    tasks: v.input.tasks.map((r) => ({
      id: r.task.id,
      agent: r.task.agent,
      dependencies: r.task.dependencies,
      allowed_paths: r.task.allowed_paths ?? [],
      context_path: r.task.context_path,
    })),
    waves: v.waves,
    critical_path: v.criticalPath,
    collisions: v.collisions,
    tests_cmd: v.input.assignments.success_criteria?.tests_cmd ?? null,
    milestones: draft.milestones ? join(at.dir, PLAN_FILES.milestones) : null,
    decisions: draft.decisions ? join(at.dir, PLAN_FILES.decisions) : null,
    planner: {
      agent: p.planner,
      tries: p.history,
      usage: usages.length ? addUsage(usages) : null,
      budget: p.budget,
      duration_ms: Date.now() - p.startedAt,
      prompt_bytes: p.promptBytes,
      logs: p.logs,
    },
  };
}
