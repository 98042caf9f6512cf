// The CLI installed from its packed tarball, as docs/guides/installing.md tells a user (npm pack, then
// npm install -g, node-pty's build allowed): `npm run test:install`, which CI runs after `npm test`.
// It is not part of `npm test`: the install builds node-pty from source (no prebuilt binary for
// Linux), about 15 s of CPU, in every run of the suite.
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { request } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { execa } from "execa";
import { afterAll, describe, expect, it } from "vitest";
import {
  cliEnv,
  killServer,
  makeWorkspace,
  ROOT,
  uniqueSocket,
  waitFor,
  writeAssignments,
} from "../integration/harness.js";

const tmp = mkdtempSync(join(tmpdir(), "termorch-install-"));
/** The installed copy's runs' tmux server: killed even when a test times out before its own clean-up. */
const serveSocket = uniqueSocket("install-serve");
afterAll(() => {
  killServer(serveSocket);
  rmSync(tmp, { recursive: true, force: true });
});

describe("the README's promises to a new user", () => {
  it("the CLI installs from a packed tarball and works outside the checkout", async () => {
    // `npm run test:install` has built dist/ already; --ignore-scripts keeps pack from building it again.
    // Not execFileSync: an install that blocks the test's worker for a minute (a loaded machine)
    // leaves vitest's own messages unanswered, and it fails the run.
    const packed = (
      await execa("npm", ["pack", "--ignore-scripts", "--pack-destination", tmp, "--silent"], { cwd: ROOT })
    ).stdout.trim();
    const prefix = join(tmp, "prefix");
    // As docs/guides/installing.md says it: node-pty's build allowed (npm 11 warns of, and will skip, a
    // dependency's install scripts that a global install does not name).
    await execa(
      "npm",
      [
        "install",
        "-g",
        "--allow-scripts=node-pty",
        "--prefix",
        prefix,
        "--no-audit",
        "--no-fund",
        "--silent",
        join(tmp, packed),
      ],
      { cwd: tmp },
    );
    const termorch = join(prefix, "bin", "termorch");
    const version = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")).version as string;
    expect(execFileSync(termorch, ["--version"], { cwd: tmp, encoding: "utf8" }).trim()).toBe(version);

    const work = join(tmp, "elsewhere");
    mkdirSync(join(work, "ctx"), { recursive: true });
    writeFileSync(join(work, "ctx", "a.md"), "# A\n");
    writeFileSync(
      join(work, "assignments.json"),
      JSON.stringify({
        tasks: [{ id: "A", agent: "x", context_path: "ctx/a.md", command: ["true"] }],
        environment: { workspace_dir: "." },
      }),
    );
    const out = execFileSync(termorch, ["validate", "assignments.json"], {
      cwd: work,
      encoding: "utf8",
      env: { ...process.env, ...cliEnv(uniqueSocket("install")) },
    });
    expect(out).toContain("1 task in 1 wave");
  });

  it("the installed copy's serve opens a task's live terminal (node-pty built by the install)", async () => {
    const termorch = join(tmp, "prefix", "bin", "termorch");
    const socket = serveSocket;
    const env = { ...process.env, ...cliEnv(socket, { TERMORCH_REGISTRY: join(tmp, "registry") }) };
    const { dir, cleanup } = makeWorkspace();
    const gate = join(dir, "go");
    const file = writeAssignments(dir, [
      {
        id: "A",
        command: ["bash", "-c", `echo from-the-installed-copy; while [ ! -e ${gate} ]; do sleep 0.1; done`],
      },
    ]);
    const run = execa(termorch, ["run", file], { reject: false, cwd: dir, env, stdin: "ignore" });
    const serve = execa(termorch, ["serve"], { reject: false, cwd: dir, env, stdin: "ignore" });
    let printed = "";
    serve.stdout?.on("data", (d: Buffer) => {
      printed += d.toString();
    });
    try {
      await waitFor(() => existsSync(join(dir, "status", "A.running")), 30_000, "A running");
      const url = new URL(
        (await waitFor(() => /^http:\/\/\S+\n/m.exec(printed)?.[0], 30_000, "serve's URL")).trim(),
      );
      const runId = (JSON.parse(readFileSync(file, "utf8")) as { run_id: string }).run_id;
      const token = url.searchParams.get("token");
      const base = `http://127.0.0.1:${url.port}`;
      // Once serve's view shows the run's task live in its session (it reads the registry as runs
      // come; a task is running, and names its session, a moment before tmux has the session).
      for (let tries = 0; ; tries++) {
        const view = await (await fetch(`${base}/api/view?token=${token}`)).text();
        if (view.includes(runId) && view.includes('"session_live":true')) break;
        if (tries > 300) throw new Error(`serve's view never showed run ${runId}: ${view}`);
        await new Promise((r) => setTimeout(r, 100));
      }
      const terminal = `${base}/runs/${runId}/tasks/A/terminal?token=${token}`;
      const seen = await new Promise<string>((done, fail) => {
        let body = "";
        const req = request(terminal, (res) => {
          res.setEncoding("utf8");
          res.on("end", () => fail(new Error(`the terminal ended (HTTP ${res.statusCode}): ${body}`)));
          res.on("data", (d: string) => {
            body += d;
            if (body.includes("from-the-installed-copy")) {
              req.destroy();
              done(body);
            }
          });
        });
        req.on("error", fail);
        req.setTimeout(30_000, () => fail(new Error(`no terminal output in 30 s: ${body}`)));
        req.end();
      });
      expect(seen).toMatch(/^event: size/m);
    } finally {
      writeFileSync(gate, "");
      await run;
      serve.kill("SIGTERM");
      await serve;
      killServer(socket);
      cleanup();
    }
  });
});
