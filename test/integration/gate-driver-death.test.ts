import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { execa } from "execa";
import { describe, expect, it } from "vitest";
import {
  BIN,
  cliEnv,
  killedAfterFile,
  lines,
  ROOT,
  readReport,
  running,
  termorch,
  testFile,
  waitFor,
  writeAssignments,
} from "./harness.js";

const { socket, workspace } = testFile("gate-death");

/** Processes the agents start; any still running when the file ends are killed. */
const started = killedAfterFile();

/**
 * A run-level tests_cmd that counts its starts, notes any process of an earlier start still
 * running when it starts (an overlap), records its own pids (the shell and a background child in
 * its group), and, the first time only, ignores TERM and waits forever.
 */
function gateCommand(dir: string): string {
  return [
    `d=${dir}`,
    'n=$(( $(cat "$d/starts" 2>/dev/null | wc -l) + 1 )); echo $n >> "$d/starts"',
    'for f in "$d"/pid.*; do [ -e "$f" ] || continue; for p in $(cat "$f"); do',
    '  if [ -e /proc/$p ] && ! grep -q "^[0-9]* ([^)]*) Z" /proc/$p/stat 2>/dev/null; then echo "$n: $p" >> "$d/overlap"; fi',
    "done; done",
    // The first one ignores TERM, and so does its child (an ignored signal stays ignored).
    'if [ $n = 1 ]; then trap "" TERM; fi',
    "sleep 1000 & child=$!",
    'echo "$$ $child" > "$d/pid.$n"',
    "if [ $n = 1 ]; then wait; fi",
    "kill $child",
  ].join("\n");
}

/** `graceS`: the kill grace, which a resume started at once must find the first gate still in. */
async function killedDuringGate(dir: string, graceS: number): Promise<{ file: string; pids: number[] }> {
  const config = join(dir, "config.json");
  writeFileSync(config, JSON.stringify({ defaults: { kill_grace_s: graceS } }));
  const file = writeAssignments(dir, [{ id: "A" }], {
    success_criteria: { tests_cmd: gateCommand(dir) },
  });
  const first = execa(process.execPath, [BIN, "run", file, "--config", config], {
    reject: false,
    cwd: ROOT,
    env: cliEnv(socket),
  });
  await waitFor(
    () => existsSync(join(dir, "pid.1")) && lines(join(dir, "pid.1")).length > 0,
    60_000,
    "the gate",
  );
  const pids = readFileSync(join(dir, "pid.1"), "utf8").trim().split(" ").map(Number);
  started.push(...pids);
  first.kill("SIGKILL");
  await first;
  return { file, pids };
}

describe("a run-level tests_cmd whose driver is SIGKILLed", () => {
  it("does not outlive its driver", async () => {
    const { dir } = workspace();
    const { pids } = await killedDuringGate(dir, 1);
    // Even the part that ignores TERM: KILL follows after kill_grace_s (1 s).
    await waitFor(() => pids.every((p) => !running(p)), 15_000, "the gate's processes to end");
    const resumed = await termorch(["resume", dir], { socket });
    expect(resumed.exitCode).toBe(0);
    expect(readReport(dir).merge.result).toBe("success");
    expect(lines(join(dir, "starts"))).toEqual(["1", "2"]);
    expect(existsSync(join(dir, "overlap"))).toBe(false);
  });

  it("is never running twice: resume ends what is left of it before starting it again", async () => {
    const { dir } = workspace();
    const { pids } = await killedDuringGate(dir, 4);
    // At once, while the first gate may still be dying (4 s of grace).
    const resumed = await termorch(["resume", dir], { socket });
    expect(resumed.exitCode).toBe(0);
    expect(readReport(dir).summary.validation).toBe("passed");
    expect(lines(join(dir, "starts"))).toEqual(["1", "2"]);
    expect(existsSync(join(dir, "overlap")) ? readFileSync(join(dir, "overlap"), "utf8") : "").toBe("");
    for (const p of pids) expect(running(p)).toBe(false);
  });
});

describe("a tests_cmd under its watchdog", () => {
  it("still ends a gate that times out, with everything in its group", async () => {
    const { dir } = workspace();
    const file = writeAssignments(dir, [
      {
        id: "A",
        timeout_s: 1,
        success_criteria: { tests_cmd: `sleep 1000 & echo "$$ $!" > ${join(dir, "pids")}; wait` },
      },
    ]);
    const result = await termorch(["run", file], { socket });
    expect(result.exitCode).toBe(1);
    const pids = readFileSync(join(dir, "pids"), "utf8").trim().split(" ").map(Number);
    started.push(...pids);
    const gate = readReport(dir).tasks[0]!.gates.find((g) => g.name === "tests_cmd")!;
    expect(gate.passed).toBe(false);
    expect(gate.detail).toMatch(/^timed out; output in logs\//);
    for (const p of pids) expect(running(p)).toBe(false);
  });
});
