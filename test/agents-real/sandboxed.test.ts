// The real CLIs headless inside termorch's sandbox (issue 25): bubblewrap, the network an
// allowlist that names only the scripted model server on loopback. Each makes its edit through
// its own tools, and the edit is merged.
import { readFileSync, realpathSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { expect, it } from "vitest";
import { describeWith } from "../needs.js";
import { RECIPES, SECRET } from "./clis.js";
import { perTask, ROOT, readReport, realAgentsSuite } from "./harness.js";

const { world, server: modelServer } = realAgentsSuite("sandboxed");

describeWith("bwrap", "test/agents-real/sandboxed.test.ts").each([
  RECIPES.claude,
  RECIPES.codex,
  RECIPES.gemini,
  RECIPES.opencode,
])("$preset, headless in the sandbox", (recipe) => {
  it("makes its edit with only the model server allowed, and the edit is merged", async () => {
    modelServer().setScript(perTask);
    const { dir, repo } = world.workspace();
    writeFileSync(join(repo, "ctx", "S.md"), "Create the file. WRITE-FILE S\n");
    const url = new URL(modelServer().url);
    const agent = recipe.agent(modelServer().url);
    writeFileSync(
      join(dir, "termorch.json"),
      JSON.stringify({
        // The world's PATH: in termorch's sandbox codex does without a sandbox of its own.
        agents: { [recipe.preset]: { ...agent, env: { ...agent.env, PATH: world.path } } },
        defaults: {
          sandbox: {
            network: [`${url.hostname}:${url.port}`],
            // The pinned CLIs live in this checkout, which may be under /tmp (the sandbox's own).
            // Its real path: a worktree may link it to another checkout's, and bwrap follows an
            // absolute link at a mount's destination outside the new root (no such file).
            filesystem: { allow_read: [realpathSync(join(ROOT, "test", "agents-real", "node_modules"))] },
          },
        },
      }),
    );
    const file = join(dir, "assignments.json");
    writeFileSync(
      file,
      JSON.stringify({
        tasks: [{ id: "S", agent: recipe.preset, context_path: "ctx/S.md" }],
        environment: { workspace_dir: "repo", env_vars: [recipe.keyVar] },
      }),
    );
    const r = await world.termorch(["run", file, "--config", join(dir, "termorch.json")], {
      env: { [recipe.keyVar]: SECRET },
    });
    const t = readReport(dir).tasks[0]!;
    expect(
      r.exitCode,
      `${r.stderr}\n${t.logs.stderr ? readFileSync(join(dir, t.logs.stderr), "utf8") : ""}`,
    ).toBe(0);
    expect(t.status).toBe("success");
    expect(t.agent_result).toMatchObject({ summary: "Done: wrote S.txt", is_error: false });
    expect(readFileSync(join(repo, "S.txt"), "utf8")).toBe("written for S\n");
    // It ran sandboxed, with that allowlist.
    const launched = readFileSync(join(dir, "events.jsonl"), "utf8")
      .split("\n")
      .filter(Boolean)
      .map((l) => JSON.parse(l))
      .find((e) => e.type === "task.launched");
    expect(launched.data.sandbox).toEqual({ network: [`${url.hostname}:${url.port}`] });
  });
});
