/**
 * A task's sandbox, pure: the setting its levels give (defaults, agent, task) resolved into one,
 * and the bubblewrap command line that confines an attempt to it. What exists on disk is asked
 * through `exists`, so that a rule about a missing path never makes bwrap fail.
 */
import { isAbsolute, join, normalize, sep } from "node:path";
import { HOST_ENTRY_PATTERN, type Sandbox } from "../contract/sandbox.js";

/** What a preset's CLI needs in its sandbox: folders and files it writes, the hosts of its API. */
export interface SandboxNeeds {
  /** `~/`-relative or absolute; a folder ends in `/` (made when missing, as the CLI would). */
  write: readonly string[];
  hosts: readonly string[];
}

/** A task's sandbox once its levels are merged; null stands for "off". */
export interface SandboxSetting {
  /** The user's extra writable paths, then the CLI's own (`~/` not yet expanded). */
  allowWrite: readonly string[];
  denyRead: readonly string[];
  /** Shown read-only even where the sandbox hides (the user's `allow_read`). */
  allowRead: readonly string[];
  network: "host" | "none" | readonly string[];
}

/** Always hidden from a sandboxed agent (in its home): keys, cloud and forge credentials. */
export const HIDDEN_IN_HOME = [
  ".ssh",
  ".aws",
  ".gnupg",
  ".config/gh",
  ".netrc",
  ".git-credentials",
  ".config/git/credentials",
  ".docker",
  ".kube",
  ".password-store",
] as const;

/**
 * Merges the levels, most general first (the config's defaults, the agent, the task): the most
 * specific one that says anything decides whether the sandbox is on, and the lists of every
 * level since the last "off" add up. A network no level names is the CLI's API hosts (`needs`),
 * or none at all for an agent of the user's own command. `otherClis`: the folders of the CLIs
 * this agent is not, hidden from it.
 */
export function resolveSandbox(
  levels: readonly (Sandbox | undefined)[],
  needs: SandboxNeeds | null,
  otherClis: readonly string[] = [],
): SandboxSetting | null {
  const given = levels.filter((l): l is Sandbox => l !== undefined);
  const lastOff = given.lastIndexOf("off");
  const on = given.slice(lastOff + 1).filter((l): l is Exclude<Sandbox, "off"> => l !== "off");
  if (on.length === 0) return null;
  const network = on.reduce<SandboxSetting["network"] | undefined>((n, l) => l.network ?? n, undefined);
  const allowWrite = [...on.flatMap((l) => l.filesystem?.allow_write ?? []), ...(needs?.write ?? [])];
  return {
    allowWrite,
    // Another CLI's folders hold its login: hidden, unless this agent is given them.
    denyRead: [
      ...otherClis.filter((p) => !allowWrite.some((w) => bare(w) === bare(p))),
      ...on.flatMap((l) => l.filesystem?.deny_read ?? []),
    ],
    allowRead: on.flatMap((l) => l.filesystem?.allow_read ?? []),
    network: network ?? (needs?.hosts.length ? needs.hosts : "none"),
  };
}

/** A rule's path without its folder mark, for comparing two spellings. */
const bare = (path: string): string => path.replace(/\/+$/, "");

/**
 * One allowed host and port. A loopback address (a local model server) is listened on at the same
 * address and port inside the sandbox, so every client reaches it as outside. A name goes through
 * the sandbox's HTTP proxy (CONNECT), which every coding-agent CLI takes from HTTPS_PROXY:
 * listening on the name's port (443) inside would need a capability an unprivileged user's
 * sandbox cannot keep, and a name needs no DNS when the proxy resolves it outside.
 */
export interface Route {
  host: string;
  port: number;
  /** The loopback address listened on inside; null: through the proxy. */
  listen: string | null;
}

/** Where the sandbox's proxy listens (inside its own network, where no other port is taken). */
export const PROXY_PORT = 3128;

/** The routes of an allowlist, each host and port once. */
export function routesOf(hosts: readonly string[]): Route[] {
  const routes = new Map<string, Route>();
  for (const entry of hosts) {
    const m = HOST_ENTRY_PATTERN.exec(entry);
    if (!m) continue;
    const host = m[1]!.toLowerCase();
    const port = m[2] === undefined ? 443 : Number(m[2]);
    routes.set(`${host}:${port}`, { host, port, listen: loopbackAddress(host) });
  }
  return [...routes.values()];
}

/** The address itself when it is an IPv4 loopback address (the only ones a network namespace has). */
export function loopbackAddress(host: string): string | null {
  const parts = host.split(".");
  if (parts.length !== 4 || !parts.every((p) => /^[0-9]{1,3}$/.test(p) && Number(p) < 256)) return null;
  return parts[0] === "127" ? parts.map(Number).join(".") : null;
}

/** The proxy's port: its own, unless a local route takes it. */
export function proxyPort(routes: readonly Route[]): number {
  let port = PROXY_PORT;
  while (routes.some((r) => r.listen === "127.0.0.1" && r.port === port)) port++;
  return port;
}

/**
 * The relay's routes file (src/sandbox/sandbox.pl), tab-separated: `route INDEX HOST PORT LISTEN`
 * (LISTEN `-` for a name), then `proxy 127.0.0.1 PORT` when a name is allowed.
 */
export function routesFile(routes: readonly Route[]): string {
  const lines = routes.map((r, i) => `route\t${i}\t${r.host}\t${r.port}\t${r.listen ?? "-"}\n`);
  if (routes.some((r) => r.listen === null)) lines.push(`proxy\t127.0.0.1\t${proxyPort(routes)}\n`);
  return lines.join("");
}

/**
 * The agent's proxy variables when a name is allowed (both spellings: CLIs read either), the local
 * routes left out of it; an agent's own proxy settings are replaced, since only ours leads out.
 */
export function proxyEnv(routes: readonly Route[]): Record<string, string> {
  if (!routes.some((r) => r.listen === null)) return {};
  const proxy = `http://127.0.0.1:${proxyPort(routes)}`;
  const direct = [...new Set(routes.flatMap((r) => (r.listen ? [r.listen] : [])))].join(",");
  const env: Record<string, string> = {};
  for (const name of ["HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY"]) {
    env[name] = proxy;
    env[name.toLowerCase()] = proxy;
  }
  env.NO_PROXY = env.no_proxy = direct;
  return env;
}

/** Whether a local route's port needs the capability to listen below 1024 (root only keeps it). */
export function needsLowPorts(routes: readonly Route[]): boolean {
  return routes.some((r) => r.listen !== null && r.port < 1024);
}

/** Where one attempt's sandbox is on disk, and what of the run it must see. */
export interface SandboxPlace {
  /** The agent's home, for `~/` paths. */
  home: string;
  /** Its worktree (or the workspace, when that is no repository): writable, unless `readOnly`. */
  worktree: string;
  /** A reviewer's copy of the work: it reads the worktree, and writes only what `writable` names. */
  readOnly?: boolean;
  /** The attempt's own folder that the agent sees as /tmp. */
  tmp: string;
  /** Writable besides the worktree: the artifacts folder, the handoff, the file its hooks append to. */
  writable: readonly string[];
  /** Readable even inside a hidden folder: the context and prompt files, its CLI's configuration folder of the task. */
  readable: readonly string[];
  /** Hidden: termorch's per-user folder, registry and the run directory, the tmux socket's folder. */
  hidden: readonly string[];
  /**
   * The agent's view of its repository (src/git/sandbox-repo.ts): `shadow` shown at the common
   * git folder's place, and real folders read-only inside it (the objects, the hooks).
   */
  git: {
    commonDir: string;
    shadow: string;
    readOnly: ReadonlyArray<{ source: string; path: string }>;
  } | null;
  /** The machine's /etc/resolv.conf, when it points into /run (kept for a "host" network). */
  resolvConf: string | null;
  /** The relay's folder (allowlist only): its routes and sockets; the agent's proxy variables. */
  relay: { dir: string; env: Readonly<Record<string, string>>; lowPorts: boolean } | null;
}

/**
 * What of the sandbox's own /proc is covered read-only: the kernel's settings and triggers. bwrap
 * covers some of them only when it can tell they are writable, which it cannot as root; and root
 * in the sandbox (uid 0 outside too, with or without a user namespace, since bwrap maps it to
 * itself) passes the permission checks of /proc/sys, capabilities or not. `kernel.core_pattern`
 * set to a `|program` would run that program as root outside every namespace.
 */
export const PROC_READ_ONLY = [
  "/proc/sys",
  "/proc/sysrq-trigger",
  "/proc/irq",
  "/proc/bus",
  "/proc/fs",
] as const;

/**
 * What of /proc is hidden (/dev/null over it: empty as root, unreadable in a user namespace, where
 * device nodes do not open): the keys of every keyring the agent could view (see seccomp.ts).
 */
export const PROC_HIDDEN = ["/proc/keys"] as const;

type Mount = { path: string; source: string; kind: "rw" | "ro" | "hide-dir" | "hide-file" };

/**
 * bwrap's arguments for one attempt, up to but not including `--`. Everything is read-only; /tmp
 * is the attempt's own, /run and the hidden paths are empty; the writable paths are bound back
 * over them, the deepest rule winning.
 */
export function bwrapArgs(
  s: SandboxSetting,
  place: SandboxPlace,
  exists: (path: string) => "dir" | "file" | null,
): string[] {
  const home = (p: string): string => expandHome(p, place.home);
  const mounts: Mount[] = [];
  const bind = (path: string, kind: "rw" | "ro"): void => {
    if (exists(path)) mounts.push({ path, source: path, kind });
  };
  const hide = (path: string): void => {
    const what = exists(path);
    if (what) mounts.push({ path, source: path, kind: what === "dir" ? "hide-dir" : "hide-file" });
  };
  for (const p of [...HIDDEN_IN_HOME.map((h) => `~/${h}`), ...s.denyRead]) hide(home(p));
  for (const p of place.hidden) hide(p);
  for (const p of s.allowWrite) bind(home(p), "rw");
  for (const p of [...place.readable, ...s.allowRead.map(home)]) bind(p, "ro");
  bind(place.worktree, place.readOnly ? "ro" : "rw");
  for (const p of place.writable) bind(p, "rw");
  if (place.git) {
    mounts.push({ path: place.git.commonDir, source: place.git.shadow, kind: "rw" });
    for (const m of place.git.readOnly) mounts.push({ ...m, kind: "ro" });
  }
  if (place.relay) mounts.push({ path: place.relay.dir, source: place.relay.dir, kind: "ro" });
  const args = [
    "--ro-bind",
    "/",
    "/",
    "--dev",
    "/dev",
    "--proc",
    "/proc",
    ...PROC_READ_ONLY.filter((p) => exists(p)).flatMap((p) => ["--ro-bind", p, p]),
    ...PROC_HIDDEN.filter((p) => exists(p) === "file").flatMap((p) => ["--ro-bind", "/dev/null", p]),
    "--unshare-pid",
    "--unshare-ipc",
    ...(s.network === "host" ? [] : ["--unshare-net"]),
    // As root bwrap keeps every capability, with which the agent could remount / writable.
    "--cap-drop",
    "ALL",
    "--die-with-parent",
    "--bind",
    place.tmp,
    "/tmp",
    "--tmpfs",
    "/run",
    ...(place.resolvConf && s.network === "host" ? ["--ro-bind", place.resolvConf, place.resolvConf] : []),
    ...Object.entries(place.relay?.env ?? {}).flatMap(([k, v]) => ["--setenv", k, v]),
    // A local server below port 1024: root's sandbox may keep the one capability it takes.
    ...(place.relay?.lowPorts ? ["--cap-add", "CAP_NET_BIND_SERVICE"] : []),
  ];
  const replaced = ["/tmp", "/run"];
  const remount: string[] = [];
  // Parents before children, so that a deeper rule wins; at one path, hiding wins over binding.
  const order = (m: Mount): number => (m.kind.startsWith("hide") ? 1 : 0);
  mounts.sort((a, b) => depth(a.path) - depth(b.path) || order(a) - order(b));
  for (const m of mounts) {
    // Under /tmp and /run nothing of the machine shows anyway.
    if (m.kind.startsWith("hide") && replaced.some((r) => inside(m.path, r))) continue;
    if (m.kind === "hide-dir") {
      args.push("--tmpfs", m.path);
      remount.push(m.path);
    } else if (m.kind === "hide-file") args.push("--ro-bind", "/dev/null", m.path);
    else args.push(m.kind === "rw" ? "--bind" : "--ro-bind", m.source, m.path);
  }
  // Empty and read-only: what is bound inside them stays as bound.
  for (const p of remount) args.push("--remount-ro", p);
  return args;
}

/** A rule's path as the machine names it: `~/` in the agent's home, no trailing `/`. */
export function expandHome(path: string, home: string): string {
  const full = normalize(path.startsWith("~/") ? join(home, path.slice(2)) : path);
  return full.length > 1 ? full.replace(/\/+$/, "") : full;
}

function depth(path: string): number {
  return path.split(sep).filter(Boolean).length;
}

/** Whether `path` is `dir` or below it. */
export function inside(path: string, dir: string): boolean {
  return isAbsolute(path) && (path === dir || path.startsWith(dir.endsWith(sep) ? dir : dir + sep));
}
