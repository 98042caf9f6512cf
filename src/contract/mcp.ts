import { z } from "zod";
import { RUN_ID_PATTERN, TASK_ID_PATTERN } from "./assignments.js";
import { BudgetStanding } from "./budget.js";
import { PredictedCollision } from "./collision.js";
import { KeyAnswer } from "./keys.js";
import { RedoStep } from "./merge-policy.js";
import { PlanAnswer } from "./plan.js";
import { Reason, TaskState } from "./reason.js";
import { SendAnswer } from "./send.js";

/**
 * The tools of `termorch mcp` (docs/guides/mcp.md): each one's input and
 * output. The descriptions are what a model reads to choose a tool and fill in its arguments.
 */

/** The most a `wait` or `cancel` blocks: below the 60 s after which MCP clients give up on a call. */
export const MAX_BLOCK_S = 50;

const RunRef = z.string().min(1).describe("A run id (as `run` answered it) or the path of its run directory");
const TaskId = z.string().regex(TASK_ID_PATTERN).describe("A task's id, as in the assignments");

/** Where an assignments document comes from: inline, or a file. */
const Source = {
  assignments: z
    .record(z.string(), z.unknown())
    .optional()
    .describe(
      "The assignments document itself (the JSON Schema is the resource termorch://schema/assignments). Give this or `path`",
    ),
  path: z
    .string()
    .min(1)
    .optional()
    .describe("Path of an assignments.json file (relative paths: from `cwd`). Give this or `assignments`"),
  cwd: z
    .string()
    .min(1)
    .optional()
    .describe(
      "Folder that relative paths are taken from, and that an inline document's `environment.workspace_dir` is relative to; default: the folder termorch mcp was started in",
    ),
  config: z
    .string()
    .min(1)
    .optional()
    .describe(
      "termorch config file (agents, redaction, defaults); default: the usual lookup from `cwd` ($TERMORCH_CONFIG, ./config/termorch.json, ~/.config/termorch/config.json)",
    ),
};

/** One problem of the input, located: the list `termorch validate` prints. */
export const McpProblem = z.strictObject({
  file: z.string().optional(),
  field: z.string().optional(),
  task: z.string().optional(),
  message: z.string(),
});

export const ValidateInput = z.strictObject(Source);
export type ValidateInput = z.infer<typeof ValidateInput>;

export const ValidateOutput = z.strictObject({
  valid: z.boolean(),
  /** Empty when valid. */
  problems: z.array(McpProblem),
  /** What to do about them. */
  hint: z.string().nullable(),
  run_id: z.string().nullable().describe("The run id a run of it would ask for"),
  workspace: z.string().nullable(),
  waves: z.array(z.array(z.string())).describe("Tasks that can run at once, wave by wave"),
  critical_path: z.array(z.string()),
  collisions: z
    .array(PredictedCollision)
    .default([])
    .describe(
      'Tasks that may run at once and change the same files (mode.collisions "warn"; "error" makes them problems)',
    ),
  tasks: z.array(
    z.strictObject({
      id: z.string(),
      agent: z.string().describe("The agent's name (a preset, a config entry) or `command`"),
      source: z.enum(["preset", "config", "task"]),
      argv: z.array(z.string()).describe("What the task runs, placeholders unsubstituted"),
      escalation: z
        .array(z.strictObject({ agent: z.string(), argv: z.array(z.string()) }))
        .describe(
          "The agents of its escalation list in order, each with what it runs: attempt 2 runs the first, and the last one every further attempt; empty when it has none",
        ),
      interactive: z.boolean(),
      dependencies: z.array(z.string()),
    }),
  ),
});
export type ValidateOutput = z.infer<typeof ValidateOutput>;

/** The options of `termorch run` a caller may set. */
export const RunOptions = {
  out: z
    .string()
    .min(1)
    .optional()
    .describe(
      "Run directory; default: the assignments file's folder, or `.termorch/runs/<run_id>/` there inside a git work tree. An inline document's: `.termorch/runs/<run_id>/` of `cwd` inside a git work tree, else the folder termorch keeps the document in",
    ),
  verify: z.boolean().optional().describe("false: skip artifact and test gates (core gates still apply)"),
  max_parallel: z.number().int().positive().optional().describe("Tasks running at once"),
  schedule: z
    .enum(["eager", "waves"])
    .optional()
    .describe("eager (default): start as soon as dependencies succeed; waves: wave barriers"),
  fail_fast: z.boolean().optional().describe("Stop launching and cancel running tasks at the first failure"),
  keep_sessions: z.boolean().optional().describe("Keep every tmux session after the report"),
  clean: z.boolean().optional().describe("Close every tmux session after the report, failed ones too"),
  keep_branches: z.boolean().optional().describe("Keep task branches and worktrees after a successful merge"),
  allow_dirty: z.boolean().optional().describe("Run even if tracked files have uncommitted changes"),
  backend: z
    .enum(["local", "bullmq"])
    .optional()
    .describe("local (this host's tmux, default) or bullmq (workers on any host, through Redis)"),
  redis: z.string().min(1).optional().describe("Redis URL of the bullmq backend"),
};

export const RunInput = z.strictObject({ ...Source, ...RunOptions });
export type RunInput = z.infer<typeof RunInput>;

export const RunOutput = z.strictObject({
  run_id: z.string(),
  run_dir: z.string(),
  owner: z
    .enum(["driver", "daemon"])
    .describe(
      "driver: a detached `termorch run` process of its own; daemon: the daemon of termorch mcp's --home. Either way the run goes on if this MCP server ends",
    ),
  pid: z.number().int().nullable().describe("The driver's process id; null for a daemon's run"),
  tasks: z.number().int().min(0),
  next: z.string().describe("What to call next"),
});
export type RunOutput = z.infer<typeof RunOutput>;

export const PlanInput = z.strictObject({
  objective: z
    .string()
    .min(1)
    .optional()
    .describe("What you want done, in words (Markdown): the objective itself. Give this or `objective_path`"),
  objective_path: z
    .string()
    .min(1)
    .optional()
    .describe("Path of a file holding the objective (relative paths: from `cwd`). Give this or `objective`"),
  agent: z
    .string()
    .min(1)
    .optional()
    .describe("The planner: a preset or config agent (see `agents`); default: the config's defaults.planner"),
  out: z
    .string()
    .min(1)
    .optional()
    .describe(
      "The assignments file to write, inside the workspace; default: assignments.json in the workspace",
    ),
  workspace: z.string().min(1).optional().describe("The git repository to plan for; default: `cwd`"),
  env_vars: z
    .array(z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/))
    .optional()
    .describe(
      "Names of variables of termorch mcp's environment the planner gets (its API key); the plan's environment.env_vars lists them too. Names only: no value is written",
    ),
  max_tasks: z.number().int().positive().optional().describe("At most this many tasks (default 8)"),
  tries: z
    .number()
    .int()
    .positive()
    .optional()
    .describe("Tries the planner gets to write a plan that validates (default 3)"),
  max_cost_usd: z
    .number()
    .positive()
    .optional()
    .describe(
      "USD the planner's tries may spend (as its CLI reports it or the config's prices compute it); no try starts once it is spent. Default: its config entry's budget, else none",
    ),
  max_tokens: z
    .number()
    .int()
    .positive()
    .optional()
    .describe("Tokens (input and output) the planner's tries may use; no try starts once they are used"),
  force: z
    .boolean()
    .optional()
    .describe("Replace an assignments file and plan folder that are there already"),
  run: z
    .boolean()
    .optional()
    .describe("Start a run of the plan once it is valid (as `run` does); follow it with `wait`"),
  cwd: Source.cwd,
  config: Source.config,
});
export type PlanInput = z.infer<typeof PlanInput>;

export const PlanOutput = PlanAnswer.extend({
  started: RunOutput.nullable().describe("With `run`: the run started (as `run` answers); null otherwise"),
});
export type PlanOutput = z.infer<typeof PlanOutput>;

/** What a detached `termorch run --started-file F` writes into F once the run has its id and folder. */
export const DriverStarted = z.strictObject({
  run_id: z.string().regex(RUN_ID_PATTERN),
  run_dir: z.string(),
  pid: z.number().int(),
  tasks: z.number().int().min(0),
});
export type DriverStarted = z.infer<typeof DriverStarted>;

export const StatusInput = z.strictObject({
  run: RunRef.optional().describe(
    "A run id or run directory; default: every run (termorch mcp --home: every run of the daemon's home)",
  ),
});

export const WaitInput = z.strictObject({
  run: RunRef,
  cursor: z
    .string()
    .regex(/^\d+:\d+$/)
    .optional()
    .describe(
      "The `cursor` of the previous `wait` answer; leave it out the first time (changes since the run began)",
    ),
  timeout_s: z
    .number()
    .min(0)
    .max(MAX_BLOCK_S)
    .optional()
    .describe(
      `Seconds to block when nothing changed (default 30, at most ${MAX_BLOCK_S}); 0 answers at once`,
    ),
});
export type WaitInput = z.infer<typeof WaitInput>;

/** One thing that happened in a run, from its ledger. */
export const RunChange = z.discriminatedUnion("event", [
  z.strictObject({ event: z.literal("run_started"), at: z.string(), tasks: z.number().int() }),
  z.strictObject({
    event: z.literal("task_started"),
    at: z.string(),
    task: z.string(),
    attempt: z.number().int(),
  }),
  z.strictObject({
    event: z.literal("task_retrying"),
    at: z.string(),
    task: z.string(),
    attempt: z.number().int(),
    reason: Reason,
  }),
  z.strictObject({
    event: z.literal("task_waiting_input"),
    at: z.string(),
    task: z.string(),
    asks: z.string().nullable().describe("The question its agent asks, when termorch recognised it"),
    answers: z
      .array(KeyAnswer)
      .describe(
        "The keys that pick each usual answer of that question (send them as `keys`); empty when termorch does not know them",
      ),
  }),
  z.strictObject({ event: z.literal("task_input_resumed"), at: z.string(), task: z.string() }),
  z
    .strictObject({
      event: z.literal("waiting_approval"),
      at: z.string(),
      task: z.string().nullable().describe("The task that waits; null: the run's merge"),
      what: z.enum(["start", "result", "merge"]),
      attempt: z.number().int(),
      until: z.string().nullable().describe("When its timeout_s ends the wait; null: none"),
    })
    .describe("Something waits for a person's decision: answer it with `approve` or `reject`"),
  z.strictObject({
    event: z.literal("task_ended"),
    at: z.string(),
    task: z.string(),
    state: TaskState,
    reason: Reason.nullable(),
    detail: z.string().nullable(),
    needs_human: z
      .literal(true)
      .optional()
      .describe(
        'Blocked, and its agent asked for a person (its decision\'s recommended_next_actor "human"): `detail` gives its reason; absent otherwise',
      ),
  }),
  z
    .strictObject({
      event: z.literal("task_redo_started"),
      at: z.string(),
      task: z.string(),
      cause: z.enum(["conflict", "gate"]).default("conflict"),
      attempt: z.number().int(),
      redo: z.number().int(),
      conflicted_with: z.array(z.string()),
      files: z.array(z.string()),
    })
    .describe(
      'The task runs again (this attempt) in the merge, from the integration of the tasks merged before it: cause conflict, its result conflicted with them (merge.on_conflict "redo"), its prompt carrying the conflict; cause gate, a bisect found that its merge turns the run-level tests_cmd red (merge.on_gate_failure "bisect_and_fix"), its prompt carrying what the gate printed. Its task_started and task_ended follow',
    ),
  z.strictObject({
    event: z.literal("task_redo_finished"),
    at: z.string(),
    task: z.string(),
    cause: z.enum(["conflict", "gate"]).default("conflict"),
    redo: z.number().int(),
    outcome: z.enum(["resolved", "failed", "cancelled"]),
    reason: Reason.nullable(),
  }),
  z
    .strictObject({
      event: z.literal("merge_probe"),
      at: z.string(),
      k: z.number().int().describe("Tasks (in merge order) the probe merged; 0: the base"),
      of: z.number().int(),
      task: z.string().nullable().describe("The k-th task; null for the base"),
      passed: z.boolean(),
      duration_ms: z.number(),
    })
    .describe(
      'merge.on_gate_failure "bisect": the run-level tests_cmd ran on the merge of the first k tasks (a probe of the bisect of a red integration)',
    ),
  z
    .strictObject({
      event: z.literal("merge_bisected"),
      at: z.string(),
      culprit: z.string().nullable().describe("The first task whose merge turns the gate red"),
      red_on_base: z.boolean().describe("The gate is red on the base itself: no task broke it"),
      gate_runs: z.number().int(),
      time_ms: z.number(),
    })
    .describe("A bisect of the red run-level tests_cmd ended: what it found, and what it cost"),
  z.strictObject({
    event: z.literal("merge"),
    at: z.string(),
    result: z.string(),
    reason: z.string().nullable(),
    redo: z
      .array(RedoStep)
      .describe(
        "A halted merge (result conflict): each task it left out, its artifacts/redo file and the `termorch run` that redoes it on what merged cleanly; empty otherwise",
      ),
  }),
  z.strictObject({ event: z.literal("run_detached"), at: z.string() }),
  z.strictObject({
    event: z.literal("run_finished"),
    at: z.string(),
    exit_code: z.number().int(),
    failed_tasks: z.array(z.string()),
  }),
]);
export type RunChange = z.infer<typeof RunChange>;

export const WaitOutput = z.strictObject({
  run_id: z.string(),
  cursor: z.string().describe("Give it to the next `wait` to hear only what happens after this answer"),
  changes: z.array(RunChange),
  phase: z
    .enum(["queued", "running", "reported", "interrupted"])
    .describe(
      "queued: a daemon took it and has not started it; interrupted: its driver died before the report (`termorch resume <run_dir>` finishes it)",
    ),
  finished: z
    .boolean()
    .describe(
      "The report is written and this answer brings the ledger's last changes (run_finished among them, here or in an earlier answer): call `report`",
    ),
  exit_code: z.number().int().nullable(),
  tasks: z
    .record(z.string(), z.number().int())
    .describe(
      "How many tasks are in each state now (pending, running, redo, waiting_input, waiting_approval, success, failed, skipped; waiting_approval: waits for a person's decision, answered with `approve` or `reject`; redo: run again in the merge, because its result conflicted or, a bisect's fix, because its merge turned the run-level tests_cmd red)",
    ),
  merge: z
    .string()
    .nullable()
    .default(null)
    .describe(
      "Where its merge is, in words (`bisecting run.tests_cmd: probe 2 of ~3 …`, `culprit c (…)`); null when there is nothing to say",
    ),
  waiting_input: z
    .array(
      z.strictObject({
        task: z.string(),
        asks: z.string().nullable(),
        answers: z
          .array(KeyAnswer)
          .describe(
            "The keys that pick each usual answer of its question: `send` them as `keys` (a menu ignores `text`)",
          ),
      }),
    )
    .describe(
      "Tasks whose agent waits for an answer now: answer with `send` (`keys` from `answers` for a known question, else `text`), or end with `finish`",
    ),
  needs_human: z
    .array(z.strictObject({ task: z.string(), reason: z.string().nullable().describe("Its agent's reason") }))
    .describe(
      'Tasks that ended blocked because their agent asked for a person (its decision\'s routing.recommended_next_actor "human"): not retried, their dependents skipped; a person must act, then run them again',
    ),
  budget: BudgetStanding.nullable()
    .default(null)
    .describe(
      "The run's budget against its agents' spend so far (counted as attempts end); null: it has none",
    ),
  timed_out: z.boolean().describe("Nothing changed within timeout_s"),
});
export type WaitOutput = z.infer<typeof WaitOutput>;

export const ReportInput = z.strictObject({ run: RunRef });

export const LogsInput = z.strictObject({
  task: TaskId,
  run: RunRef.optional().describe("Default: the newest registered run with that task"),
  stream: z.enum(["stdout", "stderr"]).optional().describe("Default stdout"),
  lines: z.number().int().min(1).max(2000).optional().describe("How many last lines (default 100)"),
});

export const LogsOutput = z.strictObject({
  run_id: z.string(),
  task: z.string(),
  stream: z.enum(["stdout", "stderr"]),
  path: z.string(),
  text: z.string().describe("The log's last lines, as redacted on disk, terminal escapes removed"),
  truncated: z.boolean().describe("Earlier lines were left out"),
});

export const SendInput = z.strictObject({
  task: TaskId,
  run: RunRef.optional().describe("Default: the newest run where the task has a live session"),
  ...SendAnswer.shape,
});

export const FinishInput = z.strictObject({
  task: TaskId,
  run: RunRef.optional().describe("Default: the newest run where the task has a live session"),
});

/** What send and finish answer. */
export const TaskActionOutput = z.strictObject({
  run_id: z.string(),
  task: z.string(),
  detail: z.string(),
});

export const CancelInput = z.strictObject({
  run: RunRef,
  wait_s: z
    .number()
    .min(0)
    .max(MAX_BLOCK_S)
    .optional()
    .describe(`Seconds to wait for the report (default 30, at most ${MAX_BLOCK_S}); 0: only request it`),
});

export const CancelOutput = z.strictObject({
  run_id: z.string(),
  outcome: z
    .enum(["reported", "requested", "already_finished", "driver_gone", "timed_out"])
    .describe(
      "reported: stopped and its report written; requested: asked, not waited for; driver_gone: nothing drives it (resume it to stop it)",
    ),
  exit_code: z.number().int().nullable(),
  report: z.string().nullable(),
});

/** What an approve or reject answers: a task's wait for a person's decision, or the run's merge's. */
const Decided = {
  run: RunRef,
  task: TaskId.optional().describe(
    "The task whose wait for a decision (its `approval`: its start, or its attempt's result) is answered; leave it out for the run's merge (merge.approval)",
  ),
};

/** At most what a decision's file keeps of its reason. */
const REASON_MAX = 16 * 1024;

const NO_REASON = "a rejection needs its reason: what the task's next attempt is told";

export const ApproveInput = z.strictObject({
  ...Decided,
  reason: z.string().max(REASON_MAX).optional().describe("A note kept in the run's ledger with the decision"),
});

export const RejectInput = z.strictObject({
  ...Decided,
  reason: z
    .string({ error: (issue) => (issue.input === undefined ? NO_REASON : undefined) })
    .max(REASON_MAX)
    .regex(/\S/, { error: NO_REASON })
    .describe(
      "Why (required): a task's next attempt is told it as its feedback (with no attempts left the task ends, reason rejected); for the merge, nothing is merged and it is the report's reason",
    ),
});

/** What approve and reject answer. */
export const DecideOutput = z.strictObject({
  run_id: z.string(),
  task: z.string().nullable().describe("The task decided on; null: the run's merge"),
  decision: z.enum(["approve", "reject"]),
  at: z
    .enum(["start", "result", "merge"])
    .describe("The wait it answered: the task's start, its attempt's result, or the merge"),
  attempt: z.number().int().min(0).describe("The attempt whose result waited (0: a start, or the merge)"),
  driver_live: z
    .boolean()
    .describe("Its driver takes the decision within a second; false: when the run is resumed"),
  detail: z.string(),
});
export type DecideOutput = z.infer<typeof DecideOutput>;

export const StopInput = z.strictObject({ run: RunRef });

/** What stop answers. */
export const StopOutput = z.strictObject({
  run_id: z.string(),
  driver_live: z.boolean().describe("Its driver stops within a second; false: a resume stops at once"),
  handoff: z.string().describe("Where its session handoff will be (handoff.json in the run directory)"),
  detail: z.string(),
});

export const AgentsInput = z.strictObject({
  config: Source.config,
  cwd: Source.cwd,
});

/** One agent a task can name, as `termorch agents --json` lists it. */
export const AgentRow = z.strictObject({
  name: z.string(),
  source: z.enum(["preset", "config", "task"]),
  preset: z.string().nullable(),
  argv: z.array(z.string()).describe("What it runs, placeholders unsubstituted"),
  interactive_argv: z.array(z.string()).describe("What it runs for a task with `interactive: true`"),
  prompt: z.enum(["stdin", "file", "none"]).describe("How it takes its prompt"),
  output: z.string().nullable().describe("The format of its output termorch parses into the report"),
  tty: z.boolean(),
  binary: z.string().nullable().describe("A preset's executable"),
  on_path: z.boolean().nullable().describe("Whether that executable is on PATH here"),
  install: z.string().nullable().describe("How to install it"),
});
export type AgentRow = z.infer<typeof AgentRow>;

export const AgentsOutput = z.strictObject({ agents: z.array(AgentRow) });

/** A tool error's structured part: what stopped the call, as the CLI's exit code would say it. */
export const ToolError = z.strictObject({
  error: z.strictObject({
    kind: z.string(),
    exit_code: z.number().int(),
    message: z.string(),
    hint: z.string().nullable(),
    problems: z.array(McpProblem),
  }),
});
export type ToolError = z.infer<typeof ToolError>;
