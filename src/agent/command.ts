import type { Budget, OnRateLimit, Task } from "../contract/assignments.js";
import { type AgentSpec, type Config, PresetName } from "../contract/config.js";
import type { RetryFrom } from "../contract/retry-from.js";
import type { Sandbox } from "../contract/sandbox.js";
import { resolveSandbox, type SandboxNeeds, type SandboxSetting } from "../sandbox/policy.js";
import { type KnownDialog, PRESETS, presetArgv, type SessionStore } from "./presets.js";
import type { OutputFormat } from "./results.js";
import type { StateEventFormat } from "./state-events.js";

/** Values substituted into an agent's argv, element by element, never through a shell. */
export interface Placeholders {
  task_id: string;
  context_path: string;
  workspace: string;
  artifacts_dir: string;
  run_id: string;
  /** The file holding the task's prompt (the context file and what its dependencies did). */
  prompt_file: string;
  /**
   * A private file a CLI that reports its usage only in a file of its own writes it to (copilot's
   * --usage-output-file); termorch reads it with the CLI's output after each attempt.
   */
  usage_file: string;
  /** The task's own private configuration folder for its CLI (termorch's plugins, written before each attempt). */
  agent_config: string;
}

const PLACEHOLDER =
  /\{(task_id|context_path|workspace|artifacts_dir|run_id|prompt_file|usage_file|agent_config)\}/g;

export function substitute(argv: readonly string[], values: Placeholders): string[] {
  return argv.map((arg) => arg.replace(PLACEHOLDER, (_, name: keyof Placeholders) => values[name]));
}

/** An agent as a task runs it: its command line and how it takes its prompt and reports. */
export interface ResolvedAgent {
  /** argv with placeholders. */
  command: string[];
  /** argv with placeholders when termorch's sandbox confines it (a preset's `sandbox.edit_mode`). */
  sandboxedCommand: string[];
  tty: boolean;
  timeout_s?: number | undefined;
  env: Record<string, string>;
  /** On standard input, in `{prompt_file}` (a preset's way), or not at all: it reads `{context_path}` itself. */
  prompt: "stdin" | "file" | "none";
  /** Which of its output termorch parses into the report; null: none. */
  output: OutputFormat | null;
  /** Where its CLI keeps its sessions, read for what its output does not say; null: none. */
  sessions: SessionStore | null;
  /** Where it came from: a built-in preset as it is, the config (an agent of its own, or a preset it overrides), the task's `command`. */
  source: "preset" | "config" | "task";
  preset: PresetName | null;
  /** A preset's executable, which must be on the agent's PATH, and what to install. */
  requires: { binary: string; install: string } | null;
  /** Globs of files the CLI writes for itself in the worktree: never committed. */
  scratch: readonly string[];
  /** The config entry's `expect_changes`, the default of its tasks; undefined: not said. */
  expect_changes?: boolean | undefined;
  /** The config entry's `sandbox`; undefined: not said. */
  sandbox?: Sandbox | undefined;
  /** The config entry's `retry_from`, the default of its tasks; undefined: not said. */
  retry_from?: RetryFrom | undefined;
  /** The config entry's `rate_limit`, the default of its tasks; undefined: not said. */
  rate_limit?: OnRateLimit | undefined;
  /** The config entry's `model` (a preset passes it to its CLI; `prices` may name it); null: not said. */
  model: string | null;
  /** The config entry's `budget`, each of its tasks' that has none of its own; undefined: none. */
  budget?: Budget | undefined;
  /** What a preset's CLI needs in a sandbox; null: an agent of the user's own command. */
  sandboxNeeds: SandboxNeeds | null;
  /** Its CLI's own cap on an invocation's USD (`flag`, inserted at `at` in its argv); null: none. */
  budgetCap: { flag: string; at: number } | null;
  /**
   * How it runs for a task with `"interactive": true`: a preset's interactive form (with the
   * config's model and extra flags) and its screen patterns; any other agent's own command, with none.
   */
  interactive: InteractiveAgent;
}

/** An agent run in the pane's terminal, its prompt pasted in. */
export interface InteractiveAgent {
  /** argv with placeholders. */
  command: string[];
  /** argv with placeholders when termorch's sandbox confines it (a preset's `sandbox.edit_mode`). */
  sandboxedCommand: string[];
  /** Regex source matching the screen while it waits for input; null: an unchanged screen is enough. */
  waiting: string | null;
  /** Regex source matching the screen while it is busy (then it is not waiting); null: none known. */
  busy: string | null;
  /** Regex source matching the screen while its pasted prompt sits in its input box unsent; null: none known. */
  pasteHeld: string | null;
  /** Questions its CLI asks, recognised on the screen (never answered by termorch). */
  dialogs: readonly KnownDialog[];
  /** How to read the state events its CLI appends to `$TERMORCH_AGENT_EVENTS`; null: it sends none. */
  events: StateEventFormat | null;
  /**
   * The files of termorch's plugin for its CLI, written into the task's own configuration folder
   * (`{agent_config}`), and the variable that names that folder to the CLI; null: none.
   */
  eventsConfig: { files: Readonly<Record<string, string>>; env: string | null } | null;
  /** Environment of the interactive form (a CLI's per-invocation trust), under the agent's own `env`. */
  env: Readonly<Record<string, string>>;
}

/** The agent definition a task uses: its explicit `command`, else the config's entry, else a preset of that name. */
export function agentFor(task: Pick<Task, "agent" | "command">, config: Config): ResolvedAgent | undefined {
  // Own keys only: an agent named "constructor" must not find Object.prototype's.
  const registered = Object.hasOwn(config.agents, task.agent) ? config.agents[task.agent] : undefined;
  if (task.command) return { ...plain(registered), ...ownCommand(task.command), source: "task" };
  if (registered) return fromConfig(task.agent, registered);
  const preset = PresetName.safeParse(task.agent);
  return preset.success ? fromPreset(preset.data, undefined) : undefined;
}

/** One of the agents a task's attempts run, as its input names it. */
export interface TaskAgent {
  name: string;
  /** undefined: no agent of that name is defined. */
  agent: ResolvedAgent | undefined;
  /**
   * null: the task's own `agent`; else its place in the escalation list (the task's own or its
   * agent entry's), in the fallback list of its `rate_limit` (`fallback`), or its reviewer
   * (`review`, which runs no attempt of the task).
   */
  escalation: { index: number; list: "task" | "agent" | "fallback" | "review" } | null;
}

/**
 * The agents a task's attempts run, in order: its own (with its `command`, when it has one),
 * then its escalation list (its own, else its agent entry's), each by name alone; then the
 * fallbacks of its rate limit, and its reviewer (`review`: the agent its review asks for).
 */
export function taskAgents(
  task: Pick<Task, "agent" | "command" | "escalation"> & {
    rate_limit?: { fallback: readonly string[] } | undefined;
    review?: string | undefined;
  },
  config: Config,
): TaskAgent[] {
  const entry = Object.hasOwn(config.agents, task.agent) ? config.agents[task.agent] : undefined;
  const list = task.escalation ? "task" : "agent";
  const names = task.escalation ?? entry?.escalation ?? [];
  // A rate limit's fallbacks: the task's rate_limit, else its agent entry's, else the defaults'.
  const fallback = (task.rate_limit ?? entry?.rate_limit ?? config.defaults.rate_limit)?.fallback ?? [];
  return [
    { name: task.agent, agent: agentFor(task, config), escalation: null },
    ...names.map((name, index) => ({
      name,
      agent: agentFor({ agent: name }, config),
      escalation: { index, list } as const,
    })),
    ...fallback.map((name, index) => ({
      name,
      agent: agentFor({ agent: name }, config),
      escalation: { index, list: "fallback" } as const,
    })),
    ...(task.review === undefined
      ? []
      : [
          {
            name: task.review,
            agent: agentFor({ agent: task.review }, config),
            escalation: { index: 0, list: "review" } as const,
          },
        ]),
  ];
}

/** Every agent a task can name: the presets, and the config's agents (which override presets of their name). */
export function allAgents(config: Config): Map<string, ResolvedAgent> {
  const out = new Map<string, ResolvedAgent>();
  for (const name of PresetName.options) out.set(name, fromPreset(name, undefined));
  for (const [name, spec] of Object.entries(config.agents)) {
    const agent = fromConfig(name, spec);
    if (agent) out.set(name, agent);
  }
  return out;
}

/**
 * An agent of the user's own command line: it reads its context file itself, termorch parses
 * nothing of its output, and its interactive form is the same command with no known screens.
 */
function ownCommand(command: string[]): Omit<ResolvedAgent, "source" | EntrySettings> {
  return {
    command,
    sandboxedCommand: command,
    prompt: "none",
    output: null,
    sessions: null,
    preset: null,
    requires: null,
    sandboxNeeds: null,
    budgetCap: null,
    scratch: [],
    interactive: {
      command,
      sandboxedCommand: command,
      waiting: null,
      busy: null,
      pasteHeld: null,
      dialogs: [],
      events: null,
      eventsConfig: null,
      env: {},
    },
  };
}

/** What an agent entry of the config sets besides its command line (`plain`). */
type EntrySettings =
  | "tty"
  | "timeout_s"
  | "env"
  | "expect_changes"
  | "sandbox"
  | "retry_from"
  | "rate_limit"
  | "model"
  | "budget";

function plain(spec: AgentSpec | undefined): Pick<ResolvedAgent, EntrySettings> {
  return {
    tty: spec?.tty ?? false,
    model: spec?.model ?? null,
    ...(spec?.budget === undefined ? {} : { budget: spec.budget }),
    env: spec?.env ?? {},
    ...(spec?.expect_changes === undefined ? {} : { expect_changes: spec.expect_changes }),
    ...(spec?.sandbox === undefined ? {} : { sandbox: spec.sandbox }),
    ...(spec?.retry_from === undefined ? {} : { retry_from: spec.retry_from }),
    ...(spec?.rate_limit === undefined ? {} : { rate_limit: spec.rate_limit }),
    ...(spec?.timeout_s ? { timeout_s: spec.timeout_s } : {}),
  };
}

function fromConfig(name: string, spec: AgentSpec): ResolvedAgent | undefined {
  if (spec.command) return { ...plain(spec), ...ownCommand(spec.command), source: "config" };
  const preset = spec.preset ?? PresetName.safeParse(name).data;
  return preset ? { ...fromPreset(preset, spec), source: "config" } : undefined;
}

function fromPreset(name: PresetName, spec: AgentSpec | undefined): ResolvedAgent {
  const p = PRESETS[name];
  const model = spec?.model ? [p.model_flag, spec.model] : [];
  const interactiveArgv = (argv: readonly string[]): string[] => [
    ...argv,
    ...p.interactive.trust.args,
    ...(p.interactive.events?.args ?? []),
    ...model,
    ...(spec?.args ?? []),
  ];
  const choices = {
    bypass: spec?.dangerously_bypass_permissions ?? false,
    ...(spec?.model ? { model: spec.model } : {}),
    extra: spec?.args ?? [],
  };
  return {
    ...plain(spec),
    command: presetArgv(p, choices),
    sandboxedCommand: presetArgv(p, { ...choices, sandboxed: true }),
    prompt: p.prompt,
    output: p.output,
    sessions: p.sessions,
    source: "preset",
    preset: name,
    requires: { binary: p.binary, install: p.install },
    sandboxNeeds: p.sandbox,
    budgetCap: p.budget_flag ? { flag: p.budget_flag, at: p.argv.length } : null,
    scratch: p.scratch,
    interactive: {
      command: interactiveArgv(p.interactive.argv),
      sandboxedCommand: interactiveArgv(replaceRun(p.interactive.argv, p.edit_mode, p.sandbox.edit_mode)),
      waiting: p.interactive.waiting,
      busy: p.interactive.busy,
      pasteHeld: p.interactive.pasteHeld ?? null,
      dialogs: p.interactive.dialogs,
      events: p.interactive.events?.format ?? null,
      eventsConfig: p.interactive.events?.files
        ? { files: p.interactive.events.files, env: p.interactive.events.configEnv ?? null }
        : null,
      env: p.interactive.trust.env,
    },
  };
}

/** Every preset CLI's own folders: a sandboxed agent sees only its own CLI's. */
const CLI_FOLDERS = [...new Set(Object.values(PRESETS).flatMap((p) => p.sandbox.write))];

/** A task's sandbox, from the config's defaults, its agent's entry and its own; null: off. */
export function taskSandbox(
  config: Pick<Config, "defaults">,
  agent: Pick<ResolvedAgent, "sandbox" | "sandboxNeeds">,
  task: Pick<Task, "sandbox">,
): SandboxSetting | null {
  const own = agent.sandboxNeeds?.write ?? [];
  return resolveSandbox(
    [config.defaults.sandbox, agent.sandbox, task.sandbox],
    agent.sandboxNeeds,
    CLI_FOLDERS.filter((p) => !own.includes(p)),
  );
}

/**
 * A reviewer's sandbox where none is configured for its task: on (its copy of the work read-only,
 * its CLI's own folders writable, the network as it is: its CLI must reach its model), unless a
 * level turns the sandbox off; null then. A configured sandbox is taskSandbox's.
 */
export function reviewerSandbox(
  config: Pick<Config, "defaults">,
  agent: Pick<ResolvedAgent, "sandbox" | "sandboxNeeds">,
  task: Pick<Task, "sandbox">,
): SandboxSetting | null {
  const levels = [config.defaults.sandbox, agent.sandbox, task.sandbox];
  if (levels.filter((l) => l !== undefined).at(-1) === "off") return null;
  const own = agent.sandboxNeeds?.write ?? [];
  return resolveSandbox(
    [{ network: "host" }, ...levels],
    agent.sandboxNeeds,
    CLI_FOLDERS.filter((p) => !own.includes(p)),
  );
}

/** `argv` with the first run of `from` replaced by `to` (unchanged without one, or without `to`). */
function replaceRun(
  argv: readonly string[],
  from: readonly string[],
  to: readonly string[] | undefined,
): string[] {
  if (!to || from.length === 0) return [...argv];
  const at = argv.findIndex((_, i) => from.every((f, j) => argv[i + j] === f));
  return at < 0 ? [...argv] : [...argv.slice(0, at), ...to, ...argv.slice(at + from.length)];
}
