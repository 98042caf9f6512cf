// Launches asked for while a tmux client is running wait for it and then share one client,
// instead of each spawning its own (issue 12: spawning a client blocks Node for ~3.5 ms and costs
// ~1.5 ms of its CPU, plus the client's own). A `tmux` shim first on PATH counts the clients that
// carry a new-session and makes each take 0.4 s, so that the agents' exits, 100 ms apart, all
// come while one is running.
import { execFileSync } from "node:child_process";
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import {
  killServer,
  makeWorkspace,
  readReport,
  TEST_TMP,
  termorch,
  uniqueSocket,
  writeAssignments,
} from "./harness.js";

const socket = uniqueSocket("launch-batching");
const shimDir = mkdtempSync(join(TEST_TMP, "tmux-shim-"));
const clientLog = join(shimDir, "clients.log");

afterAll(() => {
  killServer(socket);
  rmSync(shimDir, { recursive: true, force: true });
});

function installShim(): void {
  const real = execFileSync("sh", ["-c", "command -v tmux"], { encoding: "utf8" }).trim();
  const shim = join(shimDir, "tmux");
  writeFileSync(
    shim,
    [
      "#!/bin/sh",
      `case " $* " in *" new-session "*) echo "$*" | grep -o ' new-session ' | wc -l >> '${clientLog}' ;; esac`,
      "sleep 0.4",
      `exec '${real}' "$@"`,
      "",
    ].join("\n"),
  );
  chmodSync(shim, 0o755);
}

describe("launch batching", () => {
  it("launches that come while a client runs share the next client", async () => {
    installShim();
    const ws = makeWorkspace({ git: false });
    try {
      // 12 tasks, 4 at a time; each wave's agents end 100 ms apart.
      const tasks = Array.from({ length: 12 }, (_, i) => ({
        id: `t${i}`,
        command: ["sleep", String(0.1 * ((i % 4) + 1))],
      }));
      const file = writeAssignments(ws.dir, tasks);
      const r = await termorch(["run", file, "--max-parallel", "4"], {
        socket,
        env: { PATH: `${shimDir}:${process.env.PATH ?? "/usr/bin:/bin"}` },
      });
      expect(r.exitCode, r.stderr).toBe(0);
      expect(readReport(join(ws.dir)).tasks.every((t) => t.status === "success")).toBe(true);
      const perClient = readFileSync(clientLog, "utf8").trim().split("\n").map(Number);
      expect(perClient.reduce((a, b) => a + b, 0)).toBe(12);
      // One client per launch would be 9 or more (the first wave may share one); while one runs
      // (0.4 s) the exits of a whole wave come, so about two clients a wave (one more of margin
      // for a stalled machine).
      expect(perClient.length, `new-session clients: ${perClient.join(",")}`).toBeLessThanOrEqual(7);
    } finally {
      ws.cleanup();
    }
  });
});
