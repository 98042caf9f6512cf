import { existsSync, readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { execa } from "execa";
import { describe, expect, it } from "vitest";
import {
  BIN,
  cliEnv,
  killedAfterFile,
  ROOT,
  readReport,
  running,
  termorch,
  testFile,
  waitFor,
  writeAssignments,
} from "./harness.js";

const { socket, workspace } = testFile("leftovers");

/** Processes the agents start; any still running when the file ends are killed. */
const started = killedAfterFile();

const pidIn = (file: string): number => {
  const pid = Number(readFileSync(file, "utf8").trim());
  started.push(pid);
  return pid;
};

/**
 * Bash that starts two processes in sessions of their own whose parent (setsid -f) exits at
 * once: one holding the agent's output pipes, one detached from them. Each writes its pid.
 */
const escapees = (dir: string): string =>
  [
    `setsid -f sh -c 'echo $$ > "$0"; exec sleep 1000' ${join(dir, "piped.pid")}`,
    `setsid -f sh -c 'echo $$ > "$0"; exec sleep 1000' ${join(dir, "quiet.pid")} >/dev/null 2>&1 </dev/null`,
    `while [ ! -s ${join(dir, "piped.pid")} ] || [ ! -s ${join(dir, "quiet.pid")} ]; do sleep 0.01; done`,
  ].join("\n");

describe.each([
  ["in its cgroup where the machine allows one", {}],
  ["without a cgroup", { TERMORCH_CGROUP: "off" }],
])("processes a task started, %s", (_name, env: Record<string, string>) => {
  it("end with the task, even those that left its session", async () => {
    const { dir } = workspace();
    const file = writeAssignments(dir, [{ id: "t1", command: ["bash", "-c", `${escapees(dir)}\nexit 0`] }]);
    const result = await termorch(["run", file], { socket, env });
    expect(result.exitCode).toBe(0);
    const pids = ["piped", "quiet"].map((name) => pidIn(join(dir, `${name}.pid`)));
    // The supervisor ends them before it records the agent's end: nothing to wait for.
    for (const pid of pids) expect(running(pid), `pid ${pid}`).toBe(false);
    const task = readReport(dir).tasks[0]!;
    expect(task.status).toBe("success");
    expect(readFileSync(join(dir, task.logs.stderr!), "utf8")).toMatch(
      /the agent left 2 process\(es\) running/,
    );
  });

  it("end with the task when it times out", async () => {
    const { dir } = workspace();
    const file = writeAssignments(dir, [
      { id: "t1", timeout_s: 2, command: ["bash", "-c", `${escapees(dir)}\nexec sleep 1000`] },
    ]);
    const result = await termorch(["run", file], { socket, env });
    expect(result.exitCode).toBe(1);
    expect(readReport(dir).tasks[0]!.reason).toBe("timeout");
    const pids = ["piped", "quiet"].map((name) => pidIn(join(dir, `${name}.pid`)));
    for (const pid of pids) expect(running(pid), `pid ${pid}`).toBe(false);
  });

  it("end with `clean` when the driver and the supervisor that watched them were killed", async () => {
    const { dir } = workspace();
    // In a cgroup of its own, a third one clears its environment: only the cgroup still knows it.
    const script = [
      escapees(dir),
      `if grep -q '^0::.*/termorch-[0-9a-f]*$' /proc/self/cgroup; then`,
      `  setsid -f env -i sh -c 'echo $$ > "$0"; exec sleep 1000' ${join(dir, "bare.pid")} >/dev/null 2>&1`,
      `  while [ ! -s ${join(dir, "bare.pid")} ]; do sleep 0.01; done`,
      "fi",
      `echo $PPID > ${join(dir, "supervisor.pid")}`,
      `echo $$ > ${join(dir, "agent.pid")}`,
      "exec sleep 1000",
    ].join("\n");
    const file = writeAssignments(dir, [{ id: "t1", command: ["bash", "-c", script] }]);
    const run = execa(process.execPath, [BIN, "run", file], {
      reject: false,
      cwd: ROOT,
      env: cliEnv(socket, env),
    });
    await waitFor(() => existsSync(join(dir, "agent.pid")), 20_000, "the agent's start");
    const pids = ["piped", "quiet", "agent", ...(existsSync(join(dir, "bare.pid")) ? ["bare"] : [])].map(
      (n) => pidIn(join(dir, `${n}.pid`)),
    );
    // A driver that lives on ends what a killed supervisor left in the agent's cgroup itself
    // (lost-cgroup.test.ts): here it dies first, and its run cannot be resumed (its assignments
    // file is gone), so clean takes it.
    run.kill("SIGKILL");
    await run;
    process.kill(pidIn(join(dir, "supervisor.pid")), "SIGKILL");
    rmSync(file);
    // Nothing watched them since: they all still run.
    for (const pid of pids) expect(running(pid)).toBe(true);

    const clean = await termorch(["clean", dir, "--force"], { socket, env });
    expect(clean.exitCode, clean.stdout + clean.stderr).toBe(0);
    for (const pid of pids) expect(running(pid), `pid ${pid}`).toBe(false);
    expect(clean.stdout).toContain(`removed ${pids.length} process(es) of the run that were still running`);
  });
});
