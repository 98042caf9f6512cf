// The command line an agent of the config runs, driven through runAssignments with the fake runner
// (which records each attempt's argv): a script named relative to the config file is found there,
// and the placeholders are filled in. This used to take a real run (test/integration/lifecycle).
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { runAssignments } from "../../src/run/runner.js";
import { MiddleRun, middleTier } from "./harness.js";

let run: MiddleRun;

middleTier(() => run);

describe("a config agent's command", () => {
  it("finds its script relative to the config file, and fills in the task's placeholders", async () => {
    run = new MiddleRun([{ id: "greet", agent: "hello", command: undefined }]);
    const conf = join(run.dir, "conf");
    mkdirSync(join(conf, "agents"), { recursive: true });
    writeFileSync(join(conf, "agents", "hello.sh"), 'echo "hello from $TERMORCH_TASK_ID" > hello.txt\n');
    const configFile = join(conf, "c.json");
    writeFileSync(
      configFile,
      JSON.stringify({
        agents: { hello: { command: ["bash", "agents/hello.sh", "{context_path}", "{task_id}"] } },
      }),
    );
    run.host.onLaunch = (attempt) => attempt.exit(0);
    const report = run.report(
      await runAssignments({ assignmentsFile: run.file, ...run.options(), configFile }),
    );
    expect(report.exit_code).toBe(0);
    const argv = [join(conf, "agents", "hello.sh"), join(run.dir, "ws", "ctx", "task.md"), "greet"];
    expect(run.host.of("greet")[0]!.spec.argv).toEqual(["bash", ...argv]);
    expect(report.tasks[0]!.argv).toEqual(["bash", ...argv]);
  });
});
