/**
 * One attempt's sandbox (README, "Sandboxing agents"): before the launch, its folder (the /tmp
 * the agent sees, its view of the repository, the network relay's routes) and the command line
 * that the pane supervisor puts in front of the agent's argv; after the exit, the commits the
 * agent made in its view of the repository, brought into the real one. The supervisor itself
 * stays outside: logs, exit record, signals and reaping keep their contract.
 */
import { createHash } from "node:crypto";
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  readFileSync,
  realpathSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { errorText } from "../errors.js";
import { registryDir, userDir } from "../fs/names.js";
import { makeAgentRepo, restoreGitFile, takeAgentCommits } from "../git/sandbox-repo.js";
import {
  bwrapArgs,
  expandHome,
  inside,
  needsLowPorts,
  proxyEnv,
  routesFile,
  routesOf,
  type SandboxPlace,
  type SandboxSetting,
} from "../sandbox/policy.js";
import { sandboxTools } from "../sandbox/probe.js";
import type { TaskPlan } from "./task-plan.js";

const SHIM = fileURLToPath(new URL("../sandbox/sandbox.pl", import.meta.url));

/** The folder of one attempt's sandbox, in the run's private folder. */
export function sandboxDirOf(privateDir: string, taskId: string, attempt: number): string {
  return join(privateDir, "sandbox", taskId, String(attempt));
}

/**
 * The network relay's folder of a sandbox: short, because a socket's path must fit in 108 bytes,
 * and found again from the sandbox's folder by a resumed run.
 */
function relayDirOf(dir: string): string {
  return join(userDir(), "net", createHash("sha256").update(dir).digest("hex").slice(0, 16));
}

/**
 * Sets up an attempt's sandbox in `where.dir`; returns what to put in front of the agent's argv.
 * Throws when this machine cannot make one (validation refuses such a run first).
 */
export async function prepareSandbox(
  setting: SandboxSetting,
  p: Pick<
    TaskPlan,
    "argv" | "worktree" | "branch" | "cwd" | "artifactsDir" | "handoff" | "prompt" | "interactive" | "env"
  >,
  where: {
    dir: string;
    runDir: string;
    socketPath: string;
    processEnv: Readonly<Record<string, string | undefined>>;
  },
): Promise<string[]> {
  const tools = sandboxTools(where.processEnv.PATH);
  if (typeof tools === "string") throw new Error(tools);
  const { dir } = where;
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(join(dir, "tmp"), { recursive: true, mode: 0o700 });
  mkdirSync(p.artifactsDir, { recursive: true });
  // A writable folder the CLI has not made yet (its first run): made, empty, as it would be.
  for (const w of setting.allowWrite)
    if (w.endsWith("/")) mkdirSync(expandHome(w, p.env.HOME ?? "/"), { recursive: true, mode: 0o700 });
  const repo = p.worktree ? await makeAgentRepo(p.worktree, join(dir, "git")) : null;
  // Kept where the agent cannot reach it, to put back what it may change (endSandbox).
  if (p.worktree) copyFileSync(join(p.worktree, ".git"), join(dir, "gitfile"));
  const events = p.interactive?.events?.file;
  if (events) {
    mkdirSync(dirname(events), { recursive: true, mode: 0o700 });
    writeFileSync(events, "", { flag: "a", mode: 0o600 });
  }
  let relay: SandboxPlace["relay"] = null;
  if (typeof setting.network !== "string") {
    const relayDir = relayDirOf(dir);
    mkdirSync(relayDir, { recursive: true, mode: 0o700 });
    const routes = routesOf(setting.network);
    writeFileSync(join(relayDir, "routes"), routesFile(routes));
    relay = {
      dir: relayDir,
      env: proxyEnv(routes),
      lowPorts: needsLowPorts(routes) && process.getuid?.() === 0,
    };
  }
  const resolvConf = realResolvConf();
  const place: SandboxPlace = {
    home: p.env.HOME ?? "/",
    worktree: p.worktree ?? p.cwd,
    tmp: join(dir, "tmp"),
    writable: [p.artifactsDir, ...(p.handoff ? [p.handoff] : []), ...(events ? [events] : [])],
    readable: [
      p.prompt.context,
      p.prompt.file,
      ...(p.interactive?.events?.configDir ? [p.interactive.events.configDir.path] : []),
      // The agent's own program, when it is named by a path that the sandbox hides (a /tmp script).
      ...(p.argv[0]?.startsWith("/") ? [p.argv[0]] : []),
    ],
    hidden: [userDir(), registryDir(where.processEnv), where.runDir, dirname(where.socketPath)],
    git: repo,
    resolvConf,
    relay,
  };
  const args = [...bwrapArgs(setting, place, kindOf), "--chdir", p.cwd];
  const end = relay ? [relay.dir] : [];
  return [
    tools.perl,
    SHIM,
    "outside",
    ...end,
    "--",
    tools.bwrap,
    ...args,
    "--",
    tools.perl,
    SHIM,
    "inside",
    ...end,
    "--",
  ];
}

/**
 * After the agent's exit: its worktree's `.git` as it was, then its commits on its task branch
 * into the repository. Returns a note of what went otherwise (its worktree still holds its work,
 * which termorch commits).
 */
export async function endSandbox(
  dir: string,
  p: Pick<TaskPlan, "worktree" | "branch">,
): Promise<string | null> {
  rmSync(relayDirOf(dir), { recursive: true, force: true });
  const notes: string[] = [];
  const saved = join(dir, "gitfile");
  if (p.worktree && existsSync(saved) && restoreGitFile(p.worktree, readFileSync(saved, "utf8")))
    notes.push("the agent changed its worktree's .git, which was put back before termorch's git ran there");
  if (p.worktree && p.branch)
    try {
      await takeAgentCommits(join(dir, "git"), p.worktree, p.branch);
    } catch (error) {
      notes.push(
        `the commits the agent made in its sandbox could not be taken (${errorText(error)}); what its worktree holds is committed instead`,
      );
    }
  rmSync(dir, { recursive: true, force: true });
  return notes.length ? notes.join("; ") : null;
}

function kindOf(path: string): "dir" | "file" | null {
  const st = statSync(path, { throwIfNoEntry: false });
  return st === undefined ? null : st.isDirectory() ? "dir" : "file";
}

/** /etc/resolv.conf's real file when it lives under /run (systemd-resolved), which the sandbox empties. */
function realResolvConf(): string | null {
  try {
    const real = realpathSync("/etc/resolv.conf");
    return inside(real, "/run") ? real : null;
  } catch {
    return null;
  }
}
