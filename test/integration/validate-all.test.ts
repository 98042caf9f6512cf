import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { Report } from "../../src/contract/report.js";
import { daemonTestFile } from "./daemon-harness.js";
import { termorch, waitFor } from "./harness.js";

const { socket, home, startDaemon, ready, job, answer, readAnswer } = daemonTestFile("validate-all");

/**
 * Tasks with one problem of every kind: a schema problem (B's timeout), a dependency cycle
 * (A -> C -> B -> A), an unknown dependency, an unknown agent and a missing context file in
 * tasks that parsed, a task without an id, and a duplicate id.
 */
const TASKS = [
  { id: "A", dependencies: ["C"], context_path: "ctx/none.md" },
  { id: "B", dependencies: ["A"], timeout_s: -1 },
  { id: "C", dependencies: ["B", "ghost"] },
  { id: "D", agent: "nobody", command: undefined },
  { context_path: "ctx/task.md" },
  { id: "B" },
];

/** Each problem as the CLI prints it (file, field, task: message). */
const EXPECTED = [
  /field tasks\[1\]\.timeout_s, task B: Too small/,
  /field tasks\[4\]\.id, task #4: Invalid input: expected string/,
  /field tasks\[5\]\.id, task B: duplicate task id "B" \(also tasks\[1\]\)/,
  /field tasks\[2\]\.dependencies\[1\], task C: depends on unknown task "ghost"/,
  /field tasks\[0\]\.dependencies, task A: dependency cycle: A -> C -> B -> A/,
  /field tasks\[0\]\.context_path, task A: "ctx\/none\.md" does not exist/,
  /field tasks\[3\]\.agent, task D: unknown agent "nobody"/,
];

describe("every problem of an input file in one pass", () => {
  it("validate and run list schema, graph, agent and path problems together", async () => {
    const h = home();
    const j = job(h, "partly-bad", TASKS);
    const file = join(h, "partly-bad.json");
    writeFileSync(file, JSON.stringify(j.body));
    for (const args of [
      ["validate", file],
      ["run", file],
    ]) {
      const result = await termorch(args, { socket });
      expect(result.exitCode).toBe(2);
      for (const re of EXPECTED) expect(result.stderr, args[0]).toMatch(re);
      expect(result.stderr.split("\n").filter((l) => l.includes("partly-bad.json"))).toHaveLength(
        EXPECTED.length,
      );
    }
    // The run's error report names the run the file was for.
    const report = Report.parse(JSON.parse(readFileSync(join(h, "execution_report.json"), "utf8")));
    expect(report.run_id).toBe("partly-bad");
    expect(report.error?.problems).toHaveLength(EXPECTED.length);
  });

  it("a missing workspace hides neither the schema nor the agent problems", async () => {
    const h = home();
    const j = job(h, "nowhere", [{ id: "A", agent: "nobody", command: undefined, retries: -1 }]);
    (j.body.environment as Record<string, unknown>).workspace_dir = join(h, "missing");
    const file = join(h, "nowhere.json");
    writeFileSync(file, JSON.stringify(j.body));
    const result = await termorch(["validate", file], { socket });
    expect(result.exitCode).toBe(2);
    expect(result.stderr).toMatch(/field tasks\[0\]\.retries, task A: Too small/);
    expect(result.stderr).toMatch(
      /field environment\.workspace_dir: workspace ".*missing".* is not an existing directory/,
    );
    expect(result.stderr).toMatch(/field tasks\[0\]\.agent, task A: unknown agent "nobody"/);
  });

  it("names every bad redaction pattern of the config, whichever engine refuses it", async () => {
    const h = home();
    const j = job(h, "patterns", [{ id: "A" }]);
    const file = join(h, "patterns.json");
    writeFileSync(file, JSON.stringify(j.body));
    const config = join(h, "config.json");
    // JavaScript refuses the first, Perl the third (a variable-length lookbehind); the fourth
    // parses but is too large for V8 to compile, which it does only at first use.
    writeFileSync(
      config,
      JSON.stringify({ redact: ["a(", "fine-[0-9]+", "a(?<=x+)b", "x".repeat(100_000)] }),
    );
    const result = await termorch(["validate", file, "--config", config], { socket });
    expect(result.exitCode).toBe(2);
    expect(result.stderr).toMatch(/config\.json, field redact\[0\]: invalid pattern: /);
    expect(result.stderr).toMatch(
      /config\.json, field redact\[2\]: invalid pattern for the pane supervisor \(Perl\)/,
    );
    expect(result.stderr).toMatch(/field redact\[3\]: invalid pattern: Regular expression too large\n/);
    expect(result.stderr.length).toBeLessThan(2000);
    expect(result.stderr).not.toMatch(/redact\[1\]/);
  });

  it("an invalid config hides none of the assignments file's problems (nor invents unknown agents)", async () => {
    const h = home();
    const j = job(h, "both-bad", [{ id: "A", agent: "nobody", command: undefined, retries: -1 }]);
    const file = join(h, "both-bad.json");
    writeFileSync(file, JSON.stringify(j.body));
    const config = join(h, "config.json");
    writeFileSync(config, JSON.stringify({ redact: ["a("], agnets: {} }));
    for (const args of [
      ["validate", file, "--config", config],
      ["run", file, "--config", config],
    ]) {
      const result = await termorch(args, { socket });
      expect(result.exitCode).toBe(2);
      expect(result.stderr).toMatch(/config\.json, field \(root\): unknown key "agnets"/);
      expect(result.stderr).toMatch(/both-bad\.json, field tasks\[0\]\.retries, task A: Too small/);
      // The agents are unknown while the config is broken: no "unknown agent" guess.
      expect(result.stderr).not.toMatch(/unknown agent/);
    }
  });

  it("validate refuses what run refuses in the workspace's repository: a tracked worktree_include path", async () => {
    const h = home();
    const j = job(h, "tracked", [{ id: "A" }]);
    j.body.environment.worktree_include = [
      "ctx",
      "README.md",
      "./README.md",
      "ctx/../README.md",
      "README.md/",
    ];
    const file = join(h, "tracked.json");
    writeFileSync(file, JSON.stringify(j.body));
    for (const command of ["validate", "run"]) {
      const result = await termorch([command, file], { socket });
      expect(result.exitCode, command).toBe(2);
      expect(result.stderr).toMatch(
        /tracked\.json, field environment\.worktree_include\[0\]: "ctx" is tracked by git/,
      );
      expect(result.stderr).toMatch(
        /tracked\.json, field environment\.worktree_include\[1\]: "README\.md" is tracked/,
      );
      // Other spellings of the same tracked file, as linkIncludes would name them.
      for (const i of [2, 3, 4])
        expect(result.stderr).toMatch(new RegExp(`worktree_include\\[${i}\\]: ".*README\\.md/?" is tracked`));
    }
  });

  it("refuses the task ids termorch's own branches use (integration, moved)", async () => {
    const h = home();
    const j = job(h, "reserved", [{ id: "integration" }, { id: "moved", dependencies: ["integration"] }]);
    const file = join(h, "reserved.json");
    writeFileSync(file, JSON.stringify(j.body));
    const result = await termorch(["validate", file], { socket });
    expect(result.exitCode).toBe(2);
    expect(result.stderr).toMatch(/field tasks\[0\]\.id, task integration: "integration" is reserved/);
    expect(result.stderr).toMatch(/field tasks\[1\]\.id, task moved: "moved" is reserved/);
  });

  it("an unknown agent's message says whether a config was found", async () => {
    const h = home();
    const j = job(h, "agentless", [{ id: "A", agent: "nobody", command: undefined }]);
    const file = join(h, "agentless.json");
    writeFileSync(file, JSON.stringify(j.body));
    const config = join(h, "empty-config.json");
    writeFileSync(config, "{}");
    const withConfig = await termorch(["validate", file, "--config", config], { socket });
    expect(withConfig.stderr).toContain(
      `unknown agent "nobody" (the config file ${config} defines no agents)`,
    );
    const without = await termorch(["validate", file], { socket });
    expect(without.stderr).toContain("no config file was found, so no agents are defined");
  });

  it("the daemon's answer carries the file's run_id and every problem", async () => {
    const h = home();
    void startDaemon(h);
    await ready(h);
    job(h, "partly-bad", TASKS).drop("dropped-under-another-name.json");
    await waitFor(() => existsSync(answer(h, "partly-bad")), 30_000, "the answer");
    const report = readAnswer(h, "partly-bad");
    expect(report.run_id).toBe("partly-bad");
    expect(report.exit_code).toBe(2);
    expect(report.error?.kind).toBe("invalid_input");
    const problems = (report.error?.problems ?? []).map(
      (p) => `field ${p.field}${p.task ? `, task ${p.task}` : ""}: ${p.message}`,
    );
    expect(problems).toHaveLength(EXPECTED.length);
    for (const re of EXPECTED)
      expect(
        problems.some((p) => re.test(p)),
        String(re),
      ).toBe(true);
  });
});
