import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import {
  killedAfterFile,
  readReport,
  running,
  termorch,
  testFile,
  waitFor,
  writeAssignments,
} from "./harness.js";

const { socket, workspace } = testFile("lost-cgroup");

/** Processes the agents start; any still running when the file ends are killed. */
const started = killedAfterFile();

describe("a task whose pane supervisor is SIGKILLed", () => {
  it("is lost, and what its agent started in its cgroup ends with the run", async (t) => {
    const { dir } = workspace();
    const child = join(dir, "child.pid");
    const inCgroup = join(dir, "in-cgroup");
    // The agent starts a process in a session of its own, notes whether it runs in a cgroup of
    // its own (where the machine allows one), then kills its supervisor.
    const script = [
      `setsid sh -c 'echo $$ > "$0.tmp" && mv "$0.tmp" "$0"; exec sleep 1003' ${child} >/dev/null 2>&1 &`,
      `while [ ! -s ${child} ]; do sleep 0.01; done`,
      `if grep -q '^0::.*/termorch-[0-9a-f]*$' /proc/self/cgroup; then touch ${inCgroup}; fi`,
      `echo $$ > ${join(dir, "agent.pid")}`,
      "kill -9 $PPID",
      "exec sleep 1000",
    ].join("\n");
    const file = writeAssignments(dir, [{ id: "A", command: ["bash", "-c", script] }]);
    const result = await termorch(["run", file], { socket });
    const pid = Number(readFileSync(child, "utf8").trim());
    started.push(pid, Number(readFileSync(join(dir, "agent.pid"), "utf8").trim()));
    expect(result.exitCode).toBe(1);
    expect(readReport(dir).tasks[0]!.reason).toBe("lost");
    if (!existsSync(inCgroup)) t.skip("this machine gives the agent no cgroup of its own");
    await waitFor(() => !running(pid), 5000, `the agent's child ${pid} to end`);
    // The cgroup and its record are gone too.
    const records = join(dir, ".termorch", readReport(dir).run_id!, "cgroups");
    expect(existsSync(join(records, ".."))).toBe(true);
    expect(existsSync(records) ? readdirSync(records) : []).toEqual([]);
  });
});
