// The feedback section names logs where an agent in its worktree finds them; its JSON block keeps
// the report's run-relative paths, as the block's schema says.
import { describe, expect, it } from "vitest";
import { type FeedbackBlock, FeedbackBlock as Schema } from "../../src/contract/feedback-block.js";
import { FEEDBACK_BLOCK_INFO, feedbackSection } from "../../src/task/feedback.js";

const out = "logs/tests-F-20261206T082039298Z.out";
const err = "logs/tests-F-20261206T082039298Z.err";

const facts: FeedbackBlock = Schema.parse({
  schema_version: 1,
  task: "F",
  attempt: 1,
  agent: "claude",
  reason: "validation",
  detail: `tests_cmd failed (exit code 1; output in ${out} and ${err})`,
  failed_gates: [
    { name: "tests_cmd", detail: "exit code 1" },
    { name: "setup", detail: "exit code 2 (logs/setup-F-1.out)" },
  ],
  tests: {
    command: "npm test",
    exit_code: 1,
    how: "exit code 1",
    failure_lines: ["FAIL greeting"],
    tail: "FAIL greeting",
    truncated: false,
    logs: [out, err],
  },
  missing_artifacts: [],
  handoff: null,
  outside_allowed_paths: [],
  timeout_s: null,
  agent_error: null,
  screen: null,
  secrets: [],
  decision: null,
  summary: null,
  changed_files: [],
  next_starts_from: "last_work",
});

const blockOf = (section: string): FeedbackBlock =>
  JSON.parse(section.split(`\`\`\`${FEEDBACK_BLOCK_INFO}\n`)[1]!.split("\n```")[0]!) as FeedbackBlock;

describe("feedbackSection", () => {
  it("names every log by its absolute path in the prose: the first line, the output, other gates", () => {
    const section = feedbackSection(facts, { runDir: "/runs/r1" });
    const prose = section.split(`\`\`\`${FEEDBACK_BLOCK_INFO}`)[0]!;
    expect(prose).toContain(`output in /runs/r1/${out} and /runs/r1/${err})`);
    expect(prose).toContain(`Its output (/runs/r1/${out}, /runs/r1/${err}):`);
    expect(prose).toContain("- setup: exit code 2 (/runs/r1/logs/setup-F-1.out)");
    expect(prose).not.toMatch(/[\s(]logs\//);
    expect(blockOf(section).detail).toBe(facts.detail);
    expect(blockOf(section).tests!.logs).toEqual([out, err]);
  });

  it("without the run's folder, leaves the paths as they are", () => {
    expect(feedbackSection(facts)).toContain(`output in ${out} and ${err})`);
  });
});
