// termorch plan (issue 39) through the real agent CLIs pinned in test/agents-real/package.json: the
// planner, headless in a copy of the repository (sandboxed, read-only, by default), reads its
// prompt (the objective, the assignments schema, the agents, the rules) and writes the plan with
// its CLI's own file tool where the prompt says (.termorch/plan/ in its working folder). The
// scripted model's first plan has a dependency cycle and an unknown agent; termorch refuses it and
// the planner's second request to the model carries both problems in its feedback section; the
// second plan is valid, and `plan --run` runs it to a merge through the same CLI. Then: a planner
// that edits the repository has its edit refused (by its sandbox), or discarded and its try
// refused (sandbox off); the workspace is unchanged either way. A planner that never writes a
// valid plan stops at --tries, or once its budget (--max-cost-usd) is spent.
import { execFileSync } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import type { Report } from "../../src/contract/report.js";
import { type CliRecipe, RECIPES, SECRET } from "./clis.js";
import { realAgentsSuite, stringsOf } from "./harness.js";
import type { RecordedRequest, Script, Step } from "./model-server.js";

const { world, server: modelServer } = realAgentsSuite("plan");

/** Every planner prompt starts so (planner-prompt.ts); a refused plan's feedback has this heading. */
const PLANNER_HEADING = "# Plan the work of an objective";
const REFUSED = "### termorch validate refused the plan";
const EDITED = "you changed files of the repository";
const OBJECTIVE = "Write a.txt, then b.txt. OBJECTIVE-MARK\n";
const PLAN = ".termorch/plan";

/** The writes of a plan: a context file per task, its assignments, its milestones. */
function planSteps(
  tasks: { id: string; agent: string; dependencies: string[]; allowed_paths?: string[] }[],
): Step[] {
  return [
    ...tasks.map((t) => ({
      write: `${PLAN}/tasks/${t.id}.md`,
      content: `PLANNED-TASK ${t.id}: write ${t.id}.txt\n`,
    })),
    {
      write: `${PLAN}/assignments.json`,
      content: JSON.stringify({
        run_id: `planned-${Math.random().toString(36).slice(2, 8)}`,
        tasks: tasks.map((t) => ({ ...t, context_path: `tasks/${t.id}.md` })),
      }),
    },
    {
      write: `${PLAN}/milestones.md`,
      content: "# Milestones\n\n## Summary\nTwo files, one after the other.\n",
    },
  ];
}

/**
 * The planner and the planned tasks. A planner's first try writes a cycle and an unknown agent
 * (and, with `edit`, writes over README.md first); told what was wrong, it writes a valid plan.
 */
function model(cli: CliRecipe, o: { edit?: boolean } = {}): Script {
  return (text) => {
    const prompt = stringsOf(text);
    if (prompt.includes(PLANNER_HEADING)) {
      const told = prompt.includes(REFUSED);
      const edit: Step[] =
        o.edit && !prompt.includes(EDITED)
          ? [{ read: "README.md" }, { write: "README.md", content: "the planner's own edit\n" }]
          : [];
      const steps =
        told || o.edit
          ? planSteps([
              { id: "a", agent: cli.preset, dependencies: [], allowed_paths: ["a.txt"] },
              { id: "b", agent: cli.preset, dependencies: ["a"], allowed_paths: ["b.txt"] },
            ])
          : planSteps([
              { id: "a", agent: "nosuch", dependencies: ["b"], allowed_paths: ["a.txt"] },
              { id: "b", agent: cli.preset, dependencies: ["a"], allowed_paths: ["b.txt"] },
            ]);
      return [...edit, ...steps, { reply: "Planned.", usage: { input: 3000, output: 200 } }];
    }
    const task = /PLANNED-TASK (\w+)/.exec(prompt)?.[1];
    if (task)
      return [
        { write: `${task}.txt`, content: `written for ${task}\n` },
        { reply: `Done: wrote ${task}.txt`, usage: { input: 500, output: 20 } },
      ];
    return [{ reply: "nothing scripted" }];
  };
}

function prepare(
  cli: CliRecipe,
  config: object = {},
): { dir: string; repo: string; objective: string; config: string } {
  const { dir, repo } = world.workspace();
  const objective = join(dir, "OBJECTIVE.md");
  writeFileSync(objective, OBJECTIVE);
  const file = join(dir, "termorch.json");
  writeFileSync(file, JSON.stringify({ agents: { [cli.preset]: cli.agent(modelServer().url) }, ...config }));
  return { dir, repo, objective, config: file };
}

/** `termorch plan` of the prepared objective, by `cli` with its key by name, and `extra` flags. */
const planArgs = (cli: CliRecipe, p: { objective: string; config: string }, ...extra: string[]): string[] => [
  "plan",
  p.objective,
  "--agent",
  cli.preset,
  "--config",
  p.config,
  "--env",
  cli.keyVar,
  ...extra,
];

const plannerRequests = (from: number, cli: CliRecipe): RecordedRequest[] =>
  modelServer()
    .requests.slice(from)
    .filter((q) => q.main && q.protocol === cli.protocol && stringsOf(q.text).includes(PLANNER_HEADING));

/** What git sees in the repository besides its commit: the plan's two entries, and nothing else. */
const ONLY_THE_PLAN = "?? assignments.json\n?? assignments.plan/\n";
const statusOf = (repo: string): string =>
  execFileSync("git", ["-C", repo, "status", "--porcelain", "--ignored"], { encoding: "utf8" });

describe.each([RECIPES.claude, RECIPES.codex, RECIPES.gemini, RECIPES.opencode])(
  "$preset as the planner",
  (cli) => {
    it(`${cli.preset}'s first plan (a cycle, an unknown agent) is refused; its second request carries both problems; the valid plan runs to a merge (plan --run)`, async () => {
      modelServer().setScript(model(cli));
      const p = prepare(cli);
      const before = modelServer().requests.length;
      const r = await world.termorch(planArgs(cli, p, "--run", "--json"), {
        cwd: p.repo,
        env: { [cli.keyVar]: SECRET },
      });
      expect(r.exitCode, r.stderr).toBe(0);
      console.log(`[plan] ${cli.preset}:\n${r.stderr}`);
      // Try 1 refused with both problems, try 2 taken.
      expect(r.stderr).toContain("try 1: 2 problems, given back to the planner");
      expect(r.stderr).toContain("dependency cycle: a -> b -> a");
      expect(r.stderr).toContain('unknown agent "nosuch"');
      expect(r.stderr).toContain("try 2: valid");
      expect(r.stderr).toMatch(/2 tasks in 2 waves/);
      expect(r.stderr).toContain("critical path: a -> b");

      // What the planner's CLI asked the model: the objective and the schema first; once refused,
      // both problems in the feedback section of its second try's first request.
      const asked = plannerRequests(before, cli);
      const first = asked.filter((q) => !stringsOf(q.text).includes(REFUSED));
      const second = asked.filter((q) => stringsOf(q.text).includes(REFUSED));
      expect(first.length).toBeGreaterThan(0);
      expect(second.length).toBeGreaterThan(0);
      expect(stringsOf(first[0]!.text)).toContain("OBJECTIVE-MARK");
      expect(stringsOf(first[0]!.text)).toContain('"$schema"');
      const told = stringsOf(second[0]!.text);
      expect(told).toContain("dependency cycle: a -> b -> a");
      expect(told).toContain('unknown agent "nosuch"');
      expect(second[0]!.step).toBe(0);

      // The plan in the workspace: the file, its context files, its milestones; the key's name, never its value.
      const file = JSON.parse(readFileSync(join(p.repo, "assignments.json"), "utf8"));
      expect(file.tasks.map((t: { context_path: string }) => t.context_path)).toEqual([
        "assignments.plan/tasks/a.md",
        "assignments.plan/tasks/b.md",
      ]);
      expect(file.environment).toEqual({ env_vars: [cli.keyVar], workspace_dir: "." });
      expect(readFileSync(join(p.repo, "assignments.plan", "milestones.md"), "utf8")).toContain(
        "# Milestones",
      );
      expect(readFileSync(join(p.repo, "assignments.json"), "utf8")).not.toContain(SECRET);

      // Run: both tasks, by the same CLI, merged.
      const report = JSON.parse(r.stdout) as Report;
      expect(report.tasks.map((t) => [t.id, t.status])).toEqual([
        ["a", "success"],
        ["b", "success"],
      ]);
      expect(report.merge.result).toBe("success");
      for (const id of ["a", "b"])
        expect(execFileSync("git", ["-C", p.repo, "show", `HEAD:${id}.txt`], { encoding: "utf8" })).toBe(
          `written for ${id}\n`,
        );
    });
  },
);

describe("a planner that edits the repository", () => {
  it("codex in its own sandbox (none configured): its write is refused, the plan is taken, the workspace holds only the plan", async () => {
    const cli = RECIPES.codex;
    modelServer().setScript(model(cli, { edit: true }));
    const p = prepare(cli);
    const r = await world.termorch(planArgs(cli, p), { cwd: p.repo, env: { [cli.keyVar]: SECRET } });
    expect(r.exitCode, r.stderr).toBe(0);
    expect(r.stderr).toContain("try 1: valid");
    // It ran sandboxed, its copy read-only: its write failed there, so there was nothing to discard.
    const session = /\(logs: ([^)]+)\)/.exec(r.stdout)![1]!;
    const events = readFileSync(join(session, "events.jsonl"), "utf8").split("\n").filter(Boolean);
    const started = events.map((l) => JSON.parse(l)).find((e) => e.type === "plan.planner_started");
    expect(started.data).toMatchObject({ agent: "codex", sandboxed: true });
    expect(readFileSync(join(p.repo, "README.md"), "utf8")).toBe("hello\n");
    expect(statusOf(p.repo)).toBe(ONLY_THE_PLAN);
  });

  it("opencode with the sandbox off: its edit is discarded and its try refused; told so, it plans without editing; the workspace is unchanged", async () => {
    const cli = RECIPES.opencode;
    modelServer().setScript(model(cli, { edit: true }));
    const p = prepare(cli, { defaults: { sandbox: "off" } });
    const before = modelServer().requests.length;
    const r = await world.termorch(planArgs(cli, p, "--tries", "2"), {
      cwd: p.repo,
      env: { [cli.keyVar]: SECRET },
    });
    expect(r.exitCode, r.stderr).toBe(0);
    expect(r.stderr).toContain(`try 1: 1 problem, given back to the planner:\n  - ${EDITED}`);
    expect(r.stderr).toContain("README.md (discarded)");
    expect(r.stderr).toContain("try 2: valid");
    // Its CLI did write over README.md in its copy: the tool's answer went back to the model.
    expect(plannerRequests(before, cli).some((q) => stringsOf(q.text).includes(EDITED))).toBe(true);
    expect(readFileSync(join(p.repo, "README.md"), "utf8")).toBe("hello\n");
    expect(statusOf(p.repo)).toBe(ONLY_THE_PLAN);
  });
});

describe("a planner that writes no valid plan", () => {
  it("at its budget: no try starts once --max-cost-usd is spent (claude reports its cost)", async () => {
    const cli = RECIPES.claude;
    // The same bad plan each time, at about $0.02 a try as claude prices the scripted usage.
    modelServer().setScript(() => [
      ...planSteps([{ id: "a", agent: "nosuch", dependencies: [], allowed_paths: ["a.txt"] }]),
      { reply: "Planned.", usage: { input: 3000, output: 200 } },
    ]);
    const p = prepare(cli);
    const r = await world.termorch(planArgs(cli, p, "--tries", "5", "--max-cost-usd", "0.03"), {
      cwd: p.repo,
      env: { [cli.keyVar]: SECRET },
    });
    expect(r.exitCode, r.stderr).toBe(1);
    expect(r.stderr).toMatch(
      /the planner's budget of \$0\.0300 is spent: \$0\.0[3-9]\d*, and none of its 2 tries wrote a valid plan/,
    );
    expect(r.stderr).toContain("try 2:");
    expect(r.stderr).not.toContain("try 3:");
    expect(statusOf(p.repo)).toBe("");
  });

  it("within its tries: exit 1, and nothing in the workspace", async () => {
    const cli = RECIPES.claude;
    // Never told anything it can use: it writes the same bad plan each time.
    modelServer().setScript(() => [
      ...planSteps([
        { id: "a", agent: "nosuch", dependencies: ["b"], allowed_paths: ["a.txt"] },
        { id: "b", agent: cli.preset, dependencies: ["a"], allowed_paths: ["b.txt"] },
      ]),
      { reply: "Planned." },
    ]);
    const p = prepare(cli);
    const r = await world.termorch(planArgs(cli, p, "--tries", "2"), {
      cwd: p.repo,
      env: { [cli.keyVar]: SECRET },
    });
    expect(r.exitCode, r.stderr).toBe(1);
    expect(r.stderr).toContain("wrote no valid plan in 2 tries");
    expect(r.stderr).toContain("nothing was written to the workspace");
    expect(statusOf(p.repo)).toBe("");
  });
});
