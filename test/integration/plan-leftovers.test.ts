// What a `termorch plan` killed with SIGKILL leaves (issue 39): its planner, still at work in its
// tmux session, and staging files beside --out. The next `termorch plan` ends the one and removes
// the others; a plan the user's --force had moved aside stays. Real tmux, git and processes.
import { existsSync, mkdirSync, readdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { execa } from "execa";
import { describe, expect, it } from "vitest";
import { BIN, cliEnv, TEST_TMP, termorch, testFile, tmuxSessions, waitFor } from "./harness.js";

const { socket, workspace } = testFile("plan-leftovers");

/** A planner that waits for `release` (it never comes), as a slow model would. */
const SLOW = ["bash", "-c", 'while [ ! -e "$RELEASE" ]; do sleep 0.1; done'];
/** A planner that writes a valid plan at once. */
const QUICK = [
  "bash",
  "-c",
  [
    "mkdir -p .termorch/plan/tasks && echo 'Write a.txt.' > .termorch/plan/tasks/a.md",
    `printf '{"tasks":[{"id":"a","agent":"quick","context_path":"tasks/a.md","allowed_paths":["a.txt"]}]}' > .termorch/plan/assignments.json`,
  ].join("; "),
];

/** The planning sessions' folder of this file's CLIs (their TMPDIR is TEST_TMP). */
const PLANS = join(TEST_TMP, `termorch-${process.getuid?.() ?? "user"}`, "plans");

/** Starts a `termorch plan` whose planner never ends, and SIGKILLs it once the planner runs. */
async function killedPlan(
  dir: string,
  repo: string,
): Promise<{ planner: string; objective: string; config: string }> {
  const config = join(dir, "config.json");
  writeFileSync(
    config,
    JSON.stringify({
      agents: {
        slow: { command: SLOW, env: { RELEASE: join(dir, "release") } },
        quick: { command: QUICK },
      },
      defaults: { sandbox: "off" },
    }),
  );
  const objective = join(dir, "OBJECTIVE.md");
  writeFileSync(objective, "Write a.txt.\n");
  const killed = execa(process.execPath, [BIN, "plan", objective, "--agent", "slow", "--config", config], {
    cwd: repo,
    env: cliEnv(socket),
    reject: false,
  });
  const planner = await waitFor(
    () => tmuxSessions(socket).find((s) => /^termorch-plan-.*-_review-planner$/.test(s)),
    30_000,
    "the slow planner's session",
  );
  killed.kill("SIGKILL");
  await killed;
  expect(tmuxSessions(socket)).toContain(planner);
  return { planner, objective, config };
}

describe("a termorch plan killed before its end", () => {
  it("leaves its planner and staging to the next termorch plan, which ends and removes them", async () => {
    const { dir, repo } = workspace({ git: true });
    const { planner, objective, config } = await killedPlan(dir, repo);
    // Staging of a planning whose process is gone, and a plan one had moved aside (the user's).
    const dead = "plan-zz-999999999";
    const stagedFile = join(repo, `.assignments.partial-${dead}.json`);
    const stagedDir = join(repo, `.assignments.plan.partial-${dead}`);
    const aside = join(repo, `.assignments.old-${dead}.json`);
    for (const f of [stagedFile, aside]) writeFileSync(f, "{}");
    mkdirSync(stagedDir);

    const r = await termorch(["plan", objective, "--agent", "quick", "--config", config], {
      socket,
      cwd: repo,
    });
    expect(r.exitCode, r.stderr).toBe(0);
    expect(tmuxSessions(socket)).not.toContain(planner);
    expect(existsSync(stagedFile)).toBe(false);
    expect(existsSync(stagedDir)).toBe(false);
    expect(existsSync(aside)).toBe(true);
    expect(existsSync(join(repo, "assignments.json"))).toBe(true);
  }, 90_000);

  it("leaves them to termorch clean too: the planner ended, its copy of the repository removed", async () => {
    const { dir, repo } = workspace({ git: true });
    const { planner } = await killedPlan(dir, repo);
    const id = /^termorch-(plan-[0-9a-z]+-\d+)-/.exec(planner)![1]!;
    expect(readdirSync(join(PLANS, id, "copy")).length).toBeGreaterThan(0);
    const r = await termorch(["clean"], { socket, cwd: repo });
    expect(r.exitCode, r.stderr).toBe(0);
    expect(r.stdout).toContain(`ended planner session ${planner}: its termorch plan was killed`);
    expect(r.stdout).toContain(
      `removed the copy of the repository a killed planning left in ${join(PLANS, id)}`,
    );
    expect(tmuxSessions(socket)).not.toContain(planner);
    expect(existsSync(join(PLANS, id, "copy"))).toBe(false);
    // Its session folder stays, its logs to read.
    expect(existsSync(join(PLANS, id, "logs"))).toBe(true);
  }, 90_000);
});
