import { existsSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { daemonTestFile } from "./daemon-harness.js";
import { git, lines, tmuxSessions, waitFor } from "./harness.js";

const { socket, home, startDaemon, ready, job, answer, readAnswer } = daemonTestFile("daemon");

describe("termorch daemon", () => {
  it("answers three files dropped at once, an invalid one too, and keeps going", async () => {
    const h = home();
    void startDaemon(h, "--max-parallel", "4");
    await ready(h);
    const jobs = ["one", "two", "three"].map((n) =>
      job(h, n, [
        { id: "A", env: { WRITE: `${n}.txt=${n}` } },
        { id: "B", dependencies: ["A"] },
      ]),
    );
    writeFileSync(join(h, "inbox", "broken.json"), JSON.stringify({ tasks: [{ id: "x" }] }));
    for (const j of jobs) j.drop();
    await waitFor(
      () => ["one", "two", "three", "broken"].every((n) => existsSync(answer(h, n))),
      60_000,
      "all answers",
    );
    for (const [i, n] of ["one", "two", "three"].entries()) {
      expect(readAnswer(h, n)).toMatchObject({
        run_id: n,
        summary: { completed: true },
        merge: { result: "success" },
      });
      expect(readFileSync(join(jobs[i]!.ws.repo, `${n}.txt`), "utf8")).toBe(`${n}\n`);
      expect(existsSync(join(h, "runs", n, "execution_report.json"))).toBe(true);
    }
    const bad = readAnswer(h, "broken");
    expect(bad.summary.completed).toBe(false);
    expect(bad.error?.kind).toBe("invalid_input");
    // Still running: a later file is answered too.
    const late = job(h, "late", [{ id: "A" }]);
    late.drop();
    await waitFor(() => existsSync(answer(h, "late")), 30_000, "the late answer");
    expect(existsSync(join(h, "inbox", "late.json"))).toBe(false);
  });

  it("serialises two runs on one workspace through the lock", async () => {
    const h = home();
    void startDaemon(h);
    await ready(h);
    const stamps = home();
    const first = job(h, "first", [{ id: "F", env: { STAMPS: stamps, SLEEP: "0.5", WRITE: "f.txt=f" } }]);
    const second = {
      ...first.body,
      run_id: "second",
      tasks: [{ ...first.body.tasks[0], id: "S", env: { STAMPS: stamps, SLEEP: "0.5", WRITE: "s.txt=s" } }],
    };
    first.drop();
    writeFileSync(join(h, "inbox", "second.json"), JSON.stringify(second));
    await waitFor(
      () => existsSync(answer(h, "first")) && existsSync(answer(h, "second")),
      60_000,
      "both answers",
    );
    const t = (id: string, e: string) => BigInt(readFileSync(join(stamps, `${id}.${e}`), "utf8").trim());
    const [a, b] = t("F", "start") < t("S", "start") ? ["F", "S"] : ["S", "F"];
    expect(t(a, "end")).toBeLessThan(t(b, "start"));
    expect(readAnswer(h, "first").merge.result).toBe("success");
    expect(readAnswer(h, "second").merge.result).toBe("success");
    expect(git(first.ws.repo, "log", "--oneline").split("\n").filter(Boolean).length).toBeGreaterThanOrEqual(
      3,
    );
  });

  it("does not take a half-written file before it is complete; takes a renamed one", async () => {
    const h = home();
    void startDaemon(h);
    await ready(h);
    const half = job(h, "half", [{ id: "A" }]);
    const text = JSON.stringify(half.body);
    writeFileSync(join(h, "inbox", "half.json"), text.slice(0, 20));
    // A write-then-rename producer, and proof the daemon has been looking meanwhile.
    const renamed = job(h, "renamed", [{ id: "A" }]);
    writeFileSync(join(h, "inbox", ".renamed.json.tmp"), JSON.stringify(renamed.body));
    renameSync(join(h, "inbox", ".renamed.json.tmp"), join(h, "inbox", "renamed.json"));
    await waitFor(() => existsSync(answer(h, "renamed")), 30_000, "the renamed file's answer");
    expect(readAnswer(h, "renamed").summary.completed).toBe(true);
    expect(existsSync(join(h, "inbox", "half.json"))).toBe(true);
    expect(existsSync(join(h, "runs", "half"))).toBe(false);
    writeFileSync(join(h, "inbox", "half.json"), text);
    await waitFor(() => existsSync(answer(h, "half")), 30_000, "the completed file's answer");
    expect(readAnswer(h, "half").summary.completed).toBe(true);
  });

  it("after kill -9 and a restart, finishes the run and runs nothing twice", async () => {
    const h = home();
    const d = startDaemon(h);
    await ready(h);
    const counter = join(h, "starts");
    const gate = join(h, "go");
    const j = job(h, "crash", [
      { id: "A", env: { COUNTER: counter } },
      { id: "B", dependencies: ["A"], env: { COUNTER: counter, WAIT_FILE: gate, WRITE: "b.txt=b" } },
      { id: "C", dependencies: ["B"], env: { COUNTER: counter } },
    ]);
    j.drop();
    await waitFor(() => existsSync(join(h, "runs", "crash", "status", "B.running")), 30_000, "B running");
    d.kill("SIGKILL");
    await d;
    expect(existsSync(answer(h, "crash"))).toBe(false);
    void startDaemon(h);
    await waitFor(
      () => readFileSync(join(h, "runs", "crash", "events.jsonl"), "utf8").includes('"task.adopted"'),
      30_000,
      "B re-adopted",
    );
    writeFileSync(gate, "");
    await waitFor(() => existsSync(answer(h, "crash")), 30_000, "the answer after the restart");
    expect(readAnswer(h, "crash")).toMatchObject({
      summary: { completed: true },
      merge: { result: "success" },
    });
    expect(lines(counter).sort()).toEqual(["A", "B", "C"]);
  });

  it("on SIGTERM leaves tasks waiting for a slot pending, and runs them after the restart", async () => {
    const h = home();
    const d = startDaemon(h);
    await ready(h);
    const counter = join(h, "starts");
    const gate = join(h, "go");
    const j = job(
      h,
      "slots",
      ["A", "B", "C"].map((id) => ({ id, env: { COUNTER: counter, WAIT_FILE: gate } })),
    );
    (j.body.environment as Record<string, unknown>).resource_limits = { max_parallel: 1 };
    j.drop();
    await waitFor(() => lines(counter).length === 1, 30_000, "the first task running");
    d.kill("SIGTERM");
    expect((await d).exitCode).toBe(0);
    const state = JSON.parse(readFileSync(join(h, "runs", "slots", "state.json"), "utf8"));
    expect(state.tasks.filter((t: { state: string }) => t.state === "pending")).toHaveLength(2);
    void startDaemon(h);
    writeFileSync(gate, "");
    await waitFor(() => existsSync(answer(h, "slots")), 30_000, "the answer after the restart");
    expect(readAnswer(h, "slots").summary.completed).toBe(true);
    expect(lines(counter).sort()).toEqual(["A", "B", "C"]);
  });

  it("on SIGTERM exits promptly leaving agents running; the next start re-adopts them", async () => {
    const h = home();
    const d = startDaemon(h);
    await ready(h);
    const counter = join(h, "starts");
    const gate = join(h, "go");
    const pidFile = join(h, "agent.pid");
    const j = job(h, "term", [
      { id: "L", env: { COUNTER: counter, WAIT_FILE: gate, SLEEPER: pidFile, WRITE: "l.txt=l" } },
    ]);
    j.drop();
    await waitFor(
      () => existsSync(join(h, "runs", "term", "status", "L.running")) && existsSync(pidFile),
      30_000,
      "L running",
    );
    const sent = Date.now();
    d.kill("SIGTERM");
    const result = await d;
    expect(result.exitCode).toBe(0);
    expect(Date.now() - sent).toBeLessThan(10_000);
    const session = JSON.parse(readFileSync(join(h, "runs", "term", "status", "L.running"), "utf8")).session;
    expect(tmuxSessions(socket)).toContain(session);
    void startDaemon(h);
    await waitFor(
      () => readFileSync(join(h, "runs", "term", "events.jsonl"), "utf8").includes('"task.adopted"'),
      30_000,
      "L re-adopted",
    );
    writeFileSync(gate, "");
    await waitFor(() => existsSync(answer(h, "term")), 30_000, "the answer");
    expect(readAnswer(h, "term").summary.completed).toBe(true);
    expect(lines(counter)).toEqual(["L"]);
    expect(readFileSync(join(j.ws.repo, "l.txt"), "utf8")).toBe("l\n");
  });
});
