import { describe, expect, it } from "vitest";
import {
  EnvironmentError,
  type ErrorKind,
  ExitCode,
  exitCodeOfKind,
  InputError,
  Interrupted,
  LockedError,
  PlanFailed,
  unreachable,
} from "../../src/errors.js";
import { GitError, GitVersionError } from "../../src/git/errors.js";
import { buildReport, skippedMerge } from "../../src/report/build.js";
import { LaunchError, TmuxEnvironmentError, TmuxError } from "../../src/tmux/errors.js";

// README's table: 0 ok, 1 failed, 2 invalid input or usage, 3 conflict, 4 locked, 5 stopped at a boundary, 70 internal, 130 interrupted.
const expected: Record<ErrorKind, number> = {
  invalid_input: 2,
  usage: 2,
  environment: 2,
  locked: 4,
  git: 70,
  tmux: 70,
  launch_error: 70,
  plan_failed: 1,
  interrupted: 130,
  internal: 70,
};

function errorReport(kind: ErrorKind, cancelled = false) {
  return buildReport({
    runId: null,
    startedAt: 0,
    finishedAt: 1,
    dryRun: false,
    waves: [],
    tasks: [],
    merge: skippedMerge("the run did not start"),
    validation: "skipped",
    cancelled,
    stopped: null,
    error: { kind, message: "m", hint: null, problems: [] },
    workspace: null,
    tmuxSocket: null,
    criticalPath: [],
    maxParallel: 0,
    peakParallelism: 0,
  });
}

describe("exit code table", () => {
  it("gives each error kind README's exit code", () => {
    expect(exitCodeOfKind).toEqual(expected);
    expect(ExitCode).toEqual({
      ok: 0,
      failed: 1,
      invalid: 2,
      conflict: 3,
      locked: 4,
      stopped: 5,
      internal: 70,
      interrupted: 130,
    });
  });

  it("is what every error class answers", () => {
    const errors = [
      new InputError([{ message: "bad" }]),
      new EnvironmentError("no tmux"),
      new LockedError("held"),
      new GitError("git broke"),
      new GitVersionError("old git", "2.0", "2.38"),
      new TmuxError("tmux broke", [], "", 1),
      new TmuxEnvironmentError("no perl"),
      new LaunchError("no launch", "setup", "s"),
      new PlanFailed("no valid plan"),
      new Interrupted("SIGINT"),
    ];
    for (const e of errors) expect([e.kind, e.exitCode]).toEqual([e.kind, expected[e.kind]]);
  });

  it("is what the report's exit_code says for an error", () => {
    for (const kind of Object.keys(expected) as ErrorKind[])
      expect([kind, errorReport(kind).exit_code]).toEqual([kind, expected[kind]]);
  });

  it("reports an unexpected failure while cancelling as interrupted, never a user error", () => {
    expect(errorReport("internal", true).exit_code).toBe(130);
    expect(errorReport("git", true).exit_code).toBe(130);
    expect(errorReport("invalid_input", true).exit_code).toBe(2);
    expect(errorReport("locked", true).exit_code).toBe(4);
  });

  it("unreachable throws on a value outside the union", () => {
    expect(() => unreachable("surprise" as never)).toThrow(/unexpected value "surprise"/);
  });
});
