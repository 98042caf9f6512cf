// What a preset's CLI prints decides its task's outcome, driven through runAssignments with the
// fake runner: the fake attempt writes the CLI's documented output to its logs and exits. An error
// the CLI reports in its JSON while exiting 0 fails the task (agent_error); an error it reports
// with a failing exit is kept in agent_result. These used to run the stand-in CLIs through the
// built CLI (test/integration/presets); that file keeps the flags, prompts and edits of each.
import { writeFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { MiddleRun, middleTier } from "./harness.js";

let run: MiddleRun;

middleTier(() => run);

/** A run of one task of `agent` (a preset: no command of its own). */
const presetRun = (agent: string): MiddleRun => new MiddleRun([{ id: "t", agent, command: undefined }]);

// claude -p --output-format json, when its API failed: subtype "success", is_error true, exit 0.
const CLAUDE_API_ERROR = {
  type: "result",
  subtype: "success",
  is_error: true,
  duration_ms: 4213,
  num_turns: 1,
  api_error_status: 500,
  result: 'API Error: 500 {"type":"error","error":{"type":"api_error","message":"Internal server error"}}',
  session_id: "5b1c2f9e-0000-4000-8000-000000000001",
  total_cost_usd: 0.0123,
  usage: { input_tokens: 100, cache_creation_input_tokens: 0, cache_read_input_tokens: 0, output_tokens: 10 },
};

// gemini -p -o json, when its API failed: the error object on stderr, exit 1.
const GEMINI_API_ERROR = `[ERROR] ${JSON.stringify(
  {
    session_id: "5b1c2f9e-0000-4000-8000-000000000002",
    error: { type: "Error", message: "[API Error: 500 Internal error encountered.]", code: 500 },
  },
  null,
  2,
)}\n`;

describe("a preset CLI's own result", () => {
  it("fails a task whose CLI reports an error in its JSON while exiting 0, with reason agent_error", async () => {
    run = presetRun("claude");
    const report = await run.reportWithPresets((attempt) => {
      writeFileSync(attempt.spec.stdoutLog, `${JSON.stringify(CLAUDE_API_ERROR)}\n`);
      attempt.exit(0);
    });
    expect(report.exit_code).toBe(1);
    expect(report.tasks[0]).toMatchObject({
      status: "failed",
      reason: "agent_error",
      exit_code: 0,
      agent_result: { is_error: true },
    });
  });

  it("keeps the error a CLI reports with a failing exit (gemini's, on stderr) in agent_result", async () => {
    run = presetRun("gemini");
    const report = await run.reportWithPresets((attempt) => {
      writeFileSync(attempt.spec.stderrLog, GEMINI_API_ERROR);
      attempt.exit(1);
    });
    expect(report.exit_code).toBe(1);
    expect(report.tasks[0]).toMatchObject({
      status: "failed",
      reason: "exit_code",
      agent_result: { is_error: true, summary: expect.stringContaining("API Error: 500") },
    });
  });

  it("takes a CLI's result that reports no error as the agent's success, with its usage", async () => {
    run = presetRun("claude");
    const report = await run.reportWithPresets((attempt) => {
      writeFileSync(
        attempt.spec.stdoutLog,
        `${JSON.stringify({ ...CLAUDE_API_ERROR, is_error: false, api_error_status: undefined, result: "Done." })}\n`,
      );
      attempt.exit(0);
    });
    expect(report.exit_code).toBe(0);
    expect(report.tasks[0]).toMatchObject({
      status: "success",
      reason: null,
      agent_result: { is_error: false, summary: "Done." },
      usage: { cost_usd: 0.0123 },
    });
  });
});
