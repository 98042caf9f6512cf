// A reviewer in a sandboxed task (issue 38): its copy of the task's work is bound read-only, so
// its write fails there and only its verdict (termorch's folder in the copy) can be written; the
// task's own work merges as it was. Real bubblewrap, tmux, git.
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { readReport, termorch, testFile, writeAssignments } from "./harness.js";

const { socket, workspace } = testFile("review-sandbox");

/** A reviewer that tries to change the work, says whether it could, then approves. */
const REVIEWER = [
  "bash",
  "-c",
  'if (echo theirs > t.txt) 2>/dev/null; then echo "write: allowed"; else echo "write: refused"; fi; printf \'{"verdict":"approve","summary":"ok"}\' > "$TERMORCH_VERDICT"',
];

describe("a sandboxed task's reviewer", () => {
  it("reads the work read-only: its write is refused, its verdict is taken, the task's work merges", async () => {
    const { dir, repo } = workspace({ git: true });
    const config = join(dir, "config.json");
    writeFileSync(config, JSON.stringify({ agents: { rev: { command: REVIEWER } } }));
    const file = writeAssignments(dir, [
      {
        id: "T",
        env: { WRITE: "t.txt=mine" },
        sandbox: { network: "none" },
        success_criteria: { review: "rev" },
      },
    ]);
    const r = await termorch(["run", file, "--config", config], { socket });
    expect(r.exitCode, r.stderr).toBe(0);
    const t = readReport(dir).tasks[0]!;
    expect(t.attempt_history![0]!.review).toMatchObject({ verdict: "approve", discarded: [] });
    const started = readFileSync(join(dir, "events.jsonl"), "utf8")
      .split("\n")
      .filter((l) => l.includes('"task.review_started"'))
      .map((l) => JSON.parse(l).data.logs.stdout as string);
    expect(readFileSync(join(dir, started[0]!), "utf8")).toContain("write: refused");
    expect(readFileSync(join(repo, "t.txt"), "utf8")).toBe("mine\n");
  }, 90_000);
});
