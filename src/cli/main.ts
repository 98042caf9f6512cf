import "./zod-jitless.js";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { Writable } from "node:stream";
import { Argument, Command, CommanderError, Option } from "commander";
import { secretValuesOf } from "../agent/environment.js";
import { jsonSchemaOf, type SchemaName, schemas } from "../contract/json-schema.js";
import type { DriverStarted } from "../contract/mcp.js";
import type { Report } from "../contract/report.js";
import { Daemon, homeLayout } from "../daemon/daemon.js";
import { daemonLogger } from "../daemon/log.js";
import { ExitCode, exitCodeOfKind, InputError, TermorchError } from "../errors.js";
import { writeFileAtomicSync } from "../fs/atomic.js";
import { agentRows } from "../input/agent-binaries.js";
import { loadConfig } from "../input/config-file.js";
import { verifyLedger } from "../ledger/ledger.js";
import { terminalLogger } from "../log/pretty.js";
import { collisionText } from "../plan/collisions.js";
import { isSecretName, Redactor } from "../redact/redactor.js";
import {
  type DetachedResult,
  type DriveOptions,
  type RunResult,
  resumeRun,
  runAssignments,
  type StartInfo,
} from "../run/runner.js";
import { validateAssignments } from "../run/validate.js";
import { redoSteps } from "../shell/redo-command.js";
import type { Io } from "./io.js";
import { registerMcpCommand } from "./mcp.js";
import { registerOperatorCommands } from "./operator.js";
import { environmentRedactor } from "./own-redactor.js";
import { registerPlanCommand } from "./plan.js";
import { positiveInt, positiveNumber } from "./positive-int.js";
import { progressLine } from "./progress.js";
import { registerReportCommand } from "./report.js";
import { type BackendFlags, backendChoice, registerScaleCommands } from "./scale.js";
import { registerServeCommand } from "./serve.js";
import { packageVersion } from "./version.js";
import { registerWatchCommand } from "./watch.js";

/**
 * stdout or stderr as the commands see them. When the reader of a pipe goes away
 * (`termorch validate x.json | head -1`), the next write fails with EPIPE as an 'error' event,
 * which would end the process with a stack trace. Instead the output is dropped from then on
 * and the command ends normally, with its own exit code (not 141): the work it was doing (a
 * run, a cancel, a clean) is not cut short by whoever stopped reading its messages.
 */
class Output extends Writable {
  /** Aborted once the target failed a write: its reader is gone, for good. */
  readonly gone: AbortSignal;
  readonly isTTY: boolean | undefined;

  constructor(private readonly target: NodeJS.WritableStream & { isTTY?: boolean }) {
    super();
    this.isTTY = target.isTTY;
    this.gone = brokenSignal(target);
  }

  override _write(chunk: Buffer, _encoding: BufferEncoding, done: () => void): void {
    // Passed through at once (not after the target's callback), so stdout and stderr sent to
    // one pipe (2>&1) keep the order they were written in.
    if (this.gone.aborted || this.target.write(chunk)) {
      done();
      return;
    }
    const resume = (): void => {
      this.target.off("drain", resume);
      this.gone.removeEventListener("abort", resume);
      done();
    };
    this.target.once("drain", resume);
    this.gone.addEventListener("abort", resume, { once: true });
  }
}

/** Per stream, however often main() runs in one process (tests): one 'error' listener each. */
const broken = new WeakMap<NodeJS.WritableStream, AbortController>();

function brokenSignal(target: NodeJS.WritableStream): AbortSignal {
  let failed = broken.get(target);
  if (!failed) {
    const controller = new AbortController();
    // Any write error of our own output has nowhere to be reported: it only stops the output.
    target.on("error", () => controller.abort());
    broken.set(target, controller);
    failed = controller;
  }
  return failed.signal;
}

/** Parses argv, runs the command and returns the exit code. The only place errors become messages. */
export async function main(
  argv: string[],
  io: Io = { stdout: process.stdout, stderr: process.stderr, env: process.env, cwd: process.cwd() },
): Promise<number> {
  const stdout = new Output(io.stdout);
  io = { ...io, stdout, stderr: new Output(io.stderr), readerGone: stdout.gone };
  let code: number = ExitCode.ok;
  let debug = argv.includes("--debug");
  const program = new Command()
    .name("termorch")
    .description(
      "Run an assignments.json DAG of agents in parallel tmux sessions and git worktrees, then report.",
    )
    .version(packageVersion(), "-V, --version")
    .showHelpAfterError("(run termorch --help for usage)")
    .exitOverride()
    .configureOutput({ writeOut: (s) => io.stdout.write(s), writeErr: (s) => io.stderr.write(visible(s)) });

  program
    .command("run")
    .description("run the tasks of an assignments file and write execution_report.json")
    .argument("<assignments>", "assignments.json")
    .option("--config <file>", "config file (agents, redaction, defaults)")
    .option("--out <dir>", "run directory (default: the assignments file's folder)")
    .option("--dry-run", "validate and plan; print waves and each task's argv; start nothing")
    .option("--no-verify", "skip artifact and test gates (core gates still apply)")
    .option("--max-parallel <n>", "tasks running at once (default: CPU count)", positiveInt)
    .addOption(
      new Option("--schedule <mode>", "eager: start as soon as dependencies succeed; waves: wave barriers")
        .choices(["eager", "waves"])
        .default("eager"),
    )
    .option("--fail-fast", "stop launching and cancel running tasks at the first failure")
    .option("--keep-sessions", "keep every tmux session after the report (default: keep failed ones only)")
    .option("--clean", "close every tmux session after the report, failed ones too")
    .option("--keep-branches", "keep task branches and worktrees after a successful merge")
    .option("--allow-dirty", "run even if tracked files have uncommitted changes")
    .option("--wait", "wait for another run on the same workspace to finish instead of exiting 4")
    .addOption(backendOption())
    .option(
      "--redis <url>",
      "Redis URL of the bullmq backend (default: the config's redis, $TERMORCH_REDIS_URL)",
    )
    .option("--json", "print the report on stdout")
    .option("--debug", "verbose logs and stack traces")
    // For `termorch mcp`, which starts runs as detached drivers (src/mcp/start-run.ts): the
    // folder an inline document stands for, and the file that tells it the run has started.
    .addOption(new Option("--base-dir <dir>").hideHelp())
    .addOption(new Option("--started-file <file>").hideHelp())
    .action(async (file: string, o: RunFlags) => {
      debug = o.debug ?? false;
      code = await runCommand(file, o, io);
    });

  program
    .command("daemon")
    .description("take assignment files from <home>/inbox/ and answer each in <home>/outbox/<run_id>.json")
    .requiredOption("--home <dir>", "the daemon's home: inbox/, runs/, outbox/, logs/")
    .option("--config <file>", "config file for every run")
    .option("--max-runs <n>", "runs driven at once", positiveInt)
    .option("--max-parallel <n>", "tasks running at once across all runs", positiveInt)
    .addOption(backendOption())
    .option(
      "--redis <url>",
      "Redis URL of the bullmq backend (default: the config's redis, $TERMORCH_REDIS_URL)",
    )
    .action(async (o: DaemonFlags) => {
      code = await daemonCommand(o, io);
    });

  program
    .command("resume")
    .description(
      "finish an interrupted run from its state.json, or one its budget stopped with the budget raised (nothing that finished runs again)",
    )
    .argument("<run-dir>", "the run directory (where state.json is)")
    .option("--wait", "wait for the workspace lock instead of exiting 4")
    .option(
      "--redis <url>",
      "a run on workers (backend bullmq): the Redis URL, when its config does not name it",
    )
    .option(
      "--max-cost-usd <usd>",
      "raise the run's budget in USD: a run its budget stopped goes on (the tasks it ended run again)",
      positiveNumber,
    )
    .option("--max-tokens <n>", "raise the run's budget in tokens (input and output)", positiveInt)
    .option("--json", "print the report on stdout")
    .option("--debug", "verbose logs and stack traces")
    .action(
      async (
        dir: string,
        o: {
          wait?: boolean;
          json?: boolean;
          debug?: boolean;
          redis?: string;
          maxCostUsd?: number;
          maxTokens?: number;
        },
      ) => {
        debug = o.debug ?? false;
        const budget = {
          ...(o.maxCostUsd === undefined ? {} : { max_cost_usd: o.maxCostUsd }),
          ...(o.maxTokens === undefined ? {} : { max_tokens: o.maxTokens }),
        };
        code = await drive(io, o, (common) => resumeRun({ ...common, runDir: dir, budget }));
      },
    );

  program
    .command("validate")
    .description("check an assignments file (schema, graph, paths, agents) and print its waves")
    .argument("<assignments>", "assignments.json")
    .option("--config <file>", "config file")
    .option("--json", "print the plan as JSON")
    .action(async (file: string, o: { config?: string; json?: boolean }) => {
      const { input, waves, criticalPath, collisions } = await validateAssignments({
        file: resolvePath(io.cwd, file),
        config: o.config,
        env: io.env,
        cwd: io.cwd,
      });
      if (o.json)
        io.stdout.write(
          `${JSON.stringify({ valid: true, run_id: input.runId, waves, critical_path: criticalPath, collisions }, null, 2)}\n`,
        );
      else {
        io.stdout.write(`${input.file}: valid, ${tasksInWaves(input.tasks.length, waves.length)}\n`);
        for (const [i, w] of waves.entries()) io.stdout.write(`  wave ${i + 1}: ${w.join(", ")}\n`);
        io.stdout.write(`  critical path: ${criticalPath.join(" -> ")}\n`);
        for (const c of collisions) io.stderr.write(`termorch: warning: ${collisionText(c)}\n`);
      }
    });

  program
    .command("verify-ledger")
    .description("check the hash chain of a run's events.jsonl; exit 1 naming the first broken line")
    .argument("<run-dir>", "run directory (or the events.jsonl file itself)")
    .action(async (dir: string) => {
      const path = dir.endsWith(".jsonl")
        ? resolvePath(io.cwd, dir)
        : `${resolvePath(io.cwd, dir)}/events.jsonl`;
      if (!existsSync(path))
        throw new InputError(
          [{ file: path, message: "no ledger here (events.jsonl not found)" }],
          "Pass a run directory of a run that started.",
        );
      const check = await verifyLedger(path);
      if (check.ok) io.stdout.write(`${path}: intact, ${plural(check.events, "event")}\n`);
      else {
        io.stderr.write(
          `${path}: broken at line ${check.line}${check.seq === null ? "" : ` (seq ${check.seq})`}: ${check.problem}\n`,
        );
        code = ExitCode.failed;
      }
    });

  program
    .command("schema")
    .description("print the JSON Schema of a termorch file format")
    .addArgument(new Argument("<name>", Object.keys(schemas).join(" | ")).choices(Object.keys(schemas)))
    .action((name: SchemaName) => {
      io.stdout.write(`${JSON.stringify(jsonSchemaOf(name), null, 2)}\n`);
    });

  program
    .command("agents")
    .description(
      "list every agent a task can name: the built-in presets and the config's, with the command each runs",
    )
    .option("--config <file>", "config file")
    .option("--json", "print them as JSON")
    .action(async (o: { config?: string; json?: boolean }) => {
      const { config } = await loadConfig(o.config, io.env, io.cwd);
      const rows = agentRows(config, io.env.PATH);
      if (o.json) {
        io.stdout.write(`${JSON.stringify(rows, null, 2)}\n`);
        return;
      }
      for (const r of rows) {
        const where = r.source === "preset" ? "preset" : r.preset ? `config (preset ${r.preset})` : "config";
        const missing = r.on_path === false ? `   [${r.binary} not on PATH; to install: ${r.install}]` : "";
        io.stdout.write(
          `${r.name}  ${where}  prompt: ${r.prompt}${r.output ? `, parsed: ${r.output}` : ""}${missing}\n  ${r.argv.map(shownArg).join(" ")}\n  interactive: ${r.interactive_argv.map(shownArg).join(" ")}\n`,
        );
      }
    });

  registerPlanCommand(
    program,
    io,
    (c) => {
      code = c;
    },
    (file, o) => runCommand(file, { verify: true, schedule: "eager", ...o }, io),
  );
  registerScaleCommands(program, io, (c) => {
    code = c;
  });
  registerOperatorCommands(program, io, (c) => {
    code = c;
  });
  registerReportCommand(program, io);
  registerServeCommand(program, io, (c) => (code = c));
  registerWatchCommand(program, io, (c) => {
    code = c;
  });
  registerMcpCommand(program, io, (c) => {
    code = c;
  });

  try {
    await program.parseAsync(argv.slice(2), { from: "user" });
    return code;
  } catch (error) {
    return reportError(error, io, debug);
  }
}

/** One argument as a shell would need it to be typed: empty and spaced ones quoted. */
function shownArg(arg: string): string {
  return arg === "" || /[\s"'$`\\]/.test(arg) ? JSON.stringify(arg) : arg;
}

function backendOption(): Option {
  return new Option(
    "--backend <kind>",
    "where tasks run: local (this host's tmux) or bullmq (workers on any host, through Redis; docs/SCALING.md)",
  ).choices(["local", "bullmq"]);
}

interface DaemonFlags extends BackendFlags {
  home: string;
  config?: string;
  maxRuns?: number;
  maxParallel?: number;
}

interface RunFlags extends BackendFlags {
  config?: string;
  out?: string;
  dryRun?: boolean;
  verify: boolean;
  maxParallel?: number;
  schedule: "eager" | "waves";
  failFast?: boolean;
  keepSessions?: boolean;
  clean?: boolean;
  keepBranches?: boolean;
  allowDirty?: boolean;
  wait?: boolean;
  json?: boolean;
  debug?: boolean;
  baseDir?: string;
  startedFile?: string;
}

async function daemonCommand(o: DaemonFlags, io: Io): Promise<number> {
  const layout = homeLayout(resolvePath(io.cwd, o.home));
  const { config } = await loadConfig(o.config, io.env, io.cwd);
  const secretNames = Object.keys(io.env).filter((name) =>
    isSecretName(name, config.secret_name_fragments, config.secret_env),
  );
  const redactor = Redactor.from(config.redact, secretValuesOf(io.env, secretNames, config));
  const { log, close } = await daemonLogger({
    logsDir: layout.logs,
    redactor,
    tty: io.stderr.isTTY ? io.stderr : null,
  });
  const backend = backendChoice(o, io, () => log);
  const daemon = new Daemon({
    home: layout.root,
    backend: backend.choice,
    ...(o.config ? { configFile: resolvePath(io.cwd, o.config) } : {}),
    ...(o.maxRuns ? { maxRuns: o.maxRuns } : {}),
    ...(o.maxParallel ? { maxParallel: o.maxParallel } : {}),
    env: io.env,
    log,
    ...(io.fault ? { fault: io.fault } : {}),
  });
  let stop: () => void = () => {};
  const stopped = new Promise<void>((resolve) => {
    stop = resolve;
  });
  const onSignal = (signal: NodeJS.Signals): void => {
    log.info({ signal }, "signal received");
    stop();
  };
  process.on("SIGINT", onSignal);
  process.on("SIGTERM", onSignal);
  try {
    await daemon.start();
    io.stderr.write(
      `termorch daemon: watching ${layout.inbox} (answers in ${layout.outbox}, log in ${layout.logs}/termorch.log)\n`,
    );
    await stopped;
    await daemon.stop();
    return ExitCode.ok;
  } finally {
    process.off("SIGINT", onSignal);
    process.off("SIGTERM", onSignal);
    await backend.close();
    await close();
  }
}

async function runCommand(file: string, o: RunFlags, io: Io): Promise<number> {
  if (o.keepSessions && o.clean) {
    throw new InputError(
      [{ message: "--keep-sessions and --clean contradict each other" }],
      "Pass one of them.",
    );
  }
  return drive(io, o, (common) =>
    runAssignments({
      ...common,
      assignmentsFile: file,
      ...(o.config ? { configFile: o.config } : {}),
      ...(o.out ? { outDir: o.out } : {}),
      ...(o.baseDir ? { baseDir: o.baseDir } : {}),
      overrides: {
        ...(o.dryRun ? { dryRun: true } : {}),
        ...(o.verify === false ? { verify: false } : {}),
        ...(o.maxParallel ? { maxParallel: o.maxParallel } : {}),
        schedule: o.schedule,
        failFast: o.failFast ?? false,
        sessions: o.keepSessions ? "keep" : o.clean ? "clean" : "default",
        keepBranches: o.keepBranches ?? false,
        allowDirty: o.allowDirty ?? false,
      },
    }),
  );
}

/**
 * Runs a run-driving command (`run`, `resume`) with what they share: SIGINT/SIGTERM cancel
 * (the report is still written), live progress on a TTY, the report or a summary at the end.
 */
async function drive(
  io: Io,
  o: { json?: boolean; debug?: boolean; wait?: boolean; startedFile?: string } & BackendFlags,
  start: (common: DriveOptions) => Promise<RunResult | DetachedResult>,
): Promise<number> {
  const controller = new AbortController();
  const onSignal = (signal: NodeJS.Signals): void => {
    if (!controller.signal.aborted)
      io.stderr.write(`\ntermorch: ${signal} received: cancelling running tasks, writing the report...\n`);
    controller.abort();
  };
  process.on("SIGINT", onSignal);
  process.on("SIGTERM", onSignal);
  const tty = io.stderr.isTTY === true && !o.json;
  let lastLine = "";
  const started = Date.now();
  const redraw = (): void => {
    if (lastLine)
      io.stderr.write(
        `\r\x1b[2K${lastLine.replace(/^\[[^\]]*\]/, `[${((Date.now() - started) / 1000).toFixed(1)}s]`)}`,
      );
  };
  const ticker = tty ? setInterval(redraw, 1000) : null;
  ticker?.unref();
  // Like the daemon's log: secrets of termorch's own environment always, the run's own
  // (its env_vars, configured patterns) once it has planned.
  const own = environmentRedactor(io.env);
  let run: Redactor | null = null;
  const redact = (text: string): string => (run ? run.redact(own.redact(text)) : own.redact(text));
  const logger = terminalLogger(io.stderr, o.debug ? "debug" : "error", redact);
  const backend = backendChoice(o, io, () => logger);
  try {
    const result = await start({
      wait: o.wait ?? false,
      signal: controller.signal,
      env: io.env,
      cwd: io.cwd,
      ...(io.fault ? { seams: { fault: io.fault } } : {}),
      backend: backend.choice,
      logger,
      hooks: {
        onNotice: (message) => io.stderr.write(`termorch: warning: ${message}\n`),
        onStart: (info) => {
          run = info.redactor;
          if (!o.json) io.stderr.write(startBanner(info));
          if (o.startedFile) {
            const started: DriverStarted = {
              run_id: info.runId,
              run_dir: info.runDir,
              pid: process.pid,
              tasks: info.tasks,
            };
            writeFileAtomicSync(resolvePath(io.cwd, o.startedFile), JSON.stringify(started), 0o600, false);
          }
        },
        onProgress: (tasks, elapsed) => {
          if (!tty) return;
          lastLine = progressLine(tasks, elapsed);
          io.stderr.write(`\r\x1b[2K${lastLine}`);
        },
      },
    });
    if (tty && lastLine) io.stderr.write("\n");
    if ("detached" in result) {
      io.stderr.write(
        `termorch: run ${result.runId} detached; resume it with: termorch resume ${result.runDir}\n`,
      );
      return ExitCode.interrupted;
    }
    if (o.json) io.stdout.write(`${JSON.stringify(result.report, null, 2)}\n`);
    else io.stderr.write(summary(result));
    return result.exitCode;
  } finally {
    if (ticker) clearInterval(ticker);
    process.off("SIGINT", onSignal);
    process.off("SIGTERM", onSignal);
    await backend.close();
  }
}

/** `1 task in 1 wave`, `2 tasks in 3 waves`. */
function tasksInWaves(tasks: number, waves: number): string {
  return `${plural(tasks, "task")} in ${plural(waves, "wave")}`;
}

function plural(n: number, word: string): string {
  return `${n} ${word}${n === 1 ? "" : "s"}`;
}

function startBanner(info: StartInfo): string {
  // A dry run has one header: the summary's, printed with its waves and argv.
  if (info.dryRun) return "";
  return [
    `termorch: ${info.resumed ? "resuming" : "run"} ${info.runId}: ${tasksInWaves(info.tasks, info.waves)}`,
    ...(info.renamedFrom
      ? [
          `  run id ${info.renamedFrom} is taken (an earlier run's kept branches, worktrees, sessions or files), so this run is ${info.runId}`,
        ]
      : []),
    ...(info.keptApartFrom
      ? [
          `  run directory: ${info.runDir} (${info.keptApartFrom} is inside a git work tree, so the run's files are kept in .termorch/ there, which git ignores)`,
        ]
      : []),
    `  status files: ${info.runDir}/status/   logs: ${info.runDir}/logs/   artifacts: ${info.runDir}/artifacts/`,
    info.hosts
      ? `  tasks run on workers (${info.hosts}); where each runs and how to watch it: termorch status ${info.runId}`
      : `  watch a task live: tmux -L ${info.socket} attach -r -t =${info.sessionPrefix}<task_id>   (list: tmux -L ${info.socket} ls)`,
    "",
  ].join("\n");
}

function summary(result: RunResult): string {
  const { report, reportPath: path, keptSessions = [], notWritten, htmlPath } = result;
  const lines: string[] = [];
  const ok = report.tasks.filter((t) => t.status === "success").length;
  if (report.error) {
    lines.push(
      `termorch: ${report.error.kind === "invalid_input" ? "invalid input" : report.error.kind}:`,
      ...visible(report.error.message)
        .split("\n")
        .map((l) => `  ${l}`),
    );
    if (report.error.hint) lines.push(`  ${report.error.hint}`);
  } else if (report.dry_run) {
    lines.push(
      `termorch: dry run of ${report.run_id}: ${tasksInWaves(report.tasks.length, report.waves.length)} (nothing started)`,
    );
    for (const [i, w] of report.waves.entries()) lines.push(`  wave ${i + 1}: ${w.join(", ")}`);
    for (const t of report.tasks) {
      lines.push(`  ${t.id}: ${JSON.stringify(t.argv)}`);
      // Each later attempt's, as escalation runs them (the last one for every further attempt).
      const later = t.escalation ?? [];
      for (const [i, e] of later.entries())
        lines.push(
          `    attempt ${i + 2}${i === later.length - 1 ? " on" : ""} (${e.agent}): ${JSON.stringify(e.argv)}`,
        );
    }
  } else {
    lines.push(
      `termorch: run ${report.run_id}: ${ok}/${plural(report.tasks.length, "task")} succeeded in ${(report.summary.metrics?.wall_time_ms ?? 0) / 1000}s; merge ${report.merge.result}${report.merge.reason ? ` (${report.merge.reason})` : ""}`,
    );
    if (report.stopped)
      lines.push(
        `  stopped at its wave boundary (${report.stopped.reason}); its session handoff: ${join(result.runDir, report.stopped.handoff)}`,
      );
    for (const t of report.tasks.filter((x) => x.status !== "success")) {
      // The log that holds the agent's output (stderr, or stdout when only that has text; a tty
      // agent's terminal transcript): its name says which.
      const log = t.output_log ? `; output: ${t.output_log}` : "";
      lines.push(
        `  ${t.id}: ${t.status} (${t.reason}${t.detail ? `: ${t.detail}` : ""})${agentSaid(t)}${log}`,
      );
    }
    // Only sessions still alive: --clean closed them all, a lost task's session is gone.
    if (keptSessions.length && report.tmux_socket)
      lines.push(
        `  kept for inspection: ${keptSessions.map((s) => `tmux -L ${report.tmux_socket} attach -t =${s}`).join("; ")}`,
      );
    for (const c of report.summary.conflicts)
      lines.push(`  conflict between ${c.tasks.join(", ")} in ${c.files.join(", ")}: ${c.detail}`);
    // What a bisect of the red run-level gate found, and what the gate said there.
    const culprit = report.merge.culprit;
    if (culprit)
      lines.push(
        `  ${culprit.task}'s merge turned ${culprit.gate} red (bisect: ${culprit.gate_runs} gate runs)${culprit.fixed === true ? "; a new attempt of it fixed that" : culprit.fixed === false ? "; its new attempts did not fix it" : ""}${culprit.fixed === true ? "" : `; the gate's output ends: ${lastLine(culprit.output_tail)}`}`,
      );
    // What a halt leaves to do: each left-out task's file and the command that redoes it.
    for (const step of redoSteps(result.runDir, report.merge.redo_assignments))
      lines.push(
        `  to redo ${step.task} on top of what merged cleanly (its conflict: ${step.conflict}):`,
        `    ${step.command}`,
      );
  }
  if (path) lines.push(`  report: ${path}${htmlPath ? `   page: ${htmlPath}` : ""}`);
  else if (notWritten) lines.push(`  report: ${notWritten}`);
  return `${lines.join("\n")}\n`;
}

/**
 * The error a failed task's CLI reported in its own output (an API's message, say), which its
 * logs' tail may not show: codex's stderr holds only its warnings. Empty when the detail says it already.
 */
function agentSaid(t: Report["tasks"][number]): string {
  const said = t.agent_result?.is_error ? t.agent_result.summary : null;
  if (!said || t.detail?.includes(said.slice(0, 200))) return "";
  const line = visible(said).replace(/\s+/g, " ").trim();
  return `; its agent said: ${line.length > 300 ? `${line.slice(0, 297)}...` : line}`;
}

function reportError(error: unknown, io: Io, debug: boolean): number {
  if (error instanceof CommanderError) {
    if (
      error.code === "commander.helpDisplayed" ||
      error.code === "commander.version" ||
      error.code === "commander.help"
    )
      return ExitCode.ok;
    return exitCodeOfKind.usage;
  }
  if (error instanceof TermorchError) {
    const label = error instanceof InputError ? "invalid input" : error.kind;
    io.stderr.write(
      `termorch: ${label}:\n${visible(error.message)
        .split("\n")
        .map((l) => `  ${l}`)
        .join("\n")}\n`,
    );
    if (error instanceof InputError) io.stderr.write(`  ${error.hint}\n`);
    if (debug && error.stack) io.stderr.write(`${error.stack}\n`);
    return error.exitCode;
  }
  io.stderr.write(
    `termorch: internal error: ${visible(error instanceof Error ? error.message : String(error))}\n`,
  );
  if (debug && error instanceof Error && error.stack) io.stderr.write(`${error.stack}\n`);
  else io.stderr.write("  (run again with --debug for the stack trace)\n");
  return exitCodeOfKind.internal;
}

/**
 * A message with the control characters it quotes from the input (an id, a path, a run id)
 * shown as \u escapes, as JSON writes them: printed raw, they would drive the terminal (colours,
 * its title, the clipboard) instead of showing what is wrong. Line breaks and tabs stay. A line
 * longer than MAX_LINE (a quoted 1 MB id or path) loses its middle: its start names the place,
 * its end what is wrong there.
 */
function visible(text: string): string {
  return text
    .split("\n")
    .map((line) =>
      line.length > MAX_LINE
        ? `${line.slice(0, MAX_LINE / 2)}…(${line.length - MAX_LINE} characters)…${line.slice(-MAX_LINE / 2)}`
        : line,
    )
    .join("\n")
    .replace(
      // biome-ignore lint/suspicious/noControlCharactersInRegex: finding them is the point
      /[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/g,
      (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`,
    );
}

const MAX_LINE = 2000;

function resolvePath(cwd: string, p: string): string {
  return p.startsWith("/") ? p : `${cwd}/${p}`;
}

/** The last non-empty line of a text (a gate's output tail), for a one-line summary. */
function lastLine(text: string): string {
  return (
    text
      .split("\n")
      .map((l) => l.trim())
      .filter(Boolean)
      .at(-1) ?? "(nothing)"
  );
}
