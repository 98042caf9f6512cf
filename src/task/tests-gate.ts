import { mkdir } from "node:fs/promises";
import { join } from "node:path";
import type { Gate } from "../contract/report.js";
import { errorText } from "../errors.js";
import type { SandboxSetting } from "../sandbox/policy.js";
import { runShellGate } from "../shell/gate.js";
import { gatePoint } from "./faults.js";
import type { Ports } from "./ports.js";
import type { RunPlan } from "./run-plan.js";
import { endSandbox, type SandboxedWork, sandboxFor } from "./sandbox.js";
import type { RunStop } from "./stop.js";

/** How a tests_cmd ended, for its feedback: its logs are relative to the run directory. */
export interface TestsRan {
  command: string;
  exitCode: number | null;
  how: string;
  logs: [stdout: string, stderr: string];
}

/**
 * A `tests_cmd` gate (a task's or the run's): runs the command line with `sh -c` in `cwd`,
 * logs to `logs/<logName>-<ts>.out/.err`, and returns the gate. Cancel ends it; a detach (daemon
 * shutdown) ends it too and answers "detached", so the resumed run checks again. A gate a dead driver
 * left is ended before the resumed run starts it again (runShellGate's `record`).
 */
export async function testsGate(
  run: Pick<
    RunPlan,
    "runDir" | "privateDir" | "fault" | "killGraceMs" | "maxLogBytes" | "processEnv" | "git"
  >,
  ports: Pick<Ports, "logNames" | "now" | "redactor" | "runner">,
  stop: RunStop,
  o: {
    name: string;
    command: string;
    cwd: string;
    env: Record<string, string>;
    timeoutS: number | undefined;
    logName: string;
    /** The task whose gate this is, and its attempt; none for a run-level gate. */
    taskId?: string;
    attempt?: number;
    /** Run in this sandbox (a sandboxed task's set-up and tests run where its agent did). */
    sandbox?: { setting: SandboxSetting; work: SandboxedWork };
    /** Told how the command ended and where its logs are (what a feedback section quotes). */
    onEnd?: (ran: TestsRan) => void;
  },
): Promise<Gate | "detached"> {
  const stem = ports.logNames.next(o.logName, ports.now());
  // Per gate, not per attempt: a resumed run's gate must find the one its dead driver left.
  const records = join(run.privateDir, "gates");
  await mkdir(records, { recursive: true, mode: 0o700 });
  gatePoint(run.fault, o.taskId, join(records, `${o.logName}.json`), o.attempt);
  const box = o.sandbox ? join(run.privateDir, "sandbox", "gates", o.logName) : null;
  let wrap: string[] | undefined;
  if (o.sandbox && box)
    try {
      wrap = await sandboxFor(run, ports, o.sandbox.setting, o.sandbox.work, box);
    } catch (error) {
      const detail = `could not set up its sandbox: ${ports.redactor.redact(errorText(error))}`;
      return { name: o.name, required: true, passed: false, detail };
    }
  const result = await runShellGate({
    command: o.command,
    cwd: o.cwd,
    env: o.env,
    timeoutMs: o.timeoutS === undefined ? null : o.timeoutS * 1000,
    killGraceMs: run.killGraceMs,
    stdoutLog: join(run.runDir, "logs", `${stem}.out`),
    stderrLog: join(run.runDir, "logs", `${stem}.err`),
    redactor: ports.redactor,
    maxLogBytes: run.maxLogBytes,
    record: join(records, `${o.logName}.json`),
    signal: stop.signal,
    ...(wrap ? { wrap } : {}),
  });
  // What it wrote in its view of the repository is dropped; its worktree's .git is put back.
  const note =
    box && o.sandbox ? await endSandbox(box, { worktree: o.sandbox.work.worktree, branch: null }) : null;
  if (stop.detaching) return "detached";
  // A gate whose status was lost never passes: its command may well have failed.
  const passed = result.statusLost === null && result.exitCode === 0 && !result.timedOut;
  const how = result.timedOut
    ? "timed out"
    : result.statusLost !== null
      ? `its exit status was lost (${result.statusLost})`
      : result.signal
        ? `killed by ${result.signal}`
        : `exit code ${result.exitCode}`;
  o.onEnd?.({
    command: o.command,
    exitCode: result.timedOut || result.statusLost !== null || result.signal ? null : result.exitCode,
    how,
    logs: [`logs/${stem}.out`, `logs/${stem}.err`],
  });
  return {
    name: o.name,
    required: true,
    passed,
    detail: `${how}; output in logs/${stem}.out and logs/${stem}.err${note ? `; ${ports.redactor.redact(note)}` : ""}`,
  };
}
