import { execFileSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { execa } from "execa";
import { describe, expect, it } from "vitest";
import {
  BIN,
  cliEnv,
  ROOT,
  readReport,
  termorch,
  testFile,
  tmuxSessions,
  waitFor,
  writeAssignments,
} from "./harness.js";

const { socket, workspace } = testFile("run-summary");

const statusOf = (dir: string, id: string, state: string): { session: string } =>
  JSON.parse(readFileSync(join(dir, "status", `${id}.${state}`), "utf8"));

const windowNames = (session: string): string[] =>
  execFileSync("tmux", ["-L", socket, "list-windows", "-t", `=${session}`, "-F", "#{window_name}"], {
    encoding: "utf8",
    env: { ...process.env, TMUX: "" },
  })
    .split("\n")
    .filter(Boolean);

describe("kept for inspection", () => {
  it("names the live session of a failed task, whose window is named after the task, and a skipped task's root failure", async () => {
    const { dir } = workspace();
    // The summary's lists and details are the middle tier's (test/middle/summary.test.ts); here
    // the CLI's lines, and the session tmux keeps.
    const file = writeAssignments(dir, [
      { id: "broken", env: { EXIT: "3", SAY: "x" } },
      { id: "mid", dependencies: ["broken"] },
      { id: "alpha", dependencies: ["mid"] },
    ]);
    const result = await termorch(["run", file], { socket });
    expect(result.exitCode).toBe(1);
    const session = readReport(dir).tasks[0]!.session!;
    expect(result.stderr).toContain(`kept for inspection: tmux -L ${socket} attach -t =${session}`);
    expect(result.stderr).toContain(
      "alpha: skipped (dependency_failed: a dependency failed: broken (exit_code) via mid)",
    );
    expect(result.stderr).not.toContain("()");
    expect(tmuxSessions(socket)).toContain(session);
    // Not `perl` (the pane supervisor) nor whatever the agent ran last.
    expect(windowNames(session)).toEqual(["broken"]);
  });

  it("names no session after --clean closed them all", async () => {
    const { dir } = workspace();
    const file = writeAssignments(dir, [{ id: "broken", env: { EXIT: "3" } }]);
    const result = await termorch(["run", file, "--clean"], { socket });
    expect(result.exitCode).toBe(1);
    expect(tmuxSessions(socket)).not.toContain(readReport(dir).tasks[0]!.session);
    expect(result.stderr).toContain("broken: failed (exit_code");
    expect(result.stderr).not.toContain("kept for inspection");
  });

  it("does not name the session of a lost task", async () => {
    const { dir, stamps } = workspace();
    const file = writeAssignments(dir, [
      { id: "gone", env: { STAMPS: stamps, WAIT_FILE: join(dir, "never") } },
      { id: "broken", env: { EXIT: "3", WAIT_FILE: join(dir, "go") } },
    ]);
    const run = execa(process.execPath, [BIN, "run", file, "--max-parallel", "2"], {
      reject: false,
      cwd: ROOT,
      env: cliEnv(socket),
    });
    await waitFor(() => existsSync(join(dir, "status", "gone.running")), 30_000, "gone running");
    await waitFor(() => existsSync(join(dir, "status", "broken.running")), 30_000, "broken running");
    // Once its agent runs (a session closed while the supervisor still sets up is a launch error).
    await waitFor(() => existsSync(join(stamps, "gone.start")), 30_000, "gone's agent started");
    // An operator closes the session: the task is lost.
    execFileSync(
      "tmux",
      ["-L", socket, "kill-session", "-t", `=${statusOf(dir, "gone", "running").session}`],
      {
        env: { ...process.env, TMUX: "" },
      },
    );
    await waitFor(() => existsSync(join(dir, "status", "gone.failed")), 30_000, "gone failed");
    execFileSync("touch", [join(dir, "go")]);
    const result = await run;
    expect(result.exitCode).toBe(1);
    const byId = Object.fromEntries(readReport(dir).tasks.map((t) => [t.id, t]));
    expect(byId.gone).toMatchObject({ status: "failed", reason: "lost" });
    const kept = String(result.stderr)
      .split("\n")
      .find((l) => l.includes("kept for inspection"));
    expect(kept).toBe(`  kept for inspection: tmux -L ${socket} attach -t =${byId.broken!.session}`);
  });
});
