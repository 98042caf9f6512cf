// `termorch mcp` driven by the MCP SDK's own client over stdio, as an agent's CLI drives it: the
// built CLI, real tmux (a socket of this file), real git repositories and processes. The runs it
// starts belong to detached drivers, so killing the MCP server loses none of them.
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { request as httpRequest } from "node:http";
import { dirname, join } from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { execa } from "execa";
import { afterAll, describe, expect, it } from "vitest";
import { DecideOutput, PlanOutput, RunOutput, ValidateOutput, WaitOutput } from "../../src/contract/mcp.js";
import { Report } from "../../src/contract/report.js";
import { StatusView } from "../../src/contract/status-view.js";
import {
  BIN,
  cliEnv,
  git,
  isAlive,
  listFiles,
  ROOT,
  running,
  STEP,
  TEST_TMP,
  termorch,
  testFile,
  waitFor,
} from "./harness.js";

const { socket, workspace } = testFile("mcp");
const STUB = join(ROOT, "test", "fixtures", "agents", "interactive-stub");
const clients: Client[] = [];
afterAll(async () => {
  for (const c of clients) await c.close().catch(() => {});
});

/**
 * A client connected to a fresh `termorch mcp` in `cwd`. The server runs in a session and process
 * group of its own (as a terminal's or an agent CLI's child would), `pid` leading both.
 */
async function connect(cwd: string, args: string[] = []): Promise<{ client: Client; pid: number }> {
  const transport = new StdioClientTransport({
    command: "setsid",
    args: [process.execPath, BIN, "mcp", ...args],
    cwd,
    env: { ...(process.env as Record<string, string>), ...cliEnv(socket) },
    stderr: "pipe",
  });
  const client = new Client({ name: "termorch-test", version: "1" });
  await client.connect(transport);
  clients.push(client);
  return { client, pid: transport.pid! };
}

async function call(client: Client, name: string, args: Record<string, unknown>): Promise<CallToolResult> {
  return (await client.callTool({ name, arguments: args })) as CallToolResult;
}

/** A tool's answer, which must not be an error. */
async function ok(
  client: Client,
  name: string,
  args: Record<string, unknown>,
): Promise<Record<string, unknown>> {
  const r = await call(client, name, args);
  if (r.isError) throw new Error(`${name} failed: ${JSON.stringify(r.content)}`);
  return r.structuredContent as Record<string, unknown>;
}

/** Calls wait with each answer's cursor until the run is finished (bounded). */
async function waitFinished(
  client: Client,
  run: string,
): Promise<{ changes: WaitOutput["changes"]; last: WaitOutput }> {
  const changes: WaitOutput["changes"] = [];
  let cursor: string | undefined;
  for (let i = 0; i < 60; i++) {
    const w = WaitOutput.parse(
      await ok(client, "wait", { run, timeout_s: 20, ...(cursor ? { cursor } : {}) }),
    );
    changes.push(...w.changes);
    cursor = w.cursor;
    if (w.finished) return { changes, last: w };
  }
  throw new Error(`run ${run} did not finish`);
}

/** Three step.sh tasks: a and b write a file each, c depends on both. */
function threeTasks(extraEnv: Record<string, string> = {}) {
  return {
    environment: { workspace_dir: "repo" },
    tasks: ["a", "b", "c"].map((id) => ({
      id,
      agent: "step",
      context_path: "ctx/task.md",
      command: ["bash", STEP, "{context_path}"],
      dependencies: id === "c" ? ["a", "b"] : [],
      env: { WRITE: `${id}.txt=${id} was here`, ...extraEnv },
    })),
  };
}

describe("termorch mcp over stdio", () => {
  it("plan: a scripted planner's refused plan is fed back, the valid one is written and started; a bad objective is refused with nothing written", async () => {
    const { dir, repo } = workspace();
    const config = join(dir, "termorch.json");
    const planner = join(ROOT, "test", "fixtures", "agents", "planner.sh");
    writeFileSync(
      config,
      JSON.stringify({
        agents: {
          planner: { command: ["bash", planner] },
          step: { command: ["sh", "-c", "echo {task_id} was here > {task_id}.txt"] },
        },
      }),
    );
    const { client } = await connect(dir);
    const refused = await call(client, "plan", { objective: " \n", cwd: repo, agent: "planner", config });
    expect(refused.isError).toBe(true);
    expect(JSON.stringify(refused.content)).toContain("the objective is empty");
    expect(existsSync(join(repo, "assignments.json"))).toBe(false);

    const answer = PlanOutput.parse(
      await ok(client, "plan", {
        objective: "Write a.txt, then b.txt.",
        cwd: repo,
        agent: "planner",
        config,
        run: true,
        max_tokens: 1_000_000,
      }),
    );
    expect(answer.planner.tries.map((t) => t.problems.length)).toEqual([2, 0]);
    expect(answer.planner.budget).toEqual({ max_tokens: 1_000_000 });
    expect(answer.planner.tries[0]!.problems.join("\n")).toContain("dependency cycle: a -> b -> a");
    expect(answer.planner.tries[0]!.problems.join("\n")).toContain('unknown agent "nosuch"');
    expect(answer.waves).toEqual([["a"], ["b"]]);
    expect(answer.file).toBe(join(repo, "assignments.json"));
    expect(answer.decisions).toBe(join(repo, "assignments.plan", "decisions.md"));
    expect(answer.started).toMatchObject({ owner: "driver", tasks: 2 });
    await waitFinished(client, answer.started!.run_id);
    const report = Report.parse(
      JSON.parse(readFileSync(join(answer.started!.run_dir, "execution_report.json"), "utf8")),
    );
    expect(report.merge.result).toBe("success");
    expect(git(repo, "show", "HEAD:b.txt")).toBe("b was here\n");
  });

  it("lists its tools with schemas, and answers a bad document with every problem, located", async () => {
    const { dir } = workspace();
    const { client } = await connect(dir);
    const { tools } = await client.listTools();
    expect(tools.map((t) => t.name)).toEqual([
      "validate",
      "plan",
      "run",
      "status",
      "wait",
      "report",
      "logs",
      "send",
      "finish",
      "approve",
      "reject",
      "stop",
      "cancel",
      "agents",
    ]);
    for (const t of tools) {
      expect(t.description?.length).toBeGreaterThan(60);
      expect(t.inputSchema.type).toBe("object");
      expect(t.outputSchema?.type).toBe("object");
    }
    const bad = ValidateOutput.parse(
      await ok(client, "validate", {
        assignments: {
          environment: { workspace_dir: "repo" },
          tasks: [{ id: "a", agent: "step", context_path: "nope.md", dependencies: ["ghost"] }],
        },
      }),
    );
    expect(bad.valid).toBe(false);
    const text = bad.problems.map((p) => `${p.file} ${p.field ?? ""} ${p.message}`).join("\n");
    expect(text).toMatch(/\(inline assignments\) tasks\[0\]\.dependencies\[0\] .*ghost/);
    expect(text).toMatch(/nope\.md/);
    expect(text).toMatch(/unknown agent "step"/);
    // A file gets the same list, named by its path.
    writeFileSync(join(dir, "bad.json"), JSON.stringify({ tasks: [] }));
    const fromFile = ValidateOutput.parse(await ok(client, "validate", { path: "bad.json" }));
    expect(fromFile.valid).toBe(false);
    expect(fromFile.problems[0]?.file).toBe(join(dir, "bad.json"));
    // Wrong arguments and unknown runs are tool errors with termorch's message and kind, no stack.
    const wrong = await call(client, "wait", { run: 3 });
    expect(wrong.isError).toBe(true);
    expect(JSON.stringify(wrong.content)).toMatch(/field run: .*expected string.*exit code 2/);
    const unknown = await call(client, "report", { run: "no-such-run" });
    expect(unknown.isError).toBe(true);
    expect(unknown._meta?.["termorch/error"]).toMatchObject({ kind: "invalid_input", exit_code: 2 });
    expect(JSON.stringify(unknown)).not.toMatch(/\n\s+at /);
  });

  it("runs three tasks, follows them with wait until the report, and merges their work", async () => {
    const { dir, repo } = workspace();
    const { client } = await connect(dir);
    const doc = threeTasks();
    const checked = ValidateOutput.parse(await ok(client, "validate", { assignments: doc }));
    expect(checked).toMatchObject({ valid: true, waves: [["a", "b"], ["c"]] });
    const started = RunOutput.parse(await ok(client, "run", { assignments: doc }));
    expect(started).toMatchObject({ owner: "driver", tasks: 3 });
    expect(isAlive(started.pid!)).toBe(true);
    const { changes, last } = await waitFinished(client, started.run_id);
    const seen = changes.map((c) => ("task" in c ? `${c.event}:${c.task}` : c.event));
    for (const e of [
      "run_started",
      "task_started:a",
      "task_ended:b",
      "task_ended:c",
      "merge",
      "run_finished",
    ])
      expect(seen).toContain(e);
    expect(seen.indexOf("task_started:c")).toBeGreaterThan(seen.indexOf("task_ended:a"));
    expect(last).toMatchObject({ phase: "reported", exit_code: 0, tasks: { success: 3 } });
    const report = Report.parse(await ok(client, "report", { run: started.run_id }));
    expect(report.merge.result).toBe("success");
    expect(report.tasks.map((t) => t.status)).toEqual(["success", "success", "success"]);
    for (const id of ["a", "b", "c"])
      expect(readFileSync(join(repo, `${id}.txt`), "utf8")).toBe(`${id} was here\n`);
    // Status sees the same run (state.json says reported a moment after the ledger); the report
    // is a resource too.
    for (let i = 0; i < 100; i++) {
      const status = StatusView.parse(await ok(client, "status", { run: started.run_id }));
      if (status.runs[0]?.phase === "reported") break;
      expect(i, "status to say reported").toBeLessThan(99);
      await new Promise((r) => setTimeout(r, 50));
    }
    const resource = await client.readResource({ uri: `termorch://runs/${started.run_id}/report` });
    expect(JSON.parse((resource.contents[0] as { text: string }).text).run_id).toBe(started.run_id);
    const schema = await client.readResource({ uri: "termorch://schema/assignments" });
    expect((schema.contents[0] as { text: string }).text).toMatch(/"context_path"/);
    // A cursor from the end hears nothing more, at once.
    const after = WaitOutput.parse(
      await ok(client, "wait", { run: started.run_id, cursor: last.cursor, timeout_s: 30 }),
    );
    expect(after).toMatchObject({ changes: [], finished: true, timed_out: false });
    // A second document in the same folder (no repository: nothing keeps runs apart there) gets
    // a run folder of its own.
    const again = RunOutput.parse(
      await ok(client, "run", {
        assignments: { ...doc, tasks: [{ ...doc.tasks[0]!, id: "d", env: { WRITE: "d.txt=d" } }] },
      }),
    );
    expect(again.run_dir).not.toBe(started.run_dir);
    expect((await waitFinished(client, again.run_id)).last).toMatchObject({ exit_code: 0 });
    expect(readFileSync(join(repo, "d.txt"), "utf8")).toBe("d\n");
    // Outside a repository the folder kept for an inline document is its run's directory, which
    // termorch clean leaves as it is.
    const kept = JSON.parse(readFileSync(join(started.run_dir, "state.json"), "utf8"))
      .assignments_file as string;
    expect(dirname(kept)).toBe(started.run_dir);
    expect(
      started.run_dir.startsWith(join(TEST_TMP, `termorch-${process.getuid?.() ?? "user"}`, "mcp")),
    ).toBe(true);
    // The driver cleans up after its report (worktrees, branches): clean is for what it leaves.
    await waitFor(() => !running(started.pid!), 20_000, "the run's driver to exit");
    expect((await termorch(["clean", started.run_id], { socket })).exitCode).toBe(0);
    expect(existsSync(join(started.run_dir, "execution_report.json"))).toBe(true);
  });

  it("writes no secret value of an inline document to disk, and its run still gets it", async () => {
    const { repo } = workspace();
    // From inside the repository: its runs go to .termorch/runs/ there, the document apart.
    const { client } = await connect(repo);
    const secret = "s3cret-value-7f2a91";
    const digest = createHash("sha256").update(secret).digest("hex").slice(0, 16);
    const doc = {
      environment: { workspace_dir: ".", env_vars: [`API_TOKEN=${secret}`] },
      tasks: [
        {
          id: "a",
          agent: "sh",
          context_path: "ctx/task.md",
          // Compared by its hash: the document itself must not hold the value.
          command: [
            "sh",
            "-c",
            `[ "$(printf %s "$API_TOKEN" | sha256sum | cut -c1-16)" = ${digest} ] && echo seen > seen.txt`,
          ],
        },
      ],
    };
    const started = RunOutput.parse(await ok(client, "run", { assignments: doc }));
    await waitFinished(client, started.run_id);
    // Every file of the run, once its driver is done writing them.
    await waitFor(() => !running(started.pid!), 20_000, "the run's driver to exit");
    expect(readFileSync(join(repo, "seen.txt"), "utf8")).toBe("seen\n");
    const kept = join(TEST_TMP, `termorch-${process.getuid?.() ?? "user"}`, "mcp");
    const files = listFiles(kept).filter((f) => !f.endsWith("/"));
    expect(files.some((f) => f.endsWith("assignments.json"))).toBe(true);
    for (const f of files) expect(readFileSync(join(kept, f), "utf8")).not.toContain(secret);
    for (const f of listFiles(started.run_dir).filter((x) => !x.endsWith("/")))
      expect(readFileSync(join(started.run_dir, f), "utf8"), f).not.toContain(secret);
    expect(started.run_dir.startsWith(join(repo, ".termorch", "runs"))).toBe(true);
    // The document was kept for a resume until termorch clean finds its run finished.
    const doc0 = JSON.parse(readFileSync(join(started.run_dir, "state.json"), "utf8"))
      .assignments_file as string;
    expect(existsSync(doc0)).toBe(true);
    const cleaned = await termorch(["clean", started.run_id], { socket });
    expect(cleaned.stdout).toMatch(/removed the inline assignments termorch mcp kept/);
    expect(existsSync(dirname(doc0))).toBe(false);
    expect(existsSync(join(started.run_dir, "execution_report.json"))).toBe(true);
    // A task's env has no way to take a value from outside: a secret there is refused.
    const refused = ValidateOutput.parse(
      await ok(client, "validate", {
        assignments: { ...doc, tasks: [{ ...doc.tasks[0], env: { API_TOKEN: secret } }] },
      }),
    );
    expect(refused.problems).toEqual([
      expect.objectContaining({
        field: "tasks[0].env.API_TOKEN",
        message: expect.stringMatching(/secret's name/),
      }),
    ]);
  });

  it("answers an interactive task's question with send", async () => {
    const { dir, repo } = workspace();
    const out = join(dir, "out");
    mkdirSync(out);
    writeFileSync(
      join(dir, "termorch.json"),
      JSON.stringify({ agents: { istub: { command: [STUB], expect_changes: false } } }),
    );
    const { client } = await connect(dir);
    const started = RunOutput.parse(
      await ok(client, "run", {
        config: "termorch.json",
        assignments: {
          environment: { workspace_dir: "repo" },
          tasks: [
            {
              id: "ask",
              agent: "istub",
              context_path: "ctx/task.md",
              interactive: true,
              waiting_after_s: 1,
              env: { STUB_OUT: out },
            },
          ],
        },
      }),
    );
    // Until the stub took its prompt and waits for the answer to its question. Its screen may
    // also have gone still before the prompt came (then it waited once already): every change counts.
    let cursor: string | undefined;
    let asked = false;
    const seen: string[] = [];
    for (let i = 0; i < 20 && !asked; i++) {
      const w = WaitOutput.parse(
        await ok(client, "wait", { run: started.run_id, timeout_s: 20, ...(cursor ? { cursor } : {}) }),
      );
      cursor = w.cursor;
      seen.push(...w.changes.map((c) => c.event));
      asked = w.waiting_input.some((x) => x.task === "ask") && existsSync(join(out, "prompt.txt"));
      expect(w.finished).toBe(false);
    }
    expect(asked).toBe(true);
    expect(seen).toContain("task_waiting_input");
    expect(await ok(client, "send", { task: "ask", run: started.run_id, text: "blue" })).toMatchObject({
      task: "ask",
      detail: "sent",
    });
    const { last } = await waitFinished(client, started.run_id);
    expect(last).toMatchObject({ exit_code: 0, tasks: { success: 1 } });
    expect(readFileSync(join(repo, "answer.txt"), "utf8")).toBe("blue\n");
  });

  it("cancels a run: its agents end and its report says cancelled", async () => {
    const { dir } = workspace();
    const { client } = await connect(dir);
    const started = RunOutput.parse(await ok(client, "run", { assignments: threeTasks({ SLEEP: "300" }) }));
    let cursor: string | undefined;
    for (let running = false; !running; ) {
      const w = WaitOutput.parse(
        await ok(client, "wait", { run: started.run_id, timeout_s: 20, ...(cursor ? { cursor } : {}) }),
      );
      cursor = w.cursor;
      running = (w.tasks.running ?? 0) === 2;
    }
    const cancelled = await ok(client, "cancel", { run: started.run_id, wait_s: 40 });
    expect(cancelled).toMatchObject({ outcome: "reported", exit_code: 130 });
    const report = Report.parse(await ok(client, "report", { run: started.run_id }));
    expect(report.tasks.every((t) => t.status !== "success")).toBe(true);
    expect(report.merge.result).toBe("skipped");
    // Its driver ends once it has cleaned up after the report.
    await waitFor(() => !running(started.pid!), 20_000, "the run's driver to exit");
  });

  it("loses no run when its MCP server is killed: a new server finds it running, then finished", async () => {
    const { dir, repo } = workspace();
    const gate = join(dir, "go");
    const first = await connect(dir);
    const started = RunOutput.parse(
      await ok(first.client, "run", { assignments: threeTasks({ WAIT_FILE: gate }) }),
    );
    // Until both agents are launched (a task is running before its agent starts).
    const launched = new Set<string>();
    let seen: WaitOutput | null = null;
    while (launched.size < 2) {
      seen = WaitOutput.parse(
        await ok(first.client, "wait", {
          run: started.run_id,
          timeout_s: 10,
          ...(seen ? { cursor: seen.cursor } : {}),
        }),
      );
      for (const c of seen.changes) if (c.event === "task_started") launched.add(c.task);
    }
    // Nothing more happens while the agents wait for the gate: wait blocks, telling its progress.
    const progress: unknown[] = [];
    const quiet = (await first.client.callTool(
      { name: "wait", arguments: { run: started.run_id, cursor: seen?.cursor, timeout_s: 3 } },
      undefined,
      { onprogress: (p) => progress.push(p) },
    )) as CallToolResult;
    expect(quiet.structuredContent).toMatchObject({ changes: [], timed_out: true, phase: "running" });
    expect(progress.length).toBeGreaterThan(0);
    expect(progress[0]).toMatchObject({ total: 3, message: expect.stringMatching(/running/) });
    // The whole process group, as a client that ends its server's group (or a closed terminal) does.
    process.kill(-first.pid, "SIGKILL");
    await waitFor(() => !isAlive(first.pid), 10_000, "the MCP server to die");

    const second = await connect(dir);
    const status = StatusView.parse(await ok(second.client, "status", { run: started.run_id }));
    expect(status.runs[0]).toMatchObject({ phase: "running", driver_alive: true });
    writeFileSync(gate, "");
    const { last } = await waitFinished(second.client, started.run_id);
    expect(last).toMatchObject({ exit_code: 0, tasks: { success: 3 } });
    expect(
      git(repo, "log", "--format=%s")
        .split("\n")
        .filter((s) => s.startsWith("termorch: task")),
    ).toHaveLength(3);
  });

  it("a run whose folder is gone: wait, report, logs and status give the same clear error, at once", async () => {
    const { dir } = workspace();
    const { client } = await connect(dir);
    const started = RunOutput.parse(await ok(client, "run", { assignments: threeTasks() }));
    await waitFinished(client, started.run_id);
    await waitFor(() => !running(started.pid!), 20_000, "the run's driver to exit");
    const moved = `${started.run_dir}-moved`;
    renameSync(started.run_dir, moved);
    const calls: [string, Record<string, unknown>][] = [
      ["wait", { run: started.run_id, timeout_s: 30 }],
      ["report", { run: started.run_id }],
      ["logs", { task: "a", run: started.run_id }],
      ["status", { run: started.run_id }],
    ];
    for (const [name, args] of calls) {
      const at = Date.now();
      const r = await call(client, name, args);
      expect(r.isError, `${name} is an error`).toBe(true);
      const text = (r.content as { text: string }[])[0]!.text;
      expect(text, name).toContain(`run ${started.run_id}: its run directory ${started.run_dir} is gone`);
      expect(text, name).toContain(`termorch clean ${started.run_id}`);
      expect(text, name).toContain("exit code 2");
      // Not after a timeout: nothing will ever change there.
      expect(Date.now() - at, name).toBeLessThan(10_000);
    }
    // The hint holds: named by its new folder, the run is found.
    expect(WaitOutput.parse(await ok(client, "wait", { run: moved })).finished).toBe(true);
    expect(Report.parse(await ok(client, "report", { run: moved })).exit_code).toBe(0);
  });

  it("a wait under way ends with that error when the run's folder goes", async () => {
    const { dir } = workspace();
    const gate = join(dir, "go");
    const { client } = await connect(dir);
    const started = RunOutput.parse(
      await ok(client, "run", {
        assignments: {
          ...threeTasks({ WAIT_FILE: gate }),
          tasks: threeTasks({ WAIT_FILE: gate }).tasks.slice(0, 1),
        },
      }),
    );
    let seen: WaitOutput | null = null;
    while (!seen?.changes.some((c) => c.event === "task_started"))
      seen = WaitOutput.parse(
        await ok(client, "wait", {
          run: started.run_id,
          timeout_s: 10,
          ...(seen ? { cursor: seen.cursor } : {}),
        }),
      );
    // task_started is its launch; its move to running (journal, status file) follows, and would
    // write into the folder moved away: the folder is moved once that is done.
    await waitFor(
      () => existsSync(join(started.run_dir, "status", "a.running")),
      20_000,
      "task a's running status file",
    );
    const waiting = call(client, "wait", { run: started.run_id, cursor: seen.cursor, timeout_s: 45 });
    const moved = `${started.run_dir}-moved`;
    renameSync(started.run_dir, moved);
    const at = Date.now();
    const r = await waiting;
    expect(Date.now() - at).toBeLessThan(10_000);
    expect(r.isError).toBe(true);
    expect((r.content as { text: string }[])[0]!.text).toContain(
      `run ${started.run_id}: its run directory ${started.run_dir} is gone`,
    );
    // Put back, the run goes on to its end.
    renameSync(moved, started.run_dir);
    writeFileSync(gate, "");
    const { last } = await waitFinished(client, started.run_id);
    // Seen red once under load, not reproduced: the report says why if it is again.
    const why =
      last.exit_code === 0 ? "" : JSON.stringify(await ok(client, "report", { run: started.run_id }));
    expect(last.exit_code, why.slice(0, 4000)).toBe(0);
  });

  it("with --home, hands runs to that daemon, and refuses options the daemon decides", async () => {
    const { dir, repo } = workspace();
    const home = join(dir, "home");
    const daemon = execa(process.execPath, [BIN, "daemon", "--home", home], {
      reject: false,
      cwd: ROOT,
      env: cliEnv(socket),
    });
    try {
      await waitFor(() => existsSync(join(home, "inbox")), 20_000, "the daemon's inbox");
      const { client } = await connect(dir, ["--home", home]);
      const refused = await call(client, "run", { assignments: threeTasks(), max_parallel: 1 });
      expect(refused.isError).toBe(true);
      expect(JSON.stringify(refused.content)).toMatch(/runs with its own settings: max_parallel/);
      const started = RunOutput.parse(await ok(client, "run", { assignments: threeTasks() }));
      expect(started).toMatchObject({ owner: "daemon", pid: null, tasks: 3 });
      expect(started.run_dir.startsWith(join(home, "runs"))).toBe(true);
      const { last } = await waitFinished(client, started.run_dir);
      expect(last).toMatchObject({ exit_code: 0, tasks: { success: 3 } });
      expect(Report.parse(await ok(client, "report", { run: started.run_dir })).merge.result).toBe("success");
      for (const id of ["a", "b", "c"]) expect(existsSync(join(repo, `${id}.txt`))).toBe(true);
      const status = StatusView.parse(await ok(client, "status", {}));
      expect(status.runs.map((r) => r.run_dir)).toEqual([started.run_dir]);
    } finally {
      daemon.kill("SIGTERM");
      await daemon;
    }
  });
});

/** One task `a` that waits for a person's decision on its attempt's result; each attempt writes a.txt. */
function approvalTask(task: Record<string, unknown> = {}, env: Record<string, string> = {}) {
  return {
    environment: { workspace_dir: "repo" },
    tasks: [
      {
        id: "a",
        agent: "sh",
        context_path: "ctx/task.md",
        command: ["bash", "-c", 'echo "attempt $TERMORCH_ATTEMPT" > a.txt'],
        approval: "result",
        env,
        ...task,
      },
    ],
  };
}

/** Until task `a` waits for a decision on `attempt`'s result, as `status` shows it (bounded). */
async function waitsForApproval(client: Client, run: string, attempt: number): Promise<void> {
  await waitFor(
    async () => {
      const view = StatusView.parse(await ok(client, "status", { run }));
      expect(view.runs[0]?.phase, "the run to be under way").not.toBe("reported");
      return view.runs[0]?.tasks.find((t) => t.id === "a")?.waiting_approval?.attempt === attempt;
    },
    30_000,
    `task a to wait for approval of attempt ${attempt}`,
  );
}

/** The run's ledger events of one type. */
function ledgerEvents(
  runDir: string,
  type: string,
): Array<{ task_id?: string; data: Record<string, unknown> }> {
  return readFileSync(join(runDir, "events.jsonl"), "utf8")
    .split("\n")
    .filter((l) => l.trim() !== "")
    .map((l) => JSON.parse(l))
    .filter((e) => e.type === type);
}

const approvalsOf = (r: { run_id: string; run_dir: string }) =>
  join(r.run_dir, ".termorch", r.run_id, "approvals");

describe("termorch mcp approve and reject", () => {
  it("approve answers a task waiting on its result: the run finishes with it done, decided by mcp in the ledger", async () => {
    const { dir, repo } = workspace();
    const { client } = await connect(dir);
    const started = RunOutput.parse(await ok(client, "run", { assignments: approvalTask() }));
    // wait answers once the task waits, with what waits.
    const heard = await waitFor(
      async () => {
        let cursor: string | undefined;
        for (;;) {
          const w = WaitOutput.parse(
            await ok(client, "wait", { run: started.run_id, timeout_s: 20, ...(cursor ? { cursor } : {}) }),
          );
          const change = w.changes.find((c) => c.event === "waiting_approval");
          if (change || w.finished) return change ?? null;
          cursor = w.cursor;
        }
      },
      60_000,
      "wait to tell the approval's wait",
    );
    expect(heard).toMatchObject({ event: "waiting_approval", task: "a", what: "result", attempt: 1 });
    await waitsForApproval(client, started.run_id, 1);
    const approved = DecideOutput.parse(
      await ok(client, "approve", { run: started.run_id, task: "a", reason: "looks right" }),
    );
    expect(approved).toMatchObject({
      run_id: started.run_id,
      task: "a",
      decision: "approve",
      at: "result",
      attempt: 1,
      driver_live: true,
    });
    expect(approved.detail).toMatch(/^approved task a's attempt 1; its driver takes it/);
    const { last } = await waitFinished(client, started.run_id);
    expect(last).toMatchObject({ exit_code: 0, tasks: { success: 1 } });
    const report = Report.parse(await ok(client, "report", { run: started.run_id }));
    expect(report.tasks[0]).toMatchObject({ status: "success", attempts: 1 });
    expect(readFileSync(join(repo, "a.txt"), "utf8")).toBe("attempt 1\n");
    expect(ledgerEvents(started.run_dir, "task.approval_decided")).toEqual([
      expect.objectContaining({
        task_id: "a",
        data: expect.objectContaining({
          decision: "approve",
          by: "mcp",
          at: "result",
          attempt: 1,
          reason: "looks right",
        }),
      }),
    ]);
  });

  it("reject's reason is the next attempt's feedback; a rejection without one is refused", async () => {
    const { dir, repo } = workspace();
    const { client } = await connect(dir);
    const started = RunOutput.parse(await ok(client, "run", { assignments: approvalTask({ retries: 1 }) }));
    await waitsForApproval(client, started.run_id, 1);
    // No reason, or only blanks: refused by name, and nothing written for the driver.
    for (const args of [{}, { reason: "  \n " }]) {
      const refused = await call(client, "reject", { run: started.run_id, task: "a", ...args });
      expect(refused.isError).toBe(true);
      expect(refused._meta?.["termorch/error"]).toMatchObject({ kind: "invalid_input", exit_code: 2 });
      expect(JSON.stringify(refused.content)).toMatch(/field reason: a rejection needs its reason/);
    }
    expect(existsSync(approvalsOf(started))).toBe(false);
    const reason = "Use the other endpoint, /v2/items.";
    const rejected = DecideOutput.parse(
      await ok(client, "reject", { run: started.run_id, task: "a", reason }),
    );
    expect(rejected).toMatchObject({ decision: "reject", at: "result", attempt: 1, driver_live: true });
    await waitsForApproval(client, started.run_id, 2);
    const feedback = readFileSync(
      join(started.run_dir, "artifacts", "a", "attempt-2", "feedback.md"),
      "utf8",
    );
    expect(feedback).toContain(reason);
    await ok(client, "approve", { run: started.run_id, task: "a" });
    const { last } = await waitFinished(client, started.run_id);
    expect(last).toMatchObject({ exit_code: 0, tasks: { success: 1 } });
    expect(readFileSync(join(repo, "a.txt"), "utf8")).toBe("attempt 2\n");
    const decided = ledgerEvents(started.run_dir, "task.approval_decided").map((e) => e.data);
    expect(decided.map((d) => [d.decision, d.by, d.attempt, d.reason])).toEqual([
      ["reject", "mcp", 1, reason],
      ["approve", "mcp", 2, null],
    ]);
  });

  it("approve when nothing waits (a running task, the merge, an unknown task, a finished run) is a tool error that writes nothing", async () => {
    const { dir } = workspace();
    const gate = join(dir, "go");
    const { client } = await connect(dir);
    const started = RunOutput.parse(
      await ok(client, "run", {
        assignments: approvalTask({ command: ["bash", STEP] }, { WAIT_FILE: gate, WRITE: "a.txt=a" }),
      }),
    );
    // Its agent runs (held by the gate): it has not come to its approval yet.
    await waitFor(
      () => existsSync(join(started.run_dir, "status", "a.running")),
      20_000,
      "task a's running status file",
    );
    const refusals: [string, Record<string, unknown>, RegExp][] = [
      ["approve", { task: "a" }, /task a of run \S+ is not waiting for approval \(it is running\)/],
      ["reject", { task: "a", reason: "no" }, /task a of run \S+ is not waiting for approval/],
      ["approve", {}, /the merge of run \S+ is not waiting for approval; nothing of it waits/],
      ["approve", { task: "ghost" }, /run \S+ has no task ghost; its tasks: a/],
    ];
    for (const [name, args, message] of refusals) {
      const r = await call(client, name, { run: started.run_id, ...args });
      expect(r.isError, `${name} ${JSON.stringify(args)}`).toBe(true);
      expect(r._meta?.["termorch/error"]).toMatchObject({
        kind: "invalid_input",
        exit_code: 2,
        message: expect.stringMatching(message),
      });
      expect((r.content as { text: string }[])[0]!.text).toMatch(message);
    }
    expect(existsSync(approvalsOf(started))).toBe(false);
    // Once it waits, a rejection with no attempts left ends it; the run is finished then.
    writeFileSync(gate, "");
    await waitsForApproval(client, started.run_id, 1);
    await ok(client, "reject", { run: started.run_id, task: "a", reason: "not this" });
    const { last } = await waitFinished(client, started.run_id);
    expect(last).toMatchObject({ exit_code: 1, tasks: { failed: 1 } });
    const late = await call(client, "approve", { run: started.run_id, task: "a" });
    expect(late.isError).toBe(true);
    expect((late.content as { text: string }[])[0]!.text).toMatch(
      /run \S+ is finished \(exit 1\): nothing waits for a decision/,
    );
    expect(existsSync(join(approvalsOf(started), "a.json"))).toBe(false);
  });
});

describe("termorch mcp --http", () => {
  it("serves the same tools on loopback, to a client with the token and the server's Host only", async () => {
    const { dir } = workspace();
    const server = execa(process.execPath, [BIN, "mcp", "--http"], {
      reject: false,
      cwd: dir,
      env: cliEnv(socket),
      stdout: "pipe",
      stderr: "pipe",
    });
    try {
      const url = await new Promise<string>((resolve, reject) => {
        server.stdout?.on("data", (chunk: Buffer) => {
          const line = chunk.toString().split("\n")[0];
          if (line?.startsWith("http://")) resolve(line.trim());
        });
        server.catch(reject);
      });
      expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/mcp$/);
      const stderr: string[] = [];
      server.stderr?.on("data", (c: Buffer) => stderr.push(c.toString()));
      await waitFor(() => /Bearer (\S+)"/.exec(stderr.join("")), 10_000, "the token");
      const token = /Bearer (\S+)"/.exec(stderr.join(""))![1]!;
      const post = (headers: Record<string, string>) =>
        fetch(url, {
          method: "POST",
          headers: {
            "content-type": "application/json",
            accept: "application/json, text/event-stream",
            ...headers,
          },
          body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list", params: {} }),
        });
      expect((await post({})).status).toBe(401);
      expect((await post({ authorization: "Bearer wrong" })).status).toBe(401);
      // DNS rebinding: a page whose name was pointed at 127.0.0.1 sends its own name as Host.
      const port = new URL(url).port;
      const rebound = await new Promise<number>((resolve, reject) => {
        const req = httpRequest(
          {
            host: "127.0.0.1",
            port,
            path: "/mcp",
            method: "POST",
            headers: { host: `evil.example:${port}`, authorization: `Bearer ${token}` },
          },
          (res) => resolve(res.statusCode ?? 0),
        );
        req.on("error", reject);
        req.end("{}");
      });
      expect(rebound).toBe(403);

      const client = new Client({ name: "termorch-test-http", version: "1" });
      await client.connect(
        new StreamableHTTPClientTransport(new URL(url), {
          requestInit: { headers: { authorization: `Bearer ${token}` } },
        }),
      );
      clients.push(client);
      expect((await client.listTools()).tools).toHaveLength(14);
      const agents = (await ok(client, "agents", {})) as { agents: Array<{ name: string }> };
      expect(agents.agents.map((a) => a.name)).toContain("claude");
      const { last } = await (async () => {
        const started = RunOutput.parse(
          await ok(client, "run", {
            assignments: { ...threeTasks(), tasks: threeTasks().tasks.slice(0, 1) },
          }),
        );
        return waitFinished(client, started.run_id);
      })();
      expect(last).toMatchObject({ exit_code: 0, tasks: { success: 1 } });
    } finally {
      server.kill("SIGTERM");
      await server;
    }
  });
});
