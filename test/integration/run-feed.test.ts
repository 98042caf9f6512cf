import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { execa } from "execa";
import { afterAll, describe, expect, it } from "vitest";
import { StatusView } from "../../src/contract/status-view.js";
import { feedsOf, viewWhere } from "../fixtures/feed-helpers.js";
import { opsWorld } from "../fixtures/ops-helpers.js";
import { BIN, uniqueSocket, waitFor, writeAssignments } from "./harness.js";

const world = opsWorld(uniqueSocket("run-feed"));
const { openFeed, closeAll } = feedsOf(world);
afterAll(async () => {
  await closeAll();
  world.teardown();
});

const task = (v: StatusView, id: string) => v.runs.at(-1)?.tasks.find((t) => t.id === id);

describe("RunFeed", () => {
  it("follows a run registered after it opened, from running to reported, on file events alone", async () => {
    const feed = await openFeed({ kind: "registry" });
    const before = feed.current().runs.length;
    const { dir } = world.workspace();
    const gate = join(dir, "go");
    const file = writeAssignments(dir, [
      { id: "A", env: { SAY: "A is working", WAIT_FILE: gate } },
      { id: "B", dependencies: ["A"], env: { SAY: "B done" } },
    ]);
    const run = world.start(["run", file, "--out", join(dir, "out")]);

    // Running from its start (its worktree made) on, its attempt counted once launched.
    const running = await viewWhere(
      feed,
      (v) => task(v, "A")?.state === "running" && task(v, "A")?.attempts === 1,
      "A running",
    );
    expect(running.runs).toHaveLength(before + 1);
    expect(task(running, "B")).toMatchObject({ state: "pending", wave: 2 });
    expect(task(running, "A")).toMatchObject({ wave: 1, attempts: 1 });
    await viewWhere(feed, (v) => task(v, "A")?.last_line === "A is working", "A's last line");

    writeFileSync(gate, "");
    const done = await viewWhere(
      feed,
      (v) => v.runs.at(-1)?.phase === "reported" && task(v, "B")?.state === "success",
      "the run reported",
    );
    expect(task(done, "A")!.state).toBe("success");
    expect(task(done, "B")!.last_line).toBe("B done");
    expect((await run).exitCode).toBe(0);
  });

  it("shows a task's start at once and its session once the sessions may be listed again", async () => {
    // The sessions are listed again only when a refresh (or a sweep) asks, for a minute.
    const feed = await openFeed({ kind: "registry" }, { sessionsMs: 60_000 });
    const { dir } = world.workspace();
    const [first, second] = [join(dir, "go-p"), join(dir, "go-s")];
    const file = writeAssignments(dir, [
      { id: "P", env: { SAY: "P works", WAIT_FILE: first } },
      { id: "S", dependencies: ["P"], env: { SAY: "S works", WAIT_FILE: second } },
    ]);
    const run = world.start(["run", file, "--out", join(dir, "out")]);
    await viewWhere(feed, (v) => task(v, "P")?.state === "running", "P running");
    feed.refresh();
    await viewWhere(feed, (v) => task(v, "P")?.session_exists === true, "P's session");
    // P's end and S's start are status changes: their states show at once, the sessions later.
    writeFileSync(first, "");
    const started = await viewWhere(feed, (v) => task(v, "S")?.state === "running", "S running");
    expect(task(started, "S")!.session_exists).toBe(false);
    feed.refresh();
    const listed = await viewWhere(feed, (v) => task(v, "S")?.session_exists === true, "S's session");
    expect(task(listed, "S")!.attach).not.toBeNull();
    writeFileSync(second, "");
    expect((await run).exitCode).toBe(0);
  });

  it("opens on one run at once: chokidar, given no folder to watch, never says it is ready", async () => {
    const { dir } = world.workspace();
    const out = join(dir, "out");
    const file = writeAssignments(dir, [{ id: "A", env: { SAY: "done" } }]);
    expect((await world.start(["run", file, "--out", out])).exitCode).toBe(0);
    const at = Date.now();
    const feed = await openFeed({ kind: "run", ref: out });
    // It waited a fixed 5 s for that word: `watch <run>` printed nothing meanwhile.
    expect(Date.now() - at).toBeLessThan(3_000);
    expect(task(feed.current(), "A")?.state).toBe("success");
  });

  it("shows a daemon home's claimed, not yet started runs as queued, and watch's plain lines wait for them", async () => {
    const { dir } = world.workspace();
    const home = join(dir, "home");
    const queuedDir = join(home, "runs", "q1");
    mkdirSync(queuedDir, { recursive: true });
    const claim = { source: join(home, "inbox", "q1.json"), claimed_at: "2026-11-23T07:00:00.000Z", pid: 1 };
    writeFileSync(join(queuedDir, "claim.json"), JSON.stringify(claim));
    writeFileSync(join(queuedDir, "assignments.json"), "{}");

    const status = await world.cli(["status", "--home", home, "--json"]);
    expect(status.exitCode).toBe(0);
    expect(StatusView.parse(JSON.parse(status.stdout)).queued).toEqual([
      { run_id: "q1", run_dir: queuedDir, source: claim.source, claimed_at: claim.claimed_at },
    ]);
    expect((await world.cli(["status", "--home", home])).stdout).toContain("run q1: queued");

    const watch = execa(process.execPath, [BIN, "watch", "--home", home], { env: world.env, reject: false });
    let out = "";
    watch.stdout?.on("data", (d: Buffer) => {
      out += d.toString();
    });
    await waitFor(() => out.includes(`${claim.claimed_at} q1 - queued`), 20_000, "the queued line");
    expect(watch.exitCode).toBeNull();
    // The daemon refused it before it started: its report, no state. Nothing is queued any more.
    writeFileSync(join(queuedDir, "execution_report.json"), "{}");
    expect((await watch).exitCode).toBe(0);
  });

  it("sees a daemon home's new run folder and its tasks", async () => {
    const { dir } = world.workspace();
    const home = join(dir, "home");
    mkdirSync(join(home, "runs"), { recursive: true });
    const feed = await openFeed({ kind: "home", home });
    expect(feed.current().runs).toEqual([]);
    const file = writeAssignments(dir, [{ id: "only", env: { SAY: "hi" } }]);
    const run = world.start(["run", file, "--out", join(home, "runs", "r1")]);
    const done = await viewWhere(feed, (v) => v.runs[0]?.phase === "reported", "the run reported");
    expect(done.runs[0]!.tasks[0]).toMatchObject({ id: "only", state: "success", last_line: "hi" });
    expect((await run).exitCode).toBe(0);
  });
});
