import { spawn } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { execa } from "execa";
import { describe, expect, it } from "vitest";
import {
  BIN,
  cliEnv,
  killedAfterFile,
  killServer,
  ROOT,
  readReport,
  running,
  TEST_TMP,
  termorch,
  testFile,
  uniqueSocket,
  waitFor,
  writeAssignments,
} from "./harness.js";

const { socket, workspace } = testFile("same-run-id");

/** Processes the runs start; any still running when the file ends are killed. */
const started = killedAfterFile();

describe("clean of a finished run", () => {
  it("ends its leftover processes, not those of a live run with the same id elsewhere", async () => {
    const first = workspace();
    const second = workspace();
    // A process of the first run that outlived it. The run itself ends everything its agents and
    // gates start, so the test starts it, with the environment the run gives its processes (what
    // escapes through a daemon, such as `systemd-run` or `at`, keeps it too).
    const runDirOfA = join(first.dir, "run-dir");
    const fileA = writeAssignments(
      first.dir,
      [{ id: "t1", command: ["bash", "-c", `printf %s "$TERMORCH_RUN_DIR" > ${runDirOfA}`] }],
      { run_id: "same-id" },
    );
    // Registered elsewhere, the second run cannot see it and takes the same run id.
    const otherRegistry = { TERMORCH_REGISTRY: join(TEST_TMP, "registry-of-the-first") };
    const a = await termorch(["run", fileA, "--out", join(first.dir, "out")], { socket, env: otherRegistry });
    expect(a.exitCode).toBe(0);
    const escaped = spawn("sleep", ["1000"], {
      detached: true,
      stdio: "ignore",
      env: { ...process.env, TERMORCH_RUN_ID: "same-id", TERMORCH_RUN_DIR: readFileSync(runDirOfA, "utf8") },
    });
    escaped.unref();
    const leftoverPid = escaped.pid!;
    started.push(leftoverPid);
    expect(running(leftoverPid)).toBe(true);

    // The second run's agent runs until it is cancelled. Its own tmux server: clean closes the
    // sessions of the run id on the first run's socket.
    const agentPid = join(second.dir, "agent.pid");
    const fileB = writeAssignments(
      second.dir,
      [{ id: "t1", command: ["bash", "-c", `echo "$$ $TERMORCH_RUN_ID" > ${agentPid}; exec sleep 1000`] }],
      { run_id: "same-id" },
    );
    const socketB = uniqueSocket("same-run-id-b");
    const b = execa(process.execPath, [BIN, "run", fileB, "--out", join(second.dir, "out")], {
      reject: false,
      cwd: ROOT,
      env: cliEnv(socketB),
    });
    try {
      await waitFor(
        () => existsSync(agentPid) && readFileSync(agentPid, "utf8").includes("\n"),
        30_000,
        "agent",
      );
      const [pid, runId] = readFileSync(agentPid, "utf8").trim().split(" ");
      expect(runId).toBe("same-id");
      const agent = Number(pid);
      started.push(agent);

      const clean = await termorch(["clean", join(first.dir, "out")], { socket, env: otherRegistry });
      expect(clean.exitCode).toBe(0);
      expect(running(leftoverPid)).toBe(false);
      expect(running(agent), "the live run's agent").toBe(true);
      expect(clean.stdout).toContain("removed 1 process(es) of the run that were still running");
    } finally {
      await termorch(["cancel", join(second.dir, "out")], { socket: socketB });
      await b;
      killServer(socketB);
    }
    expect(readReport(join(second.dir, "out")).run_id).toBe("same-id");
  });
});
