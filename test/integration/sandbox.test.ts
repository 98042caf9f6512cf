import { execFileSync } from "node:child_process";
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { createServer, type Server } from "node:http";
import { createServer as createTcpServer } from "node:net";
import { join } from "node:path";
import { execa } from "execa";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Report } from "../../src/contract/report.js";
import { describeWith } from "../needs.js";
import { BIN, cliEnv, git, ROOT, readReport, termorch, testFile, writeAssignments } from "./harness.js";

// Sandboxed agents (issue 25) with the real bubblewrap: what an agent may not do is tried by a
// probe agent, once sandboxed and once not (the control proves each probe can get through).
const { socket, workspace } = testFile("sandbox");
const PROBE = join(ROOT, "test", "fixtures", "agents", "sandbox-probe.sh");
const NET_PROBE = join(ROOT, "test", "fixtures", "agents", "net-probe.mjs");
const CANARY = "termorch-canary-5d1e7b";
const CANARY_NAME = "TERMORCH_TEST_CANARY";
const SIBLING = "sibling-work-9c2e41";

let listener: ReturnType<typeof createTcpServer>;
let port = 0;
beforeAll(async () => {
  listener = createTcpServer((s) => s.end());
  await new Promise<void>((r) => listener.listen(0, "127.0.0.1", r));
  port = (listener.address() as { port: number }).port;
});
afterAll(() => listener.close());

/** A run of `probe` beside `other`, whose worktree is there while it runs; its probe lines. */
async function probeRun(sandbox: unknown) {
  const ws = workspace();
  const home = join(ws.dir, "home");
  mkdirSync(join(home, ".ssh"), { recursive: true });
  writeFileSync(join(home, ".ssh", "id_test"), "-----BEGIN KEY-----\n");
  const file = writeAssignments(
    ws.dir,
    [
      {
        id: "other",
        // Until the probe is done with it, bounded.
        command: [
          "bash",
          "-c",
          'for _ in $(seq 400); do [ -e "$TERMORCH_RUN_DIR/artifacts/probe/done" ] && exit 0; sleep 0.05; done',
        ],
        expect_changes: false,
      },
      // Its work is committed while the probe runs.
      { id: "sibling", env: { WRITE: `sibling.txt=${SIBLING}` } },
      {
        id: "probe",
        command: ["bash", PROBE],
        env: {
          PROBE_KEY: join(home, ".ssh", "id_test"),
          PROBE_OTHER: "other",
          PROBE_SIBLING: SIBLING,
          PROBE_REPO: ws.repo,
          PROBE_PORT: String(port),
          PROBE_CANARY: `${CANARY_NAME}=`,
          ...(sandbox === undefined ? {} : { PROBE_ESCAPE: join(ws.dir, "escaped") }),
        },
        ...(sandbox === undefined ? {} : { sandbox }),
      },
      // All three at once, whatever the machine's cores.
    ],
    { environment: { resource_limits: { max_parallel: 3 } } },
  );
  const r = await termorch(["run", file], { socket, env: { HOME: home, [CANARY_NAME]: CANARY } });
  const report = readReport(ws.dir);
  const task = report.tasks.find((t) => t.id === "probe")!;
  const out = readFileSync(join(ws.dir, task.logs.stdout!), "utf8");
  const probes = Object.fromEntries([...out.matchAll(/^(\w+)=(\w+)$/gm)].map((m) => [m[1], m[2]]));
  return { ws, home, r, report, probes };
}

/** What the probe reads or reaches, as it says; what it writes is looked for outside (`planted`). */
const PROBES = ["read_key", "read_other_worktree", "read_committed_work", "read_termorch_env", "connect"];

const PLANTED = ["checkout", "home", "outside", "hook", "config", "branch"];
const each = <T>(names: readonly string[], value: T) => Object.fromEntries(names.map((n) => [n, value]));

/** What the probe wrote or planted outside its worktree, as found on the machine. */
function planted(ws: { dir: string; repo: string }, home: string, report: Report) {
  return {
    checkout: existsSync(join(ws.repo, "planted.txt")),
    home: existsSync(join(home, "planted.txt")),
    outside: existsSync(join(ws.dir, "planted.txt")),
    hook: existsSync(join(ws.repo, ".git", "hooks", "post-merge")),
    config: /hookspath|fsmonitor/i.test(readFileSync(join(ws.repo, ".git", "config"), "utf8")),
    // Put back by termorch's target guard when it was moved: the report says it was.
    branch: (report.merge.refs_changed ?? []).some((c) => c.ref === "refs/heads/main"),
  };
}

const describeSandbox = describeWith("bwrap", "test/integration/sandbox.test.ts");

describeSandbox("a sandboxed agent", () => {
  it("is stopped at every probe, and its own commit is merged", async () => {
    const { ws, home, r, report, probes } = await probeRun({ network: "none" });
    expect(r.exitCode, r.stderr).toBe(0);
    expect(probes).toMatchObject(each(PROBES, "blocked"));
    expect(planted(ws, home, report)).toEqual(each(PLANTED, false));
    // Its .git pointed elsewhere was put back before termorch's git ran in its worktree.
    expect(existsSync(join(ws.dir, "escaped"))).toBe(false);
    // The commit it made in its view of the repository is merged, with its message.
    expect(probes.committed).toBe("yes");
    expect(report.merge.result).toBe("success");
    expect(git(ws.repo, "log", "--format=%s", "main")).toContain("the agent's own commit");
    expect(readFileSync(join(ws.repo, "work.txt"), "utf8")).toBe("sandboxed work\n");
  });

  it("cannot read the work of a task that finished before it launched (the objects are the run's start's)", async () => {
    const ws = workspace();
    const file = writeAssignments(
      ws.dir,
      [
        // Unsandboxed, and done (its work committed) before the probe starts: one task at a time.
        { id: "early", env: { WRITE: `early.txt=${SIBLING}` } },
        {
          id: "probe",
          command: ["bash", PROBE],
          env: {
            PROBE_KEY: "/nonexistent",
            PROBE_OTHER: "none",
            PROBE_SIBLING: SIBLING,
            PROBE_REPO: ws.repo,
            PROBE_PORT: String(port),
            PROBE_CANARY: `${CANARY_NAME}=`,
          },
          sandbox: { network: "none" },
        },
      ],
      { environment: { resource_limits: { max_parallel: 1 } } },
    );
    const r = await termorch(["run", file], { socket });
    const report = readReport(ws.dir);
    const early = report.tasks.find((t) => t.id === "early")!;
    const probe = report.tasks.find((t) => t.id === "probe")!;
    expect(Date.parse(early.finished_at!)).toBeLessThan(Date.parse(probe.started_at!));
    const out = readFileSync(join(ws.dir, probe.logs.stdout!), "utf8");
    expect(out).toContain("read_committed_work=blocked");
    expect(r.exitCode, r.stderr).toBe(0);
  });

  it("without the sandbox gets through every probe (the control)", async () => {
    const { ws, home, probes, report } = await probeRun(undefined);
    expect(probes).toMatchObject(each(PROBES, "open"));
    expect(planted(ws, home, report)).toEqual(each(PLANTED, true));
  });

  it("runs its set-up and tests_cmd in its sandbox too (they run what the agent wrote)", async () => {
    const outside = async (sandbox: unknown) => {
      const ws = workspace();
      const planted = (what: string) => join(ws.dir, `planted-by-${what}`);
      const file = writeAssignments(ws.dir, [
        {
          id: "t",
          // The agent writes the script its task's tests_cmd runs.
          command: ["bash", "-c", `echo 'echo x > ${planted("tests")}' > run-tests.sh`],
          setup_cmd: `echo x > ${planted("setup")}; true`,
          success_criteria: { tests_cmd: "sh run-tests.sh; true" },
          ...(sandbox ? { sandbox } : {}),
        },
      ]);
      const r = await termorch(["run", file], { socket });
      expect(r.exitCode, r.stderr).toBe(0);
      return { setup: existsSync(planted("setup")), tests: existsSync(planted("tests")) };
    };
    expect(await outside({ network: "none" })).toEqual({ setup: false, tests: false });
    expect(await outside(undefined)).toEqual({ setup: true, tests: true });
  });

  it("keeps its grace: a TERM reaches the agent, which may finish before it ends", async () => {
    const ws = workspace();
    const file = writeAssignments(ws.dir, [
      {
        id: "slow",
        command: [
          "bash",
          "-c",
          'trap \'sleep 0.5; echo "cleaned up" > "$TERMORCH_ARTIFACTS_DIR/trap.txt"; exit 3\' TERM; echo started; while :; do sleep 0.1; done',
        ],
        timeout_s: 1,
        sandbox: { network: "none" },
      },
    ]);
    await termorch(["run", file], { socket });
    const task = readReport(ws.dir).tasks[0]!;
    expect(task.reason).toBe("timeout");
    expect(readFileSync(join(ws.dir, "artifacts", "slow", "trap.txt"), "utf8")).toBe("cleaned up\n");
  });
});

// The probe of a tty agent (issue 35): it keeps the pane's terminal, so the seccomp filter is what
// stops it typing into it; it was started in a session keyring that holds a key; as root, /proc/sys
// would be the kernel's settings. Each run has a tmux server of its own, started by that termorch
// (its agents inherit the server's keyring).
const PROBE_TTY = join(ROOT, "test", "fixtures", "agents", "tty-probe.pl");
const WITH_KEY = join(ROOT, "test", "fixtures", "with-session-key.pl");
const ttyOn = testFile("sandbox-tty-on");
const ttyOff = testFile("sandbox-tty-off");

async function ttyProbeRun(sandbox: unknown) {
  const { socket, workspace: ws } = sandbox ? ttyOn : ttyOff;
  const w = ws();
  const key = { desc: "termorch-test-key", payload: `key-canary-${Math.random().toString(36).slice(2)}` };
  writeFileSync(
    join(w.dir, "termorch.json"),
    JSON.stringify({ agents: { "tty-probe": { command: ["perl", PROBE_TTY], tty: true } } }),
  );
  const file = writeAssignments(w.dir, [
    {
      id: "probe",
      agent: "tty-probe",
      command: undefined,
      env: { PROBE_KEY_DESC: key.desc, PROBE_KEY: key.payload },
      ...(sandbox ? { sandbox } : {}),
    },
  ]);
  const r = await execa(
    "perl",
    [
      WITH_KEY,
      key.desc,
      key.payload,
      "--",
      process.execPath,
      BIN,
      "run",
      file,
      "--config",
      join(w.dir, "termorch.json"),
    ],
    {
      reject: false,
      cwd: ROOT,
      env: cliEnv(socket),
      timeout: 120_000,
    },
  );
  const out = readFileSync(join(w.dir, "artifacts", "probe", "probe.txt"), "utf8");
  return { r, probes: Object.fromEntries([...out.matchAll(/^(\w+)=(\w+)$/gm)].map((m) => [m[1], m[2]])) };
}

describeSandbox("a sandboxed tty agent", () => {
  const root = process.getuid?.() === 0;

  it("cannot type into its terminal (TIOCSTI), read the keyring it was started in, or write /proc/sys", async () => {
    const { r, probes } = await ttyProbeRun({ network: "none" });
    expect(r.exitCode, r.stderr).toBe(0);
    expect(probes).toEqual({ typed: "blocked", keyring: "blocked", proc_sys: "blocked" });
  });

  it("without the sandbox gets through each (the control)", async () => {
    const { r, probes } = await ttyProbeRun(undefined);
    expect(r.exitCode, r.stderr).toBe(0);
    // A kernel that refuses TIOCSTI itself (dev.tty.legacy_tiocsti=0), and /proc/sys for a user
    // that is not root, leave nothing to show.
    const legacy = readFileSync("/proc/sys/dev/tty/legacy_tiocsti", "utf8").trim() !== "0";
    expect(probes).toEqual({
      typed: legacy ? "open" : "blocked",
      keyring: "open",
      proc_sys: root ? "open" : "blocked",
    });
  });
});

// Earlier runs' folders (issue 35): their artifacts may hold what a later sandboxed agent must not
// read. Outside /tmp, which the sandbox replaces with its own: what hides them is the sandbox's
// rules. One earlier run cleaned (out of the registry), one still registered, one beside the run.
describeSandbox("a sandboxed agent in a later run", () => {
  const base = mkdtempSync(join("/var/tmp", "termorch-it-runs-"));
  afterAll(() => rmSync(base, { recursive: true, force: true }));
  const SECRET = "earlier-run-secret-7f3a";

  /** A run of one task that copies SECRET into its artifacts, its folder `out`. */
  async function earlierRun(out: string, env: Record<string, string> = {}) {
    const ws = workspace();
    const file = writeAssignments(ws.dir, [
      { id: "early", command: ["bash", "-c", `echo ${SECRET} > "$TERMORCH_ARTIFACTS_DIR/secret.txt"`] },
    ]);
    const r = await termorch(["run", file, "--out", out], { socket, env });
    expect(r.exitCode, r.stderr).toBe(0);
    return { runId: readReport(out).run_id!, secret: join(out, "artifacts", "early", "secret.txt") };
  }

  it("cannot read earlier runs' artifacts, cleaned, registered or beside its own; without the sandbox it can", async () => {
    const cleaned = await earlierRun(join(base, "one", "run"));
    const c = await termorch(["clean", cleaned.runId], { socket });
    expect(c.exitCode, c.stderr).toBe(0);
    const registered = await earlierRun(join(base, "two", "run"));
    // Registered elsewhere (another registry): found as a folder beside the later run's only.
    const beside = await earlierRun(join(base, "three", "old"), {
      TERMORCH_REGISTRY: join(base, "other-registry"),
    });
    const paths = { cleaned: cleaned.secret, registered: registered.secret, beside: beside.secret };
    // Out of the registry: only the past runs' list knows of it.
    const listed = await termorch(["status", "--json"], { socket });
    expect(listed.stdout).not.toContain(join(base, "one"));
    const read = async (out: string, sandbox: unknown) => {
      const ws = workspace();
      const file = writeAssignments(ws.dir, [
        {
          id: "probe",
          command: [
            "bash",
            "-c",
            Object.entries(paths)
              .map(
                ([name, p]) =>
                  `if grep -q ${SECRET} ${p}; then echo ${name}=open; else echo ${name}=blocked; fi`,
              )
              .join("; "),
          ],
          ...(sandbox ? { sandbox } : {}),
        },
      ]);
      const r = await termorch(["run", file, "--out", out], { socket });
      expect(r.exitCode, r.stderr).toBe(0);
      const log = readFileSync(join(out, readReport(out).tasks[0]!.logs.stdout!), "utf8");
      return Object.fromEntries([...log.matchAll(/^(\w+)=(\w+)$/gm)].map((m) => [m[1], m[2]]));
    };
    expect(await read(join(base, "three", "new"), { network: "none" })).toEqual({
      cleaned: "blocked",
      registered: "blocked",
      beside: "blocked",
    });
    expect(await read(join(base, "three", "control"), undefined)).toEqual({
      cleaned: "open",
      registered: "open",
      beside: "open",
    });
  });
});

describeSandbox("a sandbox's network allowlist (loopback only)", () => {
  const servers: Server[] = [];
  afterAll(() => {
    for (const s of servers) s.close();
  });
  async function serve(host: string, p = 0): Promise<number> {
    const s = createServer((_, res) => res.end(`hello from ${host}`));
    servers.push(s);
    await new Promise<void>((r) => s.listen(p, host, r));
    return (s.address() as { port: number }).port;
  }

  it("reaches the allowed server (by address, and by name through its proxy) and is refused every other", async () => {
    const allowed = await serve("127.0.0.1");
    const other = await serve("127.0.0.1");
    await serve("127.0.0.2", allowed);
    const probe = ["node", NET_PROBE, String(allowed), String(other)];
    const results = async (sandbox: unknown) => {
      const ws = workspace();
      const file = writeAssignments(ws.dir, [
        { id: "net", command: probe, expect_changes: false, ...(sandbox ? { sandbox } : {}) },
      ]);
      const r = await termorch(["run", file], { socket });
      expect(r.exitCode, r.stderr).toBe(0);
      const out = readFileSync(join(ws.dir, readReport(ws.dir).tasks[0]!.logs.stdout!), "utf8");
      return Object.fromEntries(
        out
          .trim()
          .split("\n")
          .map((l) => [l.slice(0, l.indexOf(" ")), l.slice(l.indexOf(" ") + 1)]),
      );
    };
    expect(await results({ network: [`127.0.0.1:${allowed}`, `localhost:${allowed}`] })).toEqual({
      "direct-allowed": "hello from 127.0.0.1",
      "direct-other-port": "refused",
      "direct-other-address": "refused",
      "raw-other-port": "refused",
      "proxy-allowed-name": "hello from 127.0.0.1",
      "proxy-other-port": "status 403",
      "proxy-other-name": "status 403",
      "proxy-plain-get": "hello from 127.0.0.1",
    });
    // The control: without the sandbox, the same agent reaches every server.
    expect(await results(undefined)).toMatchObject({
      "direct-allowed": "hello from 127.0.0.1",
      "direct-other-port": "hello from 127.0.0.1",
      "direct-other-address": "hello from 127.0.0.2",
      "raw-other-port": "open",
    });
  });
});

describe("a sandbox this machine cannot make", () => {
  it("is refused by validate and run with exit 2, saying what to install; nothing starts", async () => {
    const ws = workspace();
    // A PATH with what termorch needs but bubblewrap.
    const bin = join(ws.dir, "bin");
    mkdirSync(bin);
    for (const tool of ["git", "tmux", "perl", "bash", "sh"])
      symlinkSync(
        execFileSync("sh", ["-c", `command -v ${tool}`], { encoding: "utf8" }).trim(),
        join(bin, tool),
      );
    const file = writeAssignments(ws.dir, [{ id: "a", env: { WRITE: "a.txt=a" }, sandbox: {} }]);
    for (const command of ["validate", "run"]) {
      const r = await termorch([command, file], { socket, env: { PATH: bin } });
      expect(r.exitCode, r.stderr).toBe(2);
      expect(r.stderr).toContain("task a runs sandboxed, but bubblewrap (bwrap) is not on PATH");
      expect(r.stderr).toContain("apt-get install bubblewrap");
    }
    expect(existsSync(join(ws.dir, "logs"))).toBe(false);
    expect(git(ws.repo, "branch", "--list", "termorch/*").trim()).toBe("");
  });
});
