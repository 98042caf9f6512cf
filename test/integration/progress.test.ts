import { writeFileSync } from "node:fs";
import { join } from "node:path";
import * as pty from "node-pty";
import { afterAll, describe, expect, it } from "vitest";
import {
  BIN,
  cliEnv,
  killServer,
  makeWorkspace,
  ROOT,
  uniqueSocket,
  waitFor,
  writeAssignments,
} from "./harness.js";

const socket = uniqueSocket("progress");
const cleanups: Array<() => void> = [];
afterAll(() => {
  killServer(socket);
  for (const c of cleanups) c();
});

describe("progress on a terminal", () => {
  it("shows done/running/failed and the elapsed time while a run goes on", async () => {
    const ws = makeWorkspace();
    cleanups.push(ws.cleanup);
    const gate = join(ws.dir, "go");
    const file = writeAssignments(ws.dir, [{ id: "quick" }, { id: "slow", env: { WAIT_FILE: gate } }]);
    const env: Record<string, string> = {};
    for (const [k, v] of Object.entries(process.env)) if (v !== undefined) env[k] = v;
    Object.assign(env, cliEnv(socket), { TERM: "xterm-256color" });
    const term = pty.spawn(process.execPath, [BIN, "run", file], {
      name: "xterm-256color",
      cols: 160,
      rows: 30,
      cwd: ROOT,
      env,
    });
    cleanups.push(() => term.kill());
    let out = "";
    term.onData((d) => {
      out += d;
    });
    const exited = new Promise<number>((resolve) => term.onExit((e) => resolve(e.exitCode)));
    // The live line, redrawn in place: one task done, the other running, and a clock.
    const line = await waitFor(
      () => out.match(/\[\d+\.\ds\] 1\/2 done, 1 running \(slow\), 0 failed/)?.[0],
      30_000,
      "the progress line",
    );
    expect(line).toContain("1/2 done");
    expect(out).toContain("\r\x1b[2K");
    writeFileSync(gate, "");
    expect(await exited).toBe(0);
    expect(out).toMatch(/2\/2 tasks succeeded/);
  });
});
