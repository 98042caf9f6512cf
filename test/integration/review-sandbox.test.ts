// A reviewer in a sandboxed task (issue 38): its copy of the task's work is bound read-only, so
// its write fails there and only its verdict (termorch's folder in the copy) can be written; the
// task's own work merges as it was. And termorch plan's planner (issue 39), which runs as a
// reviewer does, in a workspace inside its repository. Real bubblewrap, tmux, git.
import { execFileSync } from "node:child_process";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
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

/** A planner that says where it works and whether it could write there, then writes a valid plan. */
const PLANNER = [
  "bash",
  "-c",
  [
    'echo "cwd: $PWD"',
    'if (echo mine > p.txt) 2>/dev/null; then echo "write: allowed"; else echo "write: refused"; fi',
    "mkdir -p .termorch/plan/tasks && echo 'Write a.txt.' > .termorch/plan/tasks/a.md",
    `printf '{"tasks":[{"id":"a","agent":"rev","context_path":"tasks/a.md","allowed_paths":["a.txt"]}]}' > .termorch/plan/assignments.json`,
  ].join("; "),
];

describe("termorch plan's planner in its own sandbox", () => {
  it("works at the workspace's place in its copy (a folder of the repository), read-only there but for its plan folder", async () => {
    const { dir, repo } = workspace({ git: true });
    const sub = join(repo, "pkg");
    mkdirSync(sub);
    writeFileSync(join(sub, "p.txt"), "p\n");
    execFileSync("git", ["-C", repo, "add", "-A"]);
    execFileSync("git", [
      "-C",
      repo,
      "-c",
      "user.name=t",
      "-c",
      "user.email=t@t",
      "commit",
      "-q",
      "-m",
      "pkg",
    ]);
    const config = join(dir, "config.json");
    writeFileSync(config, JSON.stringify({ agents: { rev: { command: PLANNER } } }));
    const objective = join(dir, "OBJECTIVE.md");
    writeFileSync(objective, "Write a.txt.\n");
    const r = await termorch(["plan", objective, "--agent", "rev", "--config", config, "--json"], {
      socket,
      cwd: sub,
    });
    expect(r.exitCode, r.stderr).toBe(0);
    const answer = JSON.parse(r.stdout) as { file: string; planner: { logs: string } };
    expect(answer.file).toBe(join(sub, "assignments.json"));
    const events = readFileSync(join(answer.planner.logs, "events.jsonl"), "utf8");
    const started = JSON.parse(events.split("\n").find((l) => l.includes('"plan.planner_started"'))!).data;
    expect(started.sandboxed).toBe(true);
    const out = readFileSync(join(answer.planner.logs, started.logs.stdout), "utf8");
    expect(out).toMatch(/cwd: \S+\/pkg\n/);
    expect(out).toContain("write: refused");
    expect(readFileSync(join(sub, "p.txt"), "utf8")).toBe("p\n");
    expect(JSON.parse(readFileSync(answer.file, "utf8")).tasks[0].context_path).toBe(
      "assignments.plan/tasks/a.md",
    );
  }, 90_000);
});
