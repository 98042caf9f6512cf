// The private tmux server: configuration, environment, listing, targeted kills, shutdown.
import { stat } from "node:fs/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { TmuxServer } from "../../src/tmux/server.js";
import {
  isAlive,
  makeTmpDir,
  removeDir,
  runnerOf,
  taskSpec,
  uniqueSocket,
  waitFor,
} from "../fixtures/tmux-helpers.js";

let server: TmuxServer;
let root: string;

beforeAll(async () => {
  // Things that must never reach the server: the caller's TMUX and any secret.
  server = new TmuxServer({
    socket: uniqueSocket(),
    historyLimit: 1234,
    size: "120x40",
    baseEnv: { ...process.env, TMUX: "/tmp/not-a-socket,1,0", TERMORCH_TEST_SECRET: "do-not-leak" },
  });
  root = await makeTmpDir();
});

afterAll(async () => {
  await server.kill();
  await removeDir(root);
});

describe("TmuxServer", () => {
  it("answers sensibly while no server runs", async () => {
    expect(await server.listPanes()).toEqual([]);
    expect(await server.hasSession("nope")).toBe(false);
    expect(await server.killSession("nope")).toBe(false);
    expect(await server.socketPath()).toMatch(new RegExp(`/tmux-\\d+/${server.socket}$`));
  });

  it("starts with termorch's configuration and a clean environment", async () => {
    const spec = taskSpec(root, ["sleep", "60"]);
    const task = await runnerOf(server).launch(spec);
    expect(await server.run(["show-options", "-s", "-v", "exit-empty"])).toBe("off");
    expect(await server.run(["show-options", "-g", "-v", "remain-on-exit"])).toBe("on");
    expect(await server.run(["show-options", "-g", "-v", "history-limit"])).toBe("1234");
    expect(
      await server.run([
        "display-message",
        "-p",
        "-t",
        `=${spec.session}:`,
        "#{window_width}x#{window_height}",
      ]),
    ).toBe("120x40");
    const globalEnv = await server.run(["show-environment", "-g"]);
    expect(globalEnv).not.toMatch(/TERMORCH_TEST_SECRET|do-not-leak/);
    expect(globalEnv).not.toMatch(/^TMUX=/m);
    const path = await server.socketPath();
    expect((await stat(path)).isSocket()).toBe(true);
    expect(path).toMatch(new RegExp(`/${server.socket}$`));
    const pid = await server.serverPid();
    expect(isAlive(pid)).toBe(true);
    await server.kickChld();

    const rows = await server.listPanes();
    const row = rows.find((r) => r.session === spec.session);
    expect(row).toMatchObject({
      run: "test-run",
      task: spec.taskId,
      attempt: 1,
      dead: false,
      deadStatus: null,
    });
    expect(row!.panePid).toBeGreaterThan(1);
    expect(await server.hasSession(spec.session)).toBe(true);
    // Exact targets: a prefix of a live session's name matches nothing.
    expect(await server.hasSession(spec.session.slice(0, -2))).toBe(false);
    expect(await server.killSession(spec.session.slice(0, -2))).toBe(false);
    await task.stop(2_000);
    expect(await server.killSession(spec.session)).toBe(true);
    expect(await server.hasSession(spec.session)).toBe(false);
  });

  it("records the supervisor's end in the dead pane, matching exit.json", async () => {
    const spec = taskSpec(root, ["sh", "-c", "kill -TERM $$"]);
    const exit = await (await runnerOf(server).launch(spec)).exited;
    expect(exit.signal).toBe("SIGTERM");
    // pane_dead turns 1 when the pty closes, the status when tmux reaps the supervisor. tmux 3.3
    // with libutempter can lose that SIGCHLD (TMUX-NOTES): kickChld is the repair under test.
    const row = await waitFor(async () => {
      const r = (await server.listPanes()).find((p) => p.session === spec.session);
      if (r?.dead && r.deadSignal === null && r.deadStatus === null) await server.kickChld();
      return r?.dead && r.deadSignal !== null ? r : null;
    });
    expect(row.deadSignal).toBe(15);
    await server.killSession(spec.session);
  });

  it("closeIfIdle keeps a server with sessions and lets an idle one exit", async () => {
    const spec = taskSpec(root, ["sleep", "60"]);
    const task = await runnerOf(server).launch(spec);
    expect(await server.closeIfIdle()).toBe(false);
    const pid = await server.serverPid();
    await task.stop(2_000);
    await server.killSession(spec.session);
    expect(await server.closeIfIdle()).toBe(true);
    await waitFor(() => !isAlive(pid), 10_000, "idle server to exit");
    expect(await server.listPanes()).toEqual([]);
    // The next launch starts a fresh server with the same configuration.
    const again = await (await runnerOf(server).launch(taskSpec(root, ["true"]))).exited;
    expect(again.exit_code).toBe(0);
    expect(await server.run(["show-options", "-s", "-v", "exit-empty"])).toBe("off");
  });
});

describe("TmuxServer.kill", () => {
  it("ends only its own server and removes the stale socket file", async () => {
    const other = new TmuxServer({ socket: uniqueSocket() });
    const bystander = taskSpec(root, ["sleep", "60"]);
    const task = await runnerOf(server).launch(bystander);
    await (await runnerOf(other).launch(taskSpec(root, ["true"]))).exited;
    const path = await other.socketPath();
    await other.kill();
    await expect(stat(path)).rejects.toMatchObject({ code: "ENOENT" });
    expect(await other.listPanes()).toEqual([]);
    expect(await server.hasSession(bystander.session)).toBe(true);
    await task.stop(2_000);
  });
});

describe("argument escaping", () => {
  it("hands trailing semicolons, backslashes, quotes and format characters to tmux intact", async () => {
    const spec = taskSpec(root, ["sleep", "60"]);
    const task = await runnerOf(server).launch(spec);
    const target = `=${spec.session}:`;
    for (const value of ["a;", "a\\;", "a;b", "/x/#{pane_id};", `it's; "odd" ;`]) {
      await server.command(["set-option", "-t", target, "@termorch_note", value]);
      expect(await server.command(["show-options", "-v", "-t", target, "@termorch_note"])).toBe(value);
    }
    await task.stop(2_000);
    await server.killSession(spec.session);
  });
});
