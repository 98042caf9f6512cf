import { join, posix } from "node:path";
import { type ResolvedAgent, reviewerSandbox, substitute, taskSandbox } from "../agent/command.js";
import { agentEnvironment } from "../agent/environment.js";
import type { KnownDialog, SessionStore } from "../agent/presets.js";
import type { OutputFormat } from "../agent/results.js";
import type { StateEventFormat } from "../agent/state-events.js";
import { type ApprovalAsked, taskApproval } from "../contract/approval.js";
import { type Budget, OnRateLimit, Task } from "../contract/assignments.js";
import type { Config, Price } from "../contract/config.js";
import { DEFAULT_RETRY_FROM, type RetryFrom } from "../contract/retry-from.js";
import { type ReviewAsked, reviewAsked } from "../contract/review.js";
import { runWorktreesDir, taskBranch } from "../fs/names.js";
import type { ResolvedTask, RunAgent, RunInput } from "../input/assignments-file.js";
import type { SandboxSetting } from "../sandbox/policy.js";
import { priceOf } from "../spend/pricing.js";
import { DECISION_IN_WORKTREE, decisionPath } from "./decision.js";

/**
 * Everything one task needs to run, resolved once from the validated input when the run is
 * built: executing a task reads its plan, never the assignments or the config again. Grouped by
 * concern, so that a feature adds to one group; what depends on which agent runs is an AgentPlan.
 */
export interface TaskPlan {
  id: string;
  dependencies: readonly string[];
  /** Attempts in all (retries + 1). */
  attempts: number;
  /** Its own budget (its `budget`, else its agent entry's), besides the run's; undefined: none. */
  budget: Budget | undefined;
  prompt: PromptPlan;
  workspace: WorkspacePlan;
  setup: SetupPlan;
  gates: GatesPlan;
  /**
   * The agents its attempts run, in order: its own agent, then its escalation list; the last one
   * runs every further attempt.
   */
  agents: readonly [AgentPlan, ...AgentPlan[]];
  /**
   * The agents that run an attempt in place of one whose agent is rate limited (its
   * `rate_limit.fallback`), in order; their attempts' agentIndex counts on after `agents`.
   */
  fallbacks: readonly AgentPlan[];
  /**
   * What a rate limit one of its agents' CLIs gave up on does: the task's `rate_limit`, else its
   * own agent entry's, else the config's default; one policy for all its agents, as its fallback
   * list is one.
   */
  rateLimit: OnRateLimit;
  /** Its review (`success_criteria.review`); null: none. */
  review: ReviewPlan | null;
  /** A person's approval it waits for (its `approval`): before it starts, or of its result; null: none. */
  approval: ApprovalAsked | null;
}

/**
 * A task's review: its reviewer agent, planned to run in the copy of the task's work it reads
 * (src/git/review-copy.ts), with a prompt of its own, headless whatever the task is.
 */
export interface ReviewPlan {
  /** As its settings say: sandboxed when its task's sandbox is configured. */
  agent: AgentPlan;
  /**
   * Where no sandbox is configured (nor turned off): the same in a sandbox of its own, its copy
   * read-only (agent/command.ts reviewerSandbox); run when the machine can make one, else `agent`.
   */
  boxed: AgentPlan | null;
  /** The copy's folder (made afresh for each review), and the reviewer's cwd in it. */
  copy: string;
  cwd: string;
  /** Private, written before each review. */
  promptFile: string;
  /** $TERMORCH_VERDICT: in the copy, where every CLI's edit mode lets its agent write. */
  verdict: string;
  /** Its own timeout, else its agent's. */
  timeoutS: number | undefined;
  instructions: string | null;
}

/** termorch's folder in a reviewer's copy of the work: never counted as the reviewer's edit. */
export const REVIEW_FILES_DIR = ".termorch";
/** Where a verdict is written, in the reviewer's copy of the work. */
export const VERDICT_IN_COPY = `${REVIEW_FILES_DIR}/verdict.json`;

/**
 * Its prompt: the context file followed by what its dependencies did, written to `file` before
 * each attempt and delivered as its agent takes it (AgentPlan.delivery).
 */
export interface PromptPlan {
  file: string;
  context: string;
  /** The task's conflict_file, appended after the dependency section; null: none. */
  conflictFile: string | null;
}

/** Where it works. */
export interface WorkspacePlan {
  /** Where the agent runs: its worktree (at the workspace's place in it), or the workspace itself. */
  cwd: string;
  /** Its worktree and branch; null when the workspace is not a git repository. */
  worktree: string | null;
  branch: string | null;
  /** Its `start_commit`: what it starts from instead of the run's base; null: the base. */
  startCommit: string | null;
  artifactsDir: string;
  /** `worktree_include`, workspace-relative (gates look through them) and repository-relative (git). */
  include: readonly string[];
  includeInRepo: readonly string[];
  /** `worktree_copy`, repository-relative: copied into the worktree (not linked). */
  copyInRepo: readonly string[];
  /** What git leaves alone in the worktree (repository-relative): include links and copies are never committed and survive a retry's reset. */
  keepInRepo: readonly string[];
}

/** Its set-up before each attempt. */
export interface SetupPlan {
  /** The task's `setup_cmd`, else the environment's; null: none. */
  cmd: string | null;
  /** `environment.setup_timeout_s`; undefined: the attempt's agent's timeout. */
  timeoutS: number | undefined;
}

/** What its gates check (beyond the agent's own `expect_changes`, AgentPlan.expectChanges). */
export interface GatesPlan {
  /**
   * Where its ALTO handoff is pre-created for the agent to fill (`success_criteria.handoff`),
   * `$TERMORCH_HANDOFF`; its gate keeps it as `artifacts/<id>/handoff.md`. null: none asked.
   */
  handoff: string | null;
  /** Empty: none required. */
  requiredArtifacts: readonly string[];
  /** null: no restriction. */
  allowedPaths: readonly string[] | null;
  testsCmd: string | null;
  /** Whether files of its changes that steer git fail it (`success_criteria.git_control_files`). */
  refuseGitControls: boolean;
}

/** One agent of the task, as an attempt runs it. */
export interface AgentPlan {
  /** The agent's name, as the assignment gave it (log names, commit messages). */
  name: string;
  /** The argv it runs, placeholders substituted (also what a dry run reports). */
  argv: string[];
  /** How it gets the prompt: on standard input, as `{prompt_file}`, pasted, or not at all (it reads `{context_path}` itself). */
  delivery: "stdin" | "file" | "none" | "paste";
  /** `"interactive": true`: how its screen is watched and when it is ended (src/run/interactive.ts); null otherwise. */
  interactive: InteractivePlan | null;
  /** Which of its stdout termorch parses into the report (a preset's JSON); null: none. */
  output: OutputFormat | null;
  /** `{usage_file}`: where its CLI may write its usage, read with its output (private, 0700 folder). */
  usageFile: string;
  /** Where its CLI keeps its sessions, read for what its output does not say; null: none. */
  sessions: SessionStore | null;
  /** Globs (repository-relative) of files its CLI writes for itself: never committed. */
  scratch: readonly string[];
  tty: boolean;
  /** The agent's whole environment but TERMORCH_ATTEMPT, which each attempt adds (built when first read). */
  env: Readonly<Record<string, string>>;
  /** Seconds, by precedence: the task's, its agent's, the assignment's resource limit, the config's default. */
  timeoutS: number | undefined;
  /** Where a retry after its attempt starts: the task's `retry_from`, else this agent entry's, else the config's default. */
  retryFrom: RetryFrom;

  /** Address-space limit per agent process, in MiB. */
  memoryMb: number | undefined;
  /** Its sandbox (docs/guides/sandbox.md); null: off. */
  sandbox: SandboxSetting | null;
  /** An attempt that exits 0 having changed nothing and produced none of its required artifacts fails (no_changes). */
  expectChanges: boolean;
  /** What its tokens cost (the config's `prices`), for a CLI that reports no cost; null: unknown. */
  price: Price | null;
  /** Its CLI's own cap on an attempt's USD, given what is left of the budgets at launch; null: none. */
  budgetCap: { flag: string; at: number } | null;
}

/**
 * The agent of the attempt that runs with `agentIndex` (TaskRun.agentIndex): its own agent and
 * escalation list, then its fallbacks; past the end of both (a config changed before a resume),
 * the last of its escalation list.
 */
export function agentOf(p: Pick<TaskPlan, "agents" | "fallbacks">, agentIndex: number): AgentPlan {
  if (agentIndex < p.agents.length) return p.agents[agentIndex] ?? p.agents[0];
  return p.fallbacks[agentIndex - p.agents.length] ?? p.agents.at(-1) ?? p.agents[0];
}

/** An interactive task: the agent owns the pane's terminal and its prompt is pasted in. */
export interface InteractivePlan {
  /** Seconds of an unchanged screen before it counts as waiting for input. */
  waitingAfterS: number;
  /** The preset's screen patterns (regex sources), or null. */
  waiting: string | null;
  busy: string | null;
  /** Its pasted prompt sits in its input box unsent: Enter again (InteractiveForm.pasteHeld). */
  pasteHeld: string | null;
  /** Questions its CLI asks, recognised on the screen. */
  dialogs: readonly KnownDialog[];
  /**
   * Its CLI's state events: their format and the file they are appended to, and the configuration
   * folder of the task's own (written before each attempt) through which the CLI sends them; null:
   * screen only.
   */
  events: {
    format: StateEventFormat;
    file: string;
    configDir: { path: string; files: Readonly<Record<string, string>> } | null;
  } | null;
  /** Absolute path whose appearance ends the agent as done; null: none declared. */
  doneWhen: string | null;
}

/** Where the run's tasks work (see taskCwd). */
export interface PlanPlace {
  runId: string;
  runDir: string;
  /** The workspace's folder inside the repository ("" at its root), or null when the workspace is not a repository. */
  gitPrefix: string | null;
  processEnv: Readonly<Record<string, string | undefined>>;
  /** Folder of the run's task worktrees; default: the per-user one (a scale-out worker keeps its own). */
  worktreesDir?: string;
}

/** Where a task's handoff is, in its worktree (at the workspace's place in it). */
export const HANDOFF_IN_WORKTREE = ".termorch/handoff.md";

/**
 * The handoff as a folder termorch made and a path below it that the agent could replace: read
 * and written there through no link (src/fs/no-follow.ts).
 */
export function handoffPlace(w: Pick<WorkspacePlan, "worktree" | "cwd" | "artifactsDir">): {
  root: string;
  rel: string;
} {
  return w.worktree === null
    ? { root: w.artifactsDir, rel: "handoff.md" }
    : { root: w.cwd, rel: HANDOFF_IN_WORKTREE };
}

/** Resolves every task's plan; pure (names and paths only, nothing is touched). */
export function planTasks(input: RunInput, place: PlanPlace): Map<string, TaskPlan> {
  // Once for the run (it reads TMPDIR), not once per task.
  const here = { ...place, worktreesDir: place.worktreesDir ?? runWorktreesDir(place.runId) };
  return new Map(input.tasks.map((r) => [r.task.id, planTask(input, r, here)]));
}

function planTask(input: RunInput, r: ResolvedTask, place: PlanPlace & { worktreesDir: string }): TaskPlan {
  const { task } = r;
  const { environment } = input.assignments;
  const worktree = place.gitPrefix === null ? null : join(place.worktreesDir, task.id);
  const cwd = worktree === null ? input.workspace : join(worktree, place.gitPrefix ?? "");
  const artifactsDir = join(place.runDir, "artifacts", task.id);
  const include = environment.worktree_include;
  const prefix = place.gitPrefix;
  // Private (0700): the agent's prompt is its context file and may hold what the user would redact.
  const promptFile = join(place.runDir, ".termorch", place.runId, "prompts", `${task.id}.md`);
  const inRepo = (paths: readonly string[]): string[] =>
    prefix ? paths.map((p) => posix.join(prefix, p)) : [...paths];
  // In the worktree, where every CLI's edit mode lets its agent write (claude and codex refuse
  // paths outside it); never committed. A workspace that is no repository keeps it in the artifacts.
  const wantsHandoff = task.success_criteria?.handoff ?? input.assignments.success_criteria.handoff ?? false;
  const handoff = !wantsHandoff
    ? null
    : worktree === null
      ? join(artifactsDir, "handoff.md")
      : join(cwd, HANDOFF_IN_WORKTREE);
  const workspace: WorkspacePlan = {
    cwd,
    worktree,
    branch: worktree === null ? null : taskBranch(place.runId, task.id),
    startCommit: task.start_commit ?? null,
    artifactsDir,
    include,
    includeInRepo: inRepo(include),
    copyInRepo: inRepo(environment.worktree_copy),
    keepInRepo: inRepo([...include, ...environment.worktree_copy]),
  };
  const shared: AgentPlace = {
    ...place,
    input,
    r,
    workspace,
    promptFile,
    handoff,
    inRepo,
  };
  const escalation = r.agents
    .slice(1)
    .filter((a) => a.escalation === null || a.escalation.list === "task" || a.escalation.list === "agent");
  const reviewer = r.agents.find((a) => a.escalation?.list === "review");
  const fallbacks = r.agents.filter((a) => a.escalation?.list === "fallback");
  return {
    id: task.id,
    dependencies: task.dependencies,
    attempts: task.retries + 1,
    budget: task.budget ?? r.agents[0].agent.budget,
    prompt: { file: promptFile, context: r.contextPath, conflictFile: r.conflictFile },
    workspace,
    setup: {
      cmd: task.setup_cmd ?? environment.setup_cmd ?? null,
      timeoutS: environment.setup_timeout_s,
    },
    gates: {
      handoff,
      requiredArtifacts: task.success_criteria?.required_artifacts ?? [],
      allowedPaths: task.allowed_paths ?? null,
      testsCmd: task.success_criteria?.tests_cmd || null,
      refuseGitControls:
        (task.success_criteria?.git_control_files ?? input.assignments.success_criteria.git_control_files) ===
        "refuse",
    },
    agents: [planAgent(shared, r.agents[0], 0), ...escalation.map((a, i) => planAgent(shared, a, i + 1))],
    fallbacks: fallbacks.map((a, j) => planAgent(shared, a, escalation.length + 1 + j)),
    rateLimit:
      task.rate_limit ??
      r.agents[0].agent.rate_limit ??
      input.config.defaults.rate_limit ??
      OnRateLimit.parse({}),
    approval: taskApproval(task.approval),
    review: reviewer
      ? planReview(
          shared,
          reviewer,
          place,
          reviewAsked(
            task.success_criteria?.review,
            input.assignments.success_criteria.review,
            input.config.defaults.review,
          ),
        )
      : null,
  };
}

/**
 * The reviewer of the run's integration (`merge.review`), planned as a task's reviewer is: of a
 * task of its own, `integration` (a reserved id, so no task's), whose prompt is the review's.
 */
export function planMergeReview(input: RunInput, place: PlanPlace): ReviewPlan | null {
  const reviewer = input.mergeReviewer;
  if (!reviewer) return null;
  return planInCopy(
    input,
    place,
    INTEGRATION_REVIEW,
    reviewer,
    reviewAsked(input.assignments.mode.merge?.review, input.config.merge?.review),
  );
}

/**
 * The planner of `termorch plan` (src/planning/): run as a reviewer is, in a copy of the
 * repository it cannot change, read-only in a sandbox of its own where none is configured.
 */
export function planPlanner(
  input: RunInput,
  place: PlanPlace,
  planner: RunAgent,
  timeoutS: number | undefined,
): ReviewPlan {
  return planInCopy(input, place, PLANNER, planner, { agent: planner.name, timeout_s: timeoutS });
}

/** An agent of the run's own (no task's), `id` its task's, run in a copy of the work as a reviewer is. */
function planInCopy(
  input: RunInput,
  place: PlanPlace,
  id: string,
  agent: RunAgent,
  asked: ReviewAsked | null,
): ReviewPlan {
  const here = { ...place, worktreesDir: place.worktreesDir ?? runWorktreesDir(place.runId) };
  const promptFile = reviewPromptFile(place, id);
  // The schema refuses a reserved id in a file; this task is termorch's own.
  const task: Task = {
    ...Task.parse({ id: "run", agent: agent.name, context_path: promptFile }),
    id,
  };
  const r: ResolvedTask = { task, agents: [agent], contextPath: promptFile, conflictFile: null };
  const workspace: WorkspacePlan = {
    cwd: input.workspace,
    worktree: null,
    branch: null,
    startCommit: null,
    artifactsDir: join(place.runDir, "artifacts", id),
    include: [],
    includeInRepo: [],
    copyInRepo: [],
    keepInRepo: [],
  };
  const at: AgentPlace = {
    ...here,
    input,
    r,
    workspace,
    promptFile,
    handoff: null,
    inRepo: (paths) => [...paths],
  };
  return planReview(at, agent, here, asked);
}

/** The id the planner of `termorch plan` goes by: its session, copy and prompt. */
export const PLANNER = "planner";

/** The id a review of the run's integration goes by: its session, folders, artifacts. */
export const INTEGRATION_REVIEW = "integration";

const reviewPromptFile = (place: Pick<PlanPlace, "runDir" | "runId">, id: string): string =>
  join(place.runDir, ".termorch", place.runId, "prompts", `${id}.review.md`);

/**
 * The reviewer, as planAgent plans an attempt's agent but in the copy of the work, with its own
 * prompt and no handoff, headless (a review is read, not watched).
 */
function planReview(
  at: AgentPlace,
  reviewer: RunAgent,
  place: PlanPlace & { worktreesDir: string },
  asked: ReviewAsked | null,
): ReviewPlan {
  const { r, workspace } = at;
  // "." is in no task id: the copy is never a task's worktree.
  const copy = join(place.worktreesDir, `${r.task.id}.review`);
  const cwd = join(copy, place.gitPrefix ?? "");
  const promptFile = reviewPromptFile(place, r.task.id);
  const verdict = join(copy, VERDICT_IN_COPY);
  const task = { ...r.task, interactive: false };
  const inCopy: AgentPlace = {
    ...at,
    r: { ...r, task },
    // Its own folder for what its CLI writes beside its verdict: the task's artifacts are the task's.
    workspace: {
      ...workspace,
      cwd,
      worktree: copy,
      branch: null,
      artifactsDir: join(copy, REVIEW_FILES_DIR),
    },
    promptFile,
    handoff: null,
    verdict,
  };
  const agent = planAgent(inCopy, reviewer, "review");
  // Where no sandbox is configured, one the reviewer runs in when the machine can make it.
  const configured = taskSandbox(at.input.config, reviewer.agent, task);
  const own = configured === null ? reviewerSandbox(at.input.config, reviewer.agent, task) : null;
  return {
    agent,
    boxed: own === null ? null : planAgent({ ...inCopy, sandbox: own }, reviewer, "review"),
    copy,
    cwd,
    promptFile,
    verdict,
    timeoutS: asked?.timeout_s ?? agent.timeoutS,
    instructions: asked?.instructions ?? null,
  };
}

/** What planning one of a task's agents reads, the same for each of them. */
interface AgentPlace extends PlanPlace {
  input: RunInput;
  r: ResolvedTask;
  workspace: WorkspacePlan;
  promptFile: string;
  handoff: string | null;
  /** A reviewer's $TERMORCH_VERDICT. */
  verdict?: string;
  /** Its sandbox, in place of the one its task's and agent's settings make (undefined: theirs). */
  sandbox?: SandboxSetting | null;
  /** Workspace-relative paths as repository-relative ones. */
  inRepo: (paths: readonly string[]) => string[];
}

/** The task's `index`th agent (0: its own), as its attempts run it; or its reviewer. */
function planAgent(at: AgentPlace, { name, agent }: RunAgent, index: number | "review"): AgentPlan {
  const { input, r, workspace, promptFile, handoff } = at;
  const { task } = r;
  const { cwd, worktree, artifactsDir } = workspace;
  const { environment } = input.assignments;
  const timeoutS = timeoutOf(input, { task, agent });
  const usageFile = join(
    at.runDir,
    ".termorch",
    at.runId,
    "usage",
    index === "review" ? `${task.id}.review.json` : `${task.id}.json`,
  );
  // Private too: what the agent's hooks record may quote its prompt.
  const eventsFile = join(at.runDir, ".termorch", at.runId, "events", `${task.id}.jsonl`);
  // Built when first read (at launch): a dry run or a plan of thousands of tasks needs none of it.
  const buildEnv = (): Record<string, string> =>
    agentEnvironment({
      processEnv: at.processEnv,
      envVars: environment.env_vars,
      agentEnv: task.interactive ? { ...agent.interactive.env, ...agent.env } : agent.env,
      taskEnv: task.env,
      termorch: {
        TERMORCH_RUN_ID: at.runId,
        TERMORCH_RUN_DIR: at.runDir,
        TERMORCH_TASK_ID: task.id,
        TERMORCH_CONTEXT_PATH: r.contextPath,
        TERMORCH_WORKSPACE: cwd,
        TERMORCH_ARTIFACTS_DIR: artifactsDir,
        TERMORCH_PROMPT_FILE: promptFile,
        ...(task.interactive && agent.interactive.events ? { TERMORCH_AGENT_EVENTS: eventsFile } : {}),
        ...(handoff ? { TERMORCH_HANDOFF: handoff } : {}),
        TERMORCH_DECISION: decisionPath(workspace),
        ...(at.verdict ? { TERMORCH_VERDICT: at.verdict } : {}),
      },
      config: input.config,
    }).env;
  // The task's own configuration folder for its CLI, holding termorch's plugin (opencode's, pi's)
  // and named for this invocation; a folder the agent's environment names already is the
  // user's, and stays theirs: then the screen decides. Each of its agents has its own (no
  // plugin of one CLI is left in another's); "." is in no task id.
  const agentConfig = join(
    at.runDir,
    ".termorch",
    at.runId,
    "agent-config",
    index === 0 ? task.id : `${task.id}.${index}`,
  );
  const via = task.interactive ? agent.interactive.eventsConfig : null;
  let env: Record<string, string> | null = via?.env ? buildEnv() : null;
  const configDir =
    via === null || (via.env !== null && env?.[via.env] !== undefined)
      ? null
      : { path: agentConfig, files: via.files };
  if (via?.env && env && configDir !== null) env[via.env] = configDir.path;
  const sandbox = at.sandbox !== undefined ? at.sandbox : taskSandbox(input.config, agent, task);
  const interactive: InteractivePlan | null = task.interactive
    ? {
        waitingAfterS: task.waiting_after_s ?? input.config.defaults.waiting_after_s,
        waiting: agent.interactive.waiting,
        busy: agent.interactive.busy,
        pasteHeld: agent.interactive.pasteHeld,
        dialogs: agent.interactive.dialogs,
        events:
          agent.interactive.events === null || (via !== null && configDir === null)
            ? null
            : { format: agent.interactive.events, file: eventsFile, configDir },
        doneWhen: task.done_when === undefined ? null : join(cwd, task.done_when),
      }
    : null;
  return {
    name,
    argv: substitute(
      interactive
        ? sandbox
          ? agent.interactive.sandboxedCommand
          : agent.interactive.command
        : sandbox
          ? agent.sandboxedCommand
          : agent.command,
      {
        task_id: task.id,
        context_path: r.contextPath,
        workspace: cwd,
        artifacts_dir: artifactsDir,
        run_id: at.runId,
        prompt_file: promptFile,
        usage_file: usageFile,
        agent_config: agentConfig,
      },
    ),
    delivery: interactive ? "paste" : agent.prompt,
    interactive,
    // A terminal transcript is not the CLI's JSON.
    output: interactive ? null : agent.output,
    usageFile,
    sessions: agent.sessions,
    scratch: at.inRepo(
      worktree === null
        ? agent.scratch
        : [...agent.scratch, DECISION_IN_WORKTREE, ...(handoff ? [HANDOFF_IN_WORKTREE] : [])],
    ),
    // An interactive agent is a terminal program: it gets the pane's terminal whatever its config says.
    tty: agent.tty || interactive !== null,
    get env() {
      env ??= buildEnv();
      return env;
    },
    timeoutS,
    retryFrom: task.retry_from ?? agent.retry_from ?? input.config.defaults.retry_from ?? DEFAULT_RETRY_FROM,

    memoryMb: environment.resource_limits.memory_mb || undefined,
    sandbox,
    expectChanges: task.expect_changes ?? agent.expect_changes ?? true,
    price: priceOf(input.config.prices, { name, model: agent.model }),
    // The headless command line's: an interactive form has no such flag.
    budgetCap: interactive === null ? agent.budgetCap : null,
  };
}

/** A task's timeout; the run's own (for the run-level gates) when no task is given. */
export function timeoutOf(
  input: { assignments: RunInput["assignments"]; config: Config },
  r?: { task: Pick<Task, "timeout_s">; agent: Pick<ResolvedAgent, "timeout_s"> },
): number | undefined {
  return (
    r?.task.timeout_s ??
    r?.agent.timeout_s ??
    input.assignments.environment.resource_limits.timeout_s ??
    input.config.defaults.timeout_s
  );
}
