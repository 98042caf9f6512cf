// An agent entry's max_parallel (issue 37), checked from tmux: each of its agents counts, as it
// starts, the live panes of its agent's sessions on the run's tmux server; none ever sees more
// than the bound, though the run's max_parallel would allow all of them at once.
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import {
  killServer,
  makeWorkspace,
  readReport,
  termorch,
  uniqueSocket,
  writeAssignments,
} from "./harness.js";

const socket = uniqueSocket("agent-slots");
const cleanups: (() => void)[] = [];
afterAll(() => {
  killServer(socket);
  for (const c of cleanups) c();
});

describe("an agent's max_parallel, from tmux", () => {
  it("never more of its sessions alive than its bound; the other agent's task runs alongside", async () => {
    const ws = makeWorkspace({ git: false });
    cleanups.push(ws.cleanup);
    const log = join(ws.dir, "alive.log");
    // Its work: count its agent's live panes, then take a moment.
    const count = `n=$(tmux -L "$SOCK" list-panes -a -F '#{session_name} #{pane_dead}' | grep -c -- '-slow-[0-9]* 0$'); echo "$n" >> "$LOG"; sleep 0.4`;
    writeFileSync(
      join(ws.dir, "config.json"),
      JSON.stringify({
        agents: {
          slow: { command: ["bash", "-c", count], max_parallel: 2 },
          other: { command: ["bash", "-c", "sleep 0.4"] },
        },
      }),
    );
    const env = { SOCK: socket, LOG: log };
    const file = writeAssignments(
      ws.dir,
      [
        ...[1, 2, 3, 4, 5].map((i) => ({ id: `slow-${i}`, agent: "slow", command: undefined, env })),
        { id: "other-1", agent: "other", command: undefined },
      ],
      { environment: { resource_limits: { max_parallel: 6 } } },
    );
    const r = await termorch(["run", file, "--config", join(ws.dir, "config.json")], { socket });
    expect(r.exitCode, r.stderr).toBe(0);
    const counts = readFileSync(log, "utf8").trim().split("\n").map(Number);
    expect(counts).toHaveLength(5);
    expect(Math.max(...counts)).toBe(2);
    expect(readReport(ws.dir).summary.metrics?.peak_parallelism).toBe(3);
  });

  it("refuses an agent entry naming a provider group the config does not have (exit 2), rather than bound nothing", async () => {
    const ws = makeWorkspace({ git: false });
    cleanups.push(ws.cleanup);
    writeFileSync(
      join(ws.dir, "config.json"),
      JSON.stringify({ agents: { slow: { command: ["true"], provider: "acme" } } }),
    );
    const file = writeAssignments(ws.dir, [{ id: "t", agent: "slow", command: undefined }]);
    const r = await termorch(["validate", file, "--config", join(ws.dir, "config.json")], { socket });
    expect(r.exitCode).toBe(2);
    expect(r.stderr).toMatch(/agents\.slow\.provider.*provider "acme" is not in "providers"/);
  });
});
