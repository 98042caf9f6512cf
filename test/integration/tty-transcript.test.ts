import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import type { TaskReport } from "../../src/contract/report.js";
import { readReport, termorch, testFile, writeAssignments } from "./harness.js";

const { socket, workspace } = testFile("tty-transcript");

describe("a failed tty task", () => {
  it("points at the transcript (the stdout log), which keeps plain newlines", async () => {
    const { dir } = workspace();
    const config = join(dir, "config.json");
    // Output on both streams, a progress line redrawn in place, then a failure.
    const script =
      'echo first line; printf "10%%\\r50%%\\r100%%\\n"; echo "went wrong" >&2; [ -n "$SLEEPY" ] && sleep 100; exit 3';
    writeFileSync(
      config,
      JSON.stringify({ agents: { term: { command: ["bash", "-c", script], tty: true } } }),
    );
    const file = writeAssignments(dir, [{ id: "t1" }, { id: "t2", env: { SLEEPY: "1" }, timeout_s: 1 }]);
    const a = JSON.parse(readFileSync(file, "utf8"));
    for (const t of a.tasks) {
      delete t.command;
      t.agent = "term";
    }
    writeFileSync(file, JSON.stringify(a));

    const result = await termorch(["run", file, "--config", config], { socket });
    expect(result.exitCode).toBe(1);
    const [task, slow] = readReport(dir).tasks as [TaskReport, TaskReport];
    expect(task.reason).toBe("exit_code");
    const out = task.logs.stdout!;
    expect(task.detail).toBe("exited with code 3");
    expect(task.output_log).toBe(out);
    // The summary names the transcript, not the empty stderr log.
    const summary = `${result.stdout}${result.stderr}`;
    expect(summary).toContain(`t1: failed (exit_code: exited with code 3); output: ${out}\n`);
    expect(summary).not.toContain(task.logs.stderr!);
    // Whatever the failure: here a timeout.
    expect(slow.reason).toBe("timeout");
    expect(slow.output_log).toBe(slow.logs.stdout);
    expect(summary).toContain(`; output: ${slow.logs.stdout}\n`);
    expect(summary).not.toContain(slow.logs.stderr!);

    const transcript = readFileSync(join(dir, out), "utf8");
    expect(transcript).toContain("first line\n");
    expect(transcript).toContain("went wrong\n");
    expect(transcript).not.toContain("\r\n");
    // A lone carriage return (a redraw) is kept as the terminal showed it.
    expect(transcript).toContain("10%\r50%\r100%\n");
  });
});
