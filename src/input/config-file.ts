import { existsSync } from "node:fs";
import { homedir } from "node:os";
import { dirname, isAbsolute, join, resolve } from "node:path";
import { execa } from "execa";
import { agentFor } from "../agent/command.js";
import { PRESETS } from "../agent/presets.js";
import { Config, PresetName, SOCKET_NAME_PATTERN, SOCKET_NAME_RULE } from "../contract/config.js";
import { parseWith } from "../contract/parse.js";
import { InputError, type InputProblem } from "../errors.js";
import { compile } from "../redact/redactor.js";
import { readJsonFile } from "./json-file.js";

export interface LoadedConfig {
  config: Config;
  /** The file it came from, or null when none was found (no agents defined). */
  file: string | null;
  /**
   * What is wrong with the config, when it could not be loaded (then `config` is the empty
   * default): reported together with the assignments file's problems, which are still checked.
   */
  problems?: InputProblem[];
}

/** loadConfig for a command that checks an assignments file next: an invalid config becomes its problems. */
export async function loadConfigOrProblems(
  explicit: string | undefined,
  env: Readonly<Record<string, string | undefined>>,
  cwd: string,
): Promise<LoadedConfig> {
  try {
    return await loadConfig(explicit, env, cwd);
  } catch (error) {
    if (!(error instanceof InputError)) throw error;
    return { config: Config.parse({}), file: null, problems: error.problems };
  }
}

/** Config lookup (docs/guides/configuration.md: Config): --config, $TERMORCH_CONFIG, ./config/termorch.json, ~/.config/termorch/config.json. */
export async function loadConfig(
  explicit: string | undefined,
  env: Readonly<Record<string, string | undefined>>,
  cwd: string,
): Promise<LoadedConfig> {
  const socket = env.TERMORCH_TMUX_SOCKET;
  if (socket && !SOCKET_NAME_PATTERN.test(socket)) {
    throw new InputError(
      [
        {
          message: `environment variable TERMORCH_TMUX_SOCKET="${socket}": a tmux socket name ${SOCKET_NAME_RULE}`,
        },
      ],
      "Set TERMORCH_TMUX_SOCKET to a plain name (or unset it); nothing was started.",
    );
  }
  const named = explicit ?? env.TERMORCH_CONFIG;
  let file: string | null = null;
  if (named) file = resolve(cwd, named);
  else {
    file =
      [
        join(cwd, "config", "termorch.json"),
        join(env.HOME ?? homedir(), ".config", "termorch", "config.json"),
      ].find((f) => existsSync(f)) ?? null;
  }
  if (file === null) return { config: Config.parse({}), file: null };
  const config = parseWith(Config, await readJsonFile(file, "config file"), file);
  const problems: InputProblem[] = [];
  config.redact.forEach((pattern, i) => {
    try {
      // V8 parses at construction and compiles at first use, where a pattern too large fails.
      compile(pattern).test("");
    } catch (error) {
      problems.push({
        file: file ?? undefined,
        field: `redact[${i}]`,
        // V8's message repeats the whole pattern, which the field already names.
        message: `invalid pattern: ${(error as Error).message.replace(/^Invalid regular expression: \/.*\/[a-z]*: /s, "")}`,
      });
    }
  });
  // Every pattern is checked by both engines, so one pass names all the bad ones.
  const reported = new Set(problems.map((p) => p.field));
  for (const { index, error } of await perlRejects(config.redact)) {
    if (reported.has(`redact[${index}]`)) continue;
    problems.push({
      file,
      field: `redact[${index}]`,
      message: `invalid pattern for the pane supervisor (Perl): ${error}`,
    });
  }
  problems.push(...agentProblems(config, file));
  if (problems.length > 0) throw new InputError(problems);
  return { config: withAbsoluteAgentPaths(config, [dirname(file), cwd]), file };
}

/** Agent entries whose settings contradict each other or cannot work (a preset's choices on a command agent...). */
function agentProblems(config: Config, file: string): InputProblem[] {
  const problems: InputProblem[] = [];
  for (const [name, spec] of Object.entries(config.agents)) {
    const at = (message: string): void => {
      problems.push({ file, field: `agents.${name}`, message });
    };
    (spec.escalation ?? []).forEach((other, j) => {
      const field = `agents.${name}.escalation[${j}]`;
      if (other === name)
        problems.push({
          file,
          field,
          message: `"${other}" is this agent itself: an escalation names other agents; to run it again, raise the tasks' "retries"`,
        });
      else if (!agentFor({ agent: other }, config))
        problems.push({
          file,
          field,
          message: `unknown agent "${other}" (defined agents: ${Object.keys(config.agents).join(", ")}; presets: ${PresetName.options.join(", ")})`,
        });
    });
    // A group that is not there bounds nothing: said, rather than the bound silently gone.
    if (spec.provider !== undefined && !Object.hasOwn(config.providers, spec.provider))
      problems.push({
        file,
        field: `agents.${name}.provider`,
        message: `provider "${spec.provider}" is not in "providers" (${Object.keys(config.providers).join(", ") || "none defined"}); add "providers": {"${spec.provider}": {"max_parallel": N}}`,
      });
    const preset = spec.preset ?? PresetName.safeParse(name).data;
    if (spec.command) {
      const presetOnly = [
        spec.preset && "preset",
        spec.model && "model",
        spec.args.length > 0 && "args",
        spec.dangerously_bypass_permissions && "dangerously_bypass_permissions",
      ].filter(Boolean);
      if (presetOnly.length > 0)
        at(
          `"command" defines an agent of its own: ${presetOnly.join(", ")} only apply to a preset; remove one or the other`,
        );
      continue;
    }
    if (!preset) {
      at(`needs a "command", or a "preset" (${PresetName.options.join(", ")})`);
      continue;
    }
    if (spec.tty)
      at(
        `preset ${preset} runs its CLI's non-interactive mode, which reads its prompt from standard input; for a terminal session give the task "interactive": true instead of "tty"`,
      );
    if (spec.dangerously_bypass_permissions && PRESETS[preset].bypass.length === 0)
      at(`${preset} has no flag that bypasses its permissions; remove dangerously_bypass_permissions`);
  }
  return problems;
}

/**
 * Settings a config may still hold but that no longer do anything, one line each for the run to
 * show. Accepted rather than refused: they only chose how termorch worked, never what it does.
 */
export function removedSettings(config: Config, file: string | null): string[] {
  const where = file ? `config ${file}: ` : "config: ";
  return config.tmux.control_mode === undefined
    ? []
    : [
        `${where}tmux.control_mode was removed (tmux <= 3.5 could crash with it) and is ignored; delete the key`,
      ];
}

/**
 * Agents run in their task's worktree, so a registry command like `bash examples/agents/echo.sh`
 * would look for the script there. An argument that names an existing file relative to the
 * config file's folder (first) or to where termorch was started is made absolute; anything else
 * (options, placeholders, files that exist only in the repository) is passed as written.
 */
function withAbsoluteAgentPaths(config: Config, bases: readonly string[]): Config {
  const fix = (arg: string): string => {
    if (!arg.includes("/") || isAbsolute(arg) || arg.startsWith("-") || arg.includes("{")) return arg;
    const found = bases.map((b) => resolve(b, arg)).find((p) => existsSync(p));
    return found ?? arg;
  };
  const agents = Object.fromEntries(
    Object.entries(config.agents).map(([name, spec]) => [
      name,
      spec.command ? { ...spec, command: spec.command.map(fix) } : spec,
    ]),
  );
  return { ...config, agents };
}

/**
 * The pane supervisor applies redaction patterns with Perl's regex engine; a pattern JavaScript
 * accepts but Perl does not would fail every task at launch, so it is refused here instead.
 */
async function perlRejects(patterns: readonly string[]): Promise<Array<{ index: number; error: string }>> {
  if (patterns.length === 0) return [];
  const check =
    'my $i = 0; for my $p (@ARGV) { eval { qr/$p/ }; if ($@) { (my $e = $@) =~ s/\\s+/ /g; print "$i\t$e\n" } $i++ }';
  const result = await execa("perl", ["-e", check, ...patterns], {
    reject: false,
    extendEnv: false,
    env: { PATH: process.env.PATH ?? "/usr/bin:/bin", LC_ALL: "C" },
  });
  if (result.exitCode !== 0 && result.stdout === "") return [];
  return String(result.stdout)
    .split("\n")
    .filter(Boolean)
    .map((line) => {
      const [index, error] = line.split("\t");
      return { index: Number(index), error: (error ?? "").replace(/ at -e line \d+\.?/, "").trim() };
    });
}
