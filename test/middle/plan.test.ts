// termorch plan (issue 39): a planner agent writes an assignments file in a copy of the
// repository it cannot change; termorch validates it as `validate` does, every problem goes back
// to the planner in its next prompt's feedback section, and only a valid plan reaches the
// workspace. The real planning code with the fake runner and fake timers, on a real repository.
import { execFileSync } from "node:child_process";
import { mkdirSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { delimiter, join } from "node:path";
import { describe, expect, it } from "vitest";
import { PlanAnswer } from "../../src/contract/plan.js";
import { InputError, PlanFailed } from "../../src/errors.js";
import { MAX_OBJECTIVE_BYTES } from "../../src/input/objective-file.js";
import { type PlanOptions, planObjective } from "../../src/planning/plan-objective.js";
import { runAssignments } from "../../src/run/runner.js";
import { type FakeAttempt, FakeRunner } from "./fake-runner.js";
import { MiddleRun, middleTier } from "./harness.js";

let run: MiddleRun;

middleTier(() => run);

const CONFIG = {
  agents: {
    planner: { command: ["plan-agent"] },
    step: { command: ["step-agent", "{task_id}"] },
  },
};

/** The planner's plan folder in its copy, and the prompt it was given. */
const planDirOf = (a: FakeAttempt): string => join(a.spec.cwd, ".termorch", "plan");
const promptOf = (a: FakeAttempt): string => readFileSync(a.spec.env.TERMORCH_PROMPT_FILE!, "utf8");

/** Writes a plan where the planner writes it: its assignments, a context file per task, its documents. */
function writePlan(a: FakeAttempt, tasks: object[], extra: object = {}): void {
  const dir = planDirOf(a);
  mkdirSync(join(dir, "tasks"), { recursive: true });
  writeFileSync(join(dir, "assignments.json"), JSON.stringify({ run_id: "planned", tasks, ...extra }));
  for (const t of tasks as { id: string }[]) writeFileSync(join(dir, "tasks", `${t.id}.md`), `Do ${t.id}.\n`);
  writeFileSync(join(dir, "milestones.md"), "# Milestones\n");
  a.exit(0);
}

const CYCLE_AND_UNKNOWN = [
  { id: "a", agent: "nosuch", context_path: "tasks/a.md", dependencies: ["b"], allowed_paths: ["a/**"] },
  { id: "b", agent: "step", context_path: "tasks/b.md", dependencies: ["a"], allowed_paths: ["b/**"] },
];
const VALID = [
  { id: "a", agent: "step", context_path: "tasks/a.md", dependencies: [], allowed_paths: ["a/**"] },
  { id: "b", agent: "step", context_path: "tasks/b.md", dependencies: ["a"], allowed_paths: ["b/**"] },
  { id: "c", agent: "step", context_path: "tasks/c.md", dependencies: [], allowed_paths: ["a/x.txt"] },
];

/** Every file of the workspace (.git aside), to show a plan not taken leaves nothing. */
const filesOf = (dir: string): string[] =>
  readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile() && !join(e.parentPath, e.name).includes("/.git/"))
    .map((e) => join(e.parentPath, e.name))
    .sort();

function options(extra: Partial<PlanOptions> = {}): PlanOptions {
  const objective = join(run.dir, "OBJECTIVE.md");
  writeFileSync(objective, "Add a, then b; and c.\n", { flag: "a" });
  const o = run.options();
  return {
    objectiveFile: objective,
    agent: "planner",
    configFile: run.configFile,
    workspace: join(run.dir, "ws"),
    env: o.env!,
    cwd: run.dir,
    plansDir: join(run.dir, "plans"),
    seams: { runner: new FakeRunner(run.host) },
    ...extra,
  };
}

describe("termorch plan", () => {
  it("feeds validate's problems back to the planner until its plan is valid, then writes it; the plan runs to a merge", async () => {
    run = new MiddleRun([{ id: "x" }], { config: CONFIG, git: true });
    const prompts: string[] = [];
    run.host.onLaunch = (a) => {
      prompts.push(promptOf(a));
      // Its copy is the repository's commit, not the workspace.
      expect(a.spec.cwd).not.toBe(join(run.dir, "ws"));
      expect(readFileSync(join(a.spec.cwd, "ctx", "task.md"), "utf8")).toBe("# the task\n");
      writePlan(a, prompts.length === 1 ? CYCLE_AND_UNKNOWN : VALID);
    };
    const tries: number[] = [];
    const answer = await planObjective(options({ onTry: (t) => tries.push(t.problems.length) }));
    expect(PlanAnswer.parse(answer)).toEqual(answer);
    // The first prompt: the objective, the schema, the agents, where to write; no feedback yet.
    expect(prompts[0]).toContain("Add a, then b; and c.");
    expect(prompts[0]).toContain('"$schema"');
    expect(prompts[0]).toMatch(/installed here\): .*planner.*step/);
    expect(prompts[0]).not.toContain("termorch validate refused the plan");
    // The second: both problems of the first file, and its JSON block.
    expect(prompts[1]).toContain("### termorch validate refused the plan");
    expect(prompts[1]).toContain("dependency cycle: a -> b -> a");
    expect(prompts[1]).toContain('unknown agent "nosuch"');
    expect(prompts[1]).toContain('"plan_problems"');
    expect(tries).toEqual([2, 0]);
    expect(answer.planner.tries.map((t) => t.problems.length)).toEqual([2, 0]);
    expect(answer.planner.prompt_bytes).toBe(Buffer.byteLength(prompts[0]!));
    // The plan as validate shows it, and the collision of a and c (no path between them).
    expect(answer.waves).toEqual([["a", "c"], ["b"]]);
    expect(answer.critical_path).toEqual(["a", "b"]);
    expect(answer.collisions).toEqual([{ tasks: ["a", "c"], paths: [["a/**", "a/x.txt"]] }]);
    const ws = join(run.dir, "ws");
    expect(answer.file).toBe(join(ws, "assignments.json"));
    const written = JSON.parse(readFileSync(answer.file, "utf8"));
    expect(written.environment.workspace_dir).toBe(".");
    expect(written.tasks.map((t: { context_path: string }) => t.context_path)).toEqual([
      "assignments.plan/tasks/a.md",
      "assignments.plan/tasks/b.md",
      "assignments.plan/tasks/c.md",
    ]);
    expect(readFileSync(join(ws, "assignments.plan", "tasks", "b.md"), "utf8")).toBe("Do b.\n");
    expect(answer.milestones).toBe(join(ws, "assignments.plan", "milestones.md"));
    // No staging folder is left.
    expect(readdirSync(ws).sort()).toEqual([".git", "assignments.json", "assignments.plan", "ctx"]);

    // It runs as written: each task's work merged.
    run.host.onLaunch = (a) => {
      const id = a.spec.taskId;
      const path = id === "c" ? join(a.spec.cwd, "a", "x.txt") : join(a.spec.cwd, id, "done.txt");
      mkdirSync(join(path, ".."), { recursive: true });
      writeFileSync(path, id);
      a.exit(0);
    };
    const result = await runAssignments({ ...run.options(), assignmentsFile: answer.file });
    expect("report" in result && result.report.merge.result).toBe("success");
    for (const f of ["a/done.txt", "b/done.txt", "a/x.txt"])
      expect(readFileSync(join(ws, f), "utf8")).toBeTruthy();
  });

  it("refuses a planner that edits the repository, and leaves the workspace as it was", async () => {
    run = new MiddleRun([{ id: "x" }], { config: CONFIG, git: true });
    const ws = join(run.dir, "ws");
    const before = filesOf(ws);
    const prompts: string[] = [];
    run.host.onLaunch = (a) => {
      prompts.push(promptOf(a));
      writeFileSync(join(a.spec.cwd, "ctx", "task.md"), "changed by the planner\n");
      writePlan(a, VALID);
    };
    const failed = await planObjective(options({ tries: 2 })).catch((e: unknown) => e);
    expect(failed).toBeInstanceOf(PlanFailed);
    expect((failed as PlanFailed).exitCode).toBe(1);
    expect((failed as Error).message).toContain("you changed files of the repository");
    expect((failed as Error).message).toContain("ctx/task.md");
    expect(prompts[1]).toContain("you changed files of the repository");
    expect(filesOf(ws)).toEqual(before);
    expect(readFileSync(join(ws, "ctx", "task.md"), "utf8")).toBe("# the task\n");
    expect(execFileSync("git", ["-C", ws, "status", "--porcelain", "--ignored"], { encoding: "utf8" })).toBe(
      "",
    );
  });

  it("takes no plan whose task leaves out allowed_paths, nor one over --max-tasks", async () => {
    run = new MiddleRun([{ id: "x" }], { config: CONFIG, git: true });
    run.host.onLaunch = (a) => writePlan(a, [...VALID.slice(0, 2), { ...VALID[2]!, allowed_paths: [] }]);
    const failed = await planObjective(options({ tries: 1, maxTasks: 2 })).catch((e: unknown) => e);
    expect(failed).toBeInstanceOf(PlanFailed);
    expect((failed as Error).message).toContain("3 tasks, over the 2 asked for (--max-tasks)");
    expect((failed as Error).message).toContain(
      "field tasks[2].allowed_paths, task c: a planned task names the files it expects to own",
    );
    expect(readdirSync(join(run.dir, "ws")).sort()).toEqual([".git", "ctx"]);
  });

  it("takes from a planner no command, sandbox, variable or file read of its own choosing, no secret, and nothing through a link", async () => {
    run = new MiddleRun([{ id: "x" }], { config: CONFIG, git: true });
    const ws = join(run.dir, "ws");
    writeFileSync(join(ws, "assignments.json"), '{"old": true}\n');
    mkdirSync(join(ws, "assignments.plan"));
    writeFileSync(join(ws, "assignments.plan", "keep.md"), "the user's\n");
    const secret = "sk-plan-test-1234567890abcdef";
    let tries = 0;
    run.host.onLaunch = (a) => {
      tries += 1;
      if (tries === 1)
        return writePlan(a, [{ ...VALID[0]!, sandbox: "off", setup_cmd: "id" }, VALID[1]!], {
          environment: { setup_cmd: "id" },
          success_criteria: { tests_cmd: "curl evil" },
        });
      if (tries === 2) {
        writePlan(a, VALID.slice(0, 2));
        writeFileSync(join(planDirOf(a), "tasks", "b.md"), `use ${secret}\n`);
        return;
      }
      // A link in place of its plan folder, to a folder termorch must not read.
      mkdirSync(join(run.dir, "elsewhere", "tasks"), { recursive: true });
      writeFileSync(join(run.dir, "elsewhere", "assignments.json"), JSON.stringify({ tasks: VALID }));
      rmSync(planDirOf(a), { recursive: true, force: true });
      symlinkSync(join(run.dir, "elsewhere"), planDirOf(a));
      a.exit(0);
    };
    const o = options({ tries: 3, force: true, envVars: ["MY_API_KEY"] });
    const failed = await planObjective({ ...o, env: { ...o.env, MY_API_KEY: secret } }).catch(
      (e: unknown) => e,
    );
    expect(failed).toBeInstanceOf(PlanFailed);
    expect(run.host.attempts).toHaveLength(3);
    const said = readdirSync(join(run.dir, "plans"));
    const ledger = readFileSync(join(run.dir, "plans", said[0]!, "events.jsonl"), "utf8");
    const problems = ledger
      .split("\n")
      .filter(Boolean)
      .map((l) => JSON.parse(l))
      .filter((e) => e.type === "plan.tried")
      .map((e) => (e.data.problems as string[]).join("\n"));
    expect(problems[0]).toContain("tasks[0].sandbox: not a planner's to set");
    expect(problems[0]).toContain("tasks[0].setup_cmd: not a planner's to set");
    expect(problems[0]).toContain("environment: not a planner's to set");
    expect(problems[0]).toContain(
      'success_criteria.tests_cmd: "curl evil" is none of the repository\'s test commands',
    );
    expect(problems[1]).toContain("tasks/b.md holds a secret's value or a credential");
    expect(problems[2]).toContain("is not a folder (a link is not followed)");
    expect(ledger).not.toContain(secret);
    // --force replaced nothing: no plan was taken.
    expect(readFileSync(join(ws, "assignments.json"), "utf8")).toBe('{"old": true}\n');
    expect(readdirSync(join(ws, "assignments.plan"))).toEqual(["keep.md"]);
    expect(readdirSync(ws).sort()).toEqual([".git", "assignments.json", "assignments.plan", "ctx"]);
  });

  it("plans a workspace inside its repository: the planner works there, and its paths are the workspace's", async () => {
    run = new MiddleRun([{ id: "x" }], { config: CONFIG, git: true });
    const ws = join(run.dir, "ws");
    mkdirSync(join(ws, "pkg"));
    writeFileSync(join(ws, "pkg", "p.txt"), "p\n");
    execFileSync("git", ["-C", ws, "add", "-A"]);
    execFileSync("git", ["-C", ws, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "pkg"]);
    run.host.onLaunch = (a) => {
      expect(readFileSync(join(a.spec.cwd, "p.txt"), "utf8")).toBe("p\n");
      writePlan(a, VALID.slice(0, 2));
    };
    const answer = await planObjective(options({ workspace: join(ws, "pkg") }));
    expect(answer.file).toBe(join(ws, "pkg", "assignments.json"));
    expect(answer.tasks[0]!.context_path).toBe("assignments.plan/tasks/a.md");
    expect(answer.planner.tries).toHaveLength(1);
  });

  it("stops at the planner's budget: no try starts once it is spent, and a CLI with a cap of its own is given what is left", async () => {
    const config = {
      agents: {
        ...CONFIG.agents,
        // Its config entry's budget, when the command line gives none (one given replaces it).
        capped: { preset: "claude", budget: { max_tokens: 100 } },
      },
    };
    run = new MiddleRun([{ id: "x" }], { config, git: true });
    const argvs: string[][] = [];
    // Each try costs $0.03 and 110 tokens, and writes a plan validate refuses.
    run.host.onLaunch = (a) => {
      argvs.push([...a.spec.argv]);
      writeFileSync(
        a.spec.stdoutLog,
        `${JSON.stringify({ type: "result", subtype: "success", is_error: false, result: "Done.", session_id: "s", total_cost_usd: 0.03, usage: { input_tokens: 100, output_tokens: 10 } })}\n`,
      );
      writePlan(a, CYCLE_AND_UNKNOWN);
    };
    const path = `${join(import.meta.dirname, "..", "fixtures", "agents")}${delimiter}${process.env.PATH}`;
    const tries: number[] = [];
    const ws = join(run.dir, "ws");
    const failed = await planObjective(
      options({
        agent: "capped",
        tries: 5,
        budget: { max_cost_usd: 0.05 },
        env: { ...run.options().env, PATH: path },
        onTry: (t) => tries.push(t.try),
      }),
    ).catch((e: unknown) => e);
    expect(failed).toBeInstanceOf(PlanFailed);
    expect((failed as PlanFailed).exitCode).toBe(1);
    // $0.06 after two tries: the third never starts (the entry's 100 tokens, replaced, do not count).
    expect((failed as Error).message).toMatch(
      /^the planner's budget of \$0\.0500 is spent: \$0\.0600, and none of its 2 tries wrote a valid plan/,
    );
    expect((failed as Error).message).toContain("dependency cycle: a -> b -> a");
    expect(tries).toEqual([1, 2]);
    expect(run.host.attempts).toHaveLength(2);
    // Claude Code's own cap: what the budget leaves ($0.05, then $0.02).
    const cap = (argv: string[]) => argv[argv.indexOf("--max-budget-usd") + 1];
    expect(argvs.map(cap)).toEqual(["0.05", "0.02"]);
    expect(readdirSync(ws).sort()).toEqual([".git", "ctx"]);

    // Without one on the command line, its config entry's: 110 tokens after one try.
    argvs.length = 0;
    const byEntry = await planObjective(
      options({ agent: "capped", tries: 5, env: { ...run.options().env, PATH: path } }),
    ).catch((e: unknown) => e);
    expect((byEntry as Error).message).toMatch(
      /^the planner's budget of 100 tokens is spent: 110, and none of its 1 try wrote a valid plan/,
    );
    expect(argvs).toHaveLength(1);
    expect(argvs[0]).not.toContain("--max-budget-usd");
  });

  it("refuses a bad objective, an unknown planner and one whose CLI is missing, with exit 2, before anything starts", async () => {
    run = new MiddleRun([{ id: "x" }], { config: CONFIG, git: true });
    const ws = join(run.dir, "ws");
    const before = filesOf(ws);
    const refused = async (o: Partial<PlanOptions>, words: string): Promise<void> => {
      const error = await planObjective(options(o)).catch((e: unknown) => e);
      expect(error, words).toBeInstanceOf(InputError);
      expect((error as InputError).exitCode).toBe(2);
      expect((error as Error).message).toContain(words);
    };
    const objective = (name: string, bytes: string | Buffer): string => {
      const path = join(run.dir, name);
      writeFileSync(path, bytes);
      return path;
    };
    await refused({ objectiveFile: objective("empty.md", " \n\n") }, "the objective is empty");
    await refused({ objectiveFile: objective("bin.md", Buffer.from([0x50, 0, 0x4b])) }, "binary");
    await refused(
      { objectiveFile: objective("latin1.md", Buffer.from([0x63, 0x61, 0x66, 0xe9])) },
      "not UTF-8",
    );
    await refused(
      { objectiveFile: objective("big.md", "x".repeat(MAX_OBJECTIVE_BYTES + 1)) },
      `over termorch's bound of ${MAX_OBJECTIVE_BYTES}`,
    );
    await refused({ objectiveFile: join(run.dir, "missing.md") }, "the objective does not exist");
    await refused({ agent: "nosuch" }, 'unknown agent "nosuch"');
    await refused({ agent: "claude", env: { PATH: "/nonexistent" } }, "not on the agent's PATH");
    // Its cost is neither reported (a command of its own) nor priced: a USD budget could not be kept.
    await refused({ budget: { max_cost_usd: 1 } }, "a budget in USD cannot be kept: the planner planner");
    writeFileSync(join(ws, "assignments.json"), "{}");
    await refused({}, "exists already");
    expect(run.host.attempts).toHaveLength(0);
    expect(filesOf(ws)).toEqual([...before, join(ws, "assignments.json")].sort());
  });
});
