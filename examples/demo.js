// The bundled example: builds a throwaway git repository under examples/.demo/, writes an
// assignments.json for a six-task DAG of example agents, and runs termorch on it.
//   npm run demo            (or: node examples/demo.js [--fast])
import { execFileSync, spawnSync } from "node:child_process";
import { mkdirSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const root = resolve(here, "..");
const demo = join(here, ".demo");
const repo = join(demo, "repo");
const fast = process.argv.includes("--fast");

rmSync(demo, { recursive: true, force: true });
mkdirSync(join(repo, "src"), { recursive: true });
const git = (...args) => execFileSync("git", ["-C", repo, ...args], { stdio: "pipe" });
git("init", "-q", "-b", "main");
writeFileSync(join(repo, "README.md"), "# demo app\n\nA throwaway repository for termorch's example run.\n");
writeFileSync(join(repo, "src", "index.js"), "export {};\n");
git("add", "-A");
git("-c", "user.name=demo", "-c", "user.email=demo@localhost", "commit", "-q", "-m", "initial commit");

const tasks = [
  { id: "models", file: "src/models.js", deps: [], text: "Define the data models." },
  { id: "utils", file: "src/utils.js", deps: [], text: "Write string helpers." },
  { id: "docs", file: "docs/guide.md", deps: [], text: "Write the user guide." },
  {
    id: "api",
    file: "src/api.js",
    deps: ["models"],
    sees: ["src/models.js"],
    text: "Expose the models over an API.",
  },
  { id: "cli", file: "src/cli.js", deps: ["utils"], sees: ["src/utils.js"], text: "Add a command line." },
  {
    id: "tests",
    file: "test/app.test.js",
    deps: ["api", "cli"],
    sees: ["src/api.js", "src/cli.js"],
    text: "Test the API and the CLI together.",
  },
];
// Context files live in the workspace, untracked (they need not be committed).
mkdirSync(join(repo, "contexts"), { recursive: true });
for (const t of tasks) writeFileSync(join(repo, "contexts", `${t.id}.md`), `# Task ${t.id}\n\n${t.text}\n`);
writeFileSync(join(repo, ".git", "info", "exclude"), "contexts/\n", { flag: "a" });

const stepSeconds = fast ? "0.2" : "1";
const assignments = {
  run_id: `demo-${new Date().toISOString().replace(/[-:.]/g, "").slice(0, 15)}`,
  tasks: tasks.map((t) => ({
    id: t.id,
    agent: "writer",
    context_path: `contexts/${t.id}.md`,
    dependencies: t.deps,
    env: { TARGET_FILE: t.file, SEES: (t.sees ?? []).join(" "), STEP_SECONDS: stepSeconds },
    allowed_paths: [`${dirname(t.file)}/**`],
    success_criteria: { required_artifacts: [t.file] },
  })),
  environment: {
    workspace_dir: "repo",
    env_vars: ["DEMO_API_TOKEN=demo-secret-token-123"],
    resource_limits: { max_parallel: 3, timeout_s: 120 },
  },
  success_criteria: {
    required_artifacts: ["src/api.js", "src/cli.js", "test/app.test.js"],
    tests_cmd: "test -f src/models.js && test -f test/app.test.js",
  },
};
writeFileSync(join(demo, "assignments.json"), `${JSON.stringify(assignments, null, 2)}\n`);
writeFileSync(
  join(demo, "config.json"),
  `${JSON.stringify({ agents: { writer: { command: ["bash", join(here, "agents", "writer.sh"), "{context_path}"] } } }, null, 2)}\n`,
);

console.log(`demo workspace: ${repo} (a throwaway git repository)`);
console.log(`assignments:    ${join(demo, "assignments.json")}\n`);
const result = spawnSync(
  process.execPath,
  [
    join(root, "bin", "termorch.js"),
    "run",
    join(demo, "assignments.json"),
    "--config",
    join(demo, "config.json"),
    ...process.argv.slice(2).filter((a) => a !== "--fast"),
  ],
  {
    stdio: "inherit",
  },
);
console.log(`\nreport:  ${join(demo, "execution_report.json")}   page: ${join(demo, "report.html")}`);
console.log(
  `logs:    ${join(demo, "logs")}/   status: ${join(demo, "status")}/   artifacts: ${join(demo, "artifacts")}/`,
);
console.log(`history: git -C ${repo} log --oneline --graph --all`);
process.exitCode = result.status ?? 1;
