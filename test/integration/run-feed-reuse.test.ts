import { appendFileSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import type { RunView, StatusView } from "../../src/contract/status-view.js";
import { feedsOf, viewWhere } from "../fixtures/feed-helpers.js";
import { opsWorld } from "../fixtures/ops-helpers.js";
import { uniqueSocket, writeAssignments } from "./harness.js";

// What a RunFeed saves while one run's files change often (bench/views.mjs measures it): the view
// of a finished run whose files did not change is kept, a run whose files changed is read again,
// and a log's append waits for the log throttle unless another change comes.
const world = opsWorld(uniqueSocket("run-feed-reuse"));
const { openFeed, closeAll } = feedsOf(world);
afterAll(async () => {
  await closeAll();
  world.teardown();
});

const runOf = (v: StatusView, runId: string): RunView | undefined => v.runs.find((r) => r.run_id === runId);
const runIdOf = (file: string): string => JSON.parse(readFileSync(file, "utf8")).run_id;

/** A finished run of one task that said `say`; returns its id. */
async function finishedRun(say: string): Promise<string> {
  const { dir } = world.workspace();
  const file = writeAssignments(dir, [{ id: "only", env: { SAY: say } }]);
  const r = await world.cli(["run", file, "--out", join(dir, "out")]);
  expect(r.exitCode, r.stderr).toBe(0);
  return runIdOf(file);
}

/** A run whose task says `say` and waits for its gate file; returns its id, the gate and the process. */
function gatedRun(say: string) {
  const { dir } = world.workspace();
  const gate = join(dir, "go");
  const file = writeAssignments(dir, [{ id: "work", env: { SAY: say, WAIT_FILE: gate } }]);
  return { runId: runIdOf(file), gate, process: world.start(["run", file, "--out", join(dir, "out")]) };
}

describe("RunFeed keeps what did not change", () => {
  it("keeps a finished run's view while another run's files change, and reads it again when its own do", async () => {
    const done = await finishedRun("finished long ago");
    const feed = await openFeed();
    const live = gatedRun("live work");
    const working = await viewWhere(
      feed,
      (v) => runOf(v, live.runId)?.tasks[0]?.last_line === "live work",
      "the live run's line",
    );
    const before = runOf(working, done)!;
    expect(before.tasks[0]!.last_line).toBe("finished long ago");

    writeFileSync(live.gate, "");
    const end = await viewWhere(
      feed,
      (v) => runOf(v, live.runId)?.phase === "reported",
      "the live run reported",
    );
    expect((await live.process).exitCode).toBe(0);
    // The same object: the finished run was not read again for the views the live run caused.
    expect(runOf(end, done)).toBe(before);

    // A change in the finished run's own folder (its log) reads that run again.
    appendFileSync(before.tasks[0]!.logs!.stdout, "a line added afterwards\n");
    const reread = await viewWhere(
      feed,
      (v) => runOf(v, done)?.tasks[0]?.last_line === "a line added afterwards",
      "the finished run's new line",
    );
    expect(runOf(reread, done)).not.toBe(before);

    // What the feed shows is what `termorch status --json` prints for the same runs.
    const status = await world.cli(["status", "--json"]);
    const printed = JSON.parse(status.stdout) as StatusView;
    for (const id of [done, live.runId]) expect(runOf(reread, id)).toEqual(runOf(printed, id));
  });

  it("holds a log's append back for the log throttle, but not past another change", async () => {
    const done = await finishedRun("before the edit");
    // A log-only change would wait a minute here; the live run's end is a status change.
    const feed = await openFeed({ kind: "registry" }, { logThrottleMs: 60_000 });
    const first = await viewWhere(
      feed,
      (v) => runOf(v, done)?.tasks[0]?.last_line === "before the edit",
      "A",
    );
    const live = gatedRun("live");
    await viewWhere(
      feed,
      (v) => runOf(v, live.runId)?.tasks[0]?.state === "running",
      "the live run's task running",
    );

    appendFileSync(runOf(first, done)!.tasks[0]!.logs!.stdout, "after the edit\n");
    writeFileSync(live.gate, "");
    const end = await viewWhere(
      feed,
      (v) =>
        runOf(v, live.runId)?.tasks[0]?.state === "success" &&
        runOf(v, done)?.tasks[0]?.last_line === "after the edit",
      "the live task's end and the finished run's new line",
    );
    expect(runOf(end, done)!.tasks[0]!.last_line).toBe("after the edit");
    expect((await live.process).exitCode).toBe(0);
  });
});
