// Input a run refuses before anything starts, driven through runAssignments with the fake runner
// and a workspace that is not a repository: exit 2, the problem named where it is, no attempt,
// and nothing written but the report. These cases used to start the built CLI each
// (test/integration/invalid and input-bytes); those files keep what needs the CLI (its message on
// stderr without a stack trace, `validate`, usage errors) or git (tracked and dirty files).
import { readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { Report } from "../../src/contract/report.js";
import { runAssignments } from "../../src/run/runner.js";
import { MiddleRun, middleTier, type TaskSpec } from "./harness.js";

let run: MiddleRun;

middleTier(() => run);

/** Every file and folder under `dir`, relative to it. */
function tree(dir: string, prefix = ""): string[] {
  return readdirSync(join(dir, prefix), { withFileTypes: true })
    .flatMap((e) => {
      const rel = prefix ? `${prefix}/${e.name}` : e.name;
      return e.isDirectory() ? [`${rel}/`, ...tree(dir, rel)] : [rel];
    })
    .sort();
}

/** Rewrites the run's assignments file through `change`. */
function editAssignments(
  change: (a: { tasks: Array<Record<string, unknown>>; [k: string]: unknown }) => void,
) {
  const a = JSON.parse(readFileSync(run.file, "utf8"));
  change(a);
  writeFileSync(run.file, JSON.stringify(a));
}

/**
 * Runs the file in-process and expects it refused: exit 2 with every pattern in the error's
 * message (what the CLI prints), no attempt launched, and nothing written but the report.
 */
async function refused(
  expected: RegExp[],
  opts: { env?: Record<string, string>; assignmentsFile?: string } = {},
): Promise<Report> {
  const before = tree(run.dir);
  const options = run.options();
  const result = await runAssignments({
    assignmentsFile: opts.assignmentsFile ?? run.file,
    ...options,
    env: { ...options.env, ...opts.env },
  });
  const report = run.report(result);
  expect(report.exit_code).toBe(2);
  expect(report.error?.kind).toBe("invalid_input");
  for (const re of expected) expect(report.error?.message).toMatch(re);
  expect(report.summary.completed).toBe(false);
  expect(run.host.attempts).toEqual([]);
  // No logs, status, artifacts, private folder or registry entry: only the report.
  expect(tree(run.dir)).toEqual([...before, "execution_report.json"].sort());
  expect(Report.parse(JSON.parse(readFileSync(join(run.dir, "execution_report.json"), "utf8")))).toEqual(
    report,
  );
  return report;
}

/** Removes the report of a refused run, so that the next refusal may write its own (it never overwrites one). */
const forgetReport = (): void => rmSync(join(run.dir, "execution_report.json"));

const one = (extra: Partial<TaskSpec> = {}): TaskSpec[] => [{ id: "A", ...extra }];

describe("invalid assignments: exit 2, the problem named where it is, nothing started", () => {
  it("a missing file", async () => {
    run = new MiddleRun(one());
    await refused([/nope\.json/, /not found/], { assignmentsFile: join(run.dir, "nope.json") });
  });

  it("malformed JSON", async () => {
    run = new MiddleRun(one());
    writeFileSync(run.file, '{ "tasks": [ }');
    await refused([/assignments\.json/, /not valid JSON/]);
  });

  it("an unknown key, with its field and task", async () => {
    run = new MiddleRun(one({ dependecies: [] }));
    await refused([/field tasks\[0\]/, /task A/, /unknown key "dependecies"/]);
  });

  it("a bad task id", async () => {
    run = new MiddleRun([{ id: "../evil" }]);
    await refused([/field tasks\[0\]\.id/, /must match/]);
  });

  it("a duplicate id", async () => {
    run = new MiddleRun([{ id: "A" }, { id: "A" }]);
    await refused([/field tasks\[1\]\.id/, /duplicate task id "A"/]);
  });

  it("an unknown dependency", async () => {
    run = new MiddleRun([{ id: "A", dependencies: ["ghost"] }]);
    await refused([/tasks\[0\]\.dependencies\[0\]/, /task A/, /unknown task "ghost"/]);
  });

  it("a cycle, named in order", async () => {
    run = new MiddleRun([
      { id: "A", dependencies: ["C"] },
      { id: "B", dependencies: ["A"] },
      { id: "C", dependencies: ["B"] },
    ]);
    await refused([/dependency cycle: A -> C -> B -> A/]);
  });

  it("a context_path escaping with ..", async () => {
    run = new MiddleRun(one({ context_path: "../outside.md" }));
    await refused([/tasks\[0\]\.context_path/, /outside the workspace/]);
  });

  it("a context_path escaping through a symlink", async () => {
    run = new MiddleRun(one({ context_path: "link/secret.md" }));
    writeFileSync(join(run.dir, "secret.md"), "x");
    symlinkSync(run.dir, join(run.dir, "ws", "link"));
    await refused([/tasks\[0\]\.context_path/, /symlink/]);
  });

  it("a missing context_path", async () => {
    run = new MiddleRun(one({ context_path: "ctx/none.md" }));
    await refused([/tasks\[0\]\.context_path/, /does not exist/]);
  });

  it("an unknown agent, and one named like an Object.prototype member", async () => {
    run = new MiddleRun([{ id: "A" }, { id: "B", agent: "constructor" }]);
    editAssignments((a) => {
      for (const t of a.tasks) delete t.command;
    });
    await refused([
      /tasks\[0\]\.agent, task A: unknown agent "fake"/,
      /tasks\[1\]\.agent, task B: unknown agent "constructor"/,
    ]);
  });

  it("a missing workspace", async () => {
    run = new MiddleRun(one(), { assignment: { environment: { workspace_dir: "nowhere" } } });
    await refused([/environment\.workspace_dir/, /not an existing directory/]);
  });

  it("allowed_paths outside the workspace", async () => {
    run = new MiddleRun(one({ allowed_paths: ["../x/**"] }));
    await refused([/allowed_paths\[0\]/, /inside the workspace/]);
  });

  it("a timeout too long for a timer", async () => {
    run = new MiddleRun(one({ timeout_s: 2592000 }));
    await refused([/tasks\[0\]\.timeout_s/, /at most 2147483 s/]);
  });

  it("a NUL byte in an environment value, in tests_cmd and in allowed_paths", async () => {
    run = new MiddleRun([
      { id: "A", env: { X: "a\u0000b" } },
      { id: "B", allowed_paths: ["src/\u0000"], success_criteria: { tests_cmd: "tr\u0000ue" } },
    ]);
    await refused([
      /tasks\[0\]\.env\.X/,
      /NUL byte/,
      /field tasks\[1\]\.allowed_paths\[0\], task B: must not contain a NUL byte/,
      /field tasks\[1\]\.success_criteria\.tests_cmd, task B: must not contain a NUL byte/,
    ]);
  });
});

describe("interactive-only settings: exit 2 naming the place", () => {
  for (const [what, task, message] of [
    ["done_when without interactive", { done_when: "x" }, /tasks\[0\]\.done_when/],
    ["waiting_after_s without interactive", { waiting_after_s: 3 }, /applies to interactive tasks only/],
    [
      "a done_when outside the worktree",
      { interactive: true, done_when: "../x" },
      /must be a path relative to the worktree/,
    ],
  ] as const) {
    it(what, async () => {
      run = new MiddleRun(one(task));
      await refused([message]);
    });
  }
});

describe("input that is not what it seems: exit 2 naming the place", () => {
  it("invalid UTF-8 in an assignments file, instead of running a changed command", async () => {
    run = new MiddleRun(one({ success_criteria: { tests_cmd: "trXue" } }));
    // "tr\x80ue": decoded leniently it became "tr\uFFFDue" and ran as something else.
    const bytes = Buffer.from(readFileSync(run.file, "utf8").replace("trXue", "tr\u0000ue"), "utf8");
    const at = bytes.indexOf(0);
    bytes[at] = 0x80;
    writeFileSync(run.file, bytes);
    const line = bytes.subarray(0, at).toString("latin1").split("\n").length;
    await refused([
      new RegExp(`assignments\\.json: not valid UTF-8: byte 0x80 at line ${line}, byte`),
      new RegExp(`\\(offset ${at} in the file\\)`),
    ]);
  });

  it("a lone surrogate escape (\\ud800), which would run as U+FFFD; every such string named", async () => {
    run = new MiddleRun(one({ success_criteria: { tests_cmd: "echo PAIRED" } }));
    const original = readFileSync(run.file, "utf8");
    writeFileSync(run.file, original.replace("PAIRED", "x\\ud800y"));
    await refused([
      /field tasks\[0\]\.success_criteria\.tests_cmd: a \\uD800-\\uDFFF escape/,
      /surrogate pair/,
    ]);
    // A key with its surrogate escaped.
    const both = JSON.parse(original);
    both.tasks[0].env = { "X\udc00": "v", Y: "\ud800" };
    writeFileSync(run.file, JSON.stringify(both));
    forgetReport();
    await refused([/field tasks\[0\]\.env\.X\\uDC00: a /, /field tasks\[0\]\.env\.Y: a /]);
  });

  it("a UTF-16 assignments file, with or without its byte order mark", async () => {
    run = new MiddleRun(one());
    const text = readFileSync(run.file, "utf8");
    writeFileSync(run.file, Buffer.concat([Buffer.from([0xff, 0xfe]), Buffer.from(text, "utf16le")]));
    await refused([/assignments\.json: encoded as UTF-16/]);
    writeFileSync(run.file, Buffer.from(text, "utf16le"));
    forgetReport();
    await refused([/NUL byte at line 1.*UTF-16/]);
  });
});

describe("a config that is not what it seems: exit 2 naming the place", () => {
  it("a NUL byte in a redact pattern (was exit 70)", async () => {
    run = new MiddleRun(one(), { config: { redact: ["fine-[0-9]+", "a\u0000b"] } });
    await refused([/config\.json, field redact\[1\]: must not contain a NUL byte/]);
  });

  it("invalid UTF-8 in a config file", async () => {
    run = new MiddleRun(one());
    writeFileSync(
      run.configFile,
      Buffer.concat([Buffer.from('{"redact": ["caf'), Buffer.from([0xe9]), Buffer.from('"]}')]),
    );
    await refused([/config\.json: not valid UTF-8: byte 0xE9 at line 1, byte 17 \(offset 16/]);
  });

  for (const name of [".", "..", "-x", ".hidden", "a/b", "x".repeat(65)]) {
    it(`the tmux socket name ${JSON.stringify(name.slice(0, 8))}, in the config and in TERMORCH_TMUX_SOCKET`, async () => {
      run = new MiddleRun(one(), { config: { tmux: { socket: name } } });
      await refused([/config\.json, field tmux\.socket: must be 1-64 letters/]);
      writeFileSync(run.configFile, "{}");
      forgetReport();
      await refused([/environment variable TERMORCH_TMUX_SOCKET=/, /not \. or \.\./], {
        env: { TERMORCH_TMUX_SOCKET: name },
      });
    });
  }
});
