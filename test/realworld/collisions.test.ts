import { describe, expect, it } from "vitest";
import { corpus, git, reportOf } from "./corpus.js";

const world = corpus("collisions");

// Predicted collisions (issue 39) on dset (lukeed/dset 3.1.4): tasks that may run at once and whose
// allowed_paths overlap are named by `validate` (and refused with mode.collisions "error"); after
// the run the report says which pairs really collided. Two tasks both append to src/index.js
// (their merge conflicts); a third may touch readme.md, which the second may too but does not.
describe("predicted collisions on a real repository", () => {
  it("validate names the overlapping pairs; the report says which really collided", async () => {
    const repo = world.clone("dset");
    const base = git(repo, "rev-parse", "HEAD").trim();
    const types = world.agent("col-types", "printf '\\n// types: see index.d.ts\\n' >> src/index.js");
    const refactor = world.agent(
      "col-refactor",
      "printf '\\n// refactor: one pass over keys\\n' >> src/index.js",
    );
    const docs = world.agent("col-docs", "printf '\\n> Deep sets with one call.\\n' >> readme.md");
    const license = world.agent("col-license", "printf '\\n' >> license");
    const tasks = [
      { id: "types", agent: "bash", command: ["bash", types], allowed_paths: ["src/**"] },
      { id: "refactor", agent: "bash", command: ["bash", refactor], allowed_paths: ["src/*.js", "*.md"] },
      { id: "docs", agent: "bash", command: ["bash", docs], allowed_paths: ["readme.md"] },
      { id: "license", agent: "bash", command: ["bash", license], allowed_paths: ["licen[cs]e"] },
    ];
    const file = world.assignments(repo, { run_id: "collide", tasks });

    const validated = await world.run(["validate", file, "--json"]);
    expect(validated.exitCode, validated.stderr).toBe(0);
    expect(JSON.parse(validated.stdout).collisions).toEqual([
      { tasks: ["types", "refactor"], paths: [["src/**", "src/*.js"]] },
      { tasks: ["refactor", "docs"], paths: [["*.md", "readme.md"]] },
    ]);
    const text = await world.run(["validate", file]);
    expect(text.stderr).toContain(
      "termorch: warning: types and refactor may both change src/** and src/*.js; give one a dependency on the other or split the paths",
    );

    // Made an error: refused, every pair named, nothing started.
    const strict = world.assignments(repo, {
      run_id: "collide-strict",
      tasks,
      mode: { collisions: "error" },
    });
    const refused = await world.run(["run", strict]);
    expect(refused.exitCode).toBe(2);
    expect(refused.stderr).toContain("types and refactor may both change");
    expect(refused.stderr).toContain("refactor and docs may both change");
    expect(git(repo, "rev-parse", "HEAD").trim()).toBe(base);

    // A dry run names them too, nothing known yet of what they will do.
    const dry = await world.run(["run", file, "--dry-run"]);
    expect(dry.exitCode, dry.stderr).toBe(0);
    expect(dry.stderr).toContain("termorch: warning: refactor and docs may both change *.md and readme.md");
    expect(reportOf(file).predicted_collisions.map((c) => c.actual)).toEqual([null, null]);

    // Run: types and refactor conflict in the merge; refactor and docs changed no file in common.
    const r = await world.run(["run", file]);
    expect(r.exitCode).toBe(3);
    expect(reportOf(file).predicted_collisions).toEqual([
      { tasks: ["types", "refactor"], paths: [["src/**", "src/*.js"]], actual: "conflicted" },
      { tasks: ["refactor", "docs"], paths: [["*.md", "readme.md"]], actual: "disjoint" },
    ]);
  });
});
