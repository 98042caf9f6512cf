/**
 * Whether this machine can create termorch's sandbox: bubblewrap on PATH, and able to make the
 * namespaces (mount, pid, ipc, net) with every capability dropped, /proc's settings covered and
 * the seccomp filter loaded. Asked once per process: the answer is what `validate` and `run`
 * refuse a sandboxed task with (exit 2).
 */
import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { executableOnPath, findPerl } from "../fs/executable.js";
import { PROC_READ_ONLY } from "./policy.js";
import { seccompFilter } from "./seccomp.js";

export interface SandboxTools {
  bwrap: string;
  perl: string;
}

let answer: { path: string | undefined; result: SandboxTools | string } | null = null;

/** bwrap's and perl's paths, or what to install or enable, as one sentence. */
export function sandboxTools(path: string | undefined = process.env.PATH): SandboxTools | string {
  if (answer !== null && answer.path === path) return answer.result;
  const result = probe(path);
  answer = { path, result };
  return result;
}

function probe(path: string | undefined): SandboxTools | string {
  const bwrap = executableOnPath("bwrap", path);
  if (bwrap === null)
    return `bubblewrap (bwrap) is not on PATH, and sandboxed agents run in it: install it (Debian and Ubuntu: apt-get install bubblewrap; Fedora: dnf install bubblewrap; Arch: pacman -S bubblewrap), or set "sandbox": "off"`;
  const perl = findPerl();
  // The filter comes on bwrap's standard input, which it reads to the end.
  const filter = seccompFilter(process.arch);
  const r = spawnSync(
    bwrap,
    [
      ...["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/run"],
      ...PROC_READ_ONLY.filter((p) => existsSync(p)).flatMap((p) => ["--ro-bind", p, p]),
      ...["--unshare-pid", "--unshare-ipc", "--unshare-net", "--cap-drop", "ALL", "--die-with-parent"],
      ...(filter ? ["--seccomp", "0"] : []),
      ...["--", perl, "-e", "exit 0"],
    ],
    {
      encoding: "utf8",
      timeout: 10_000,
      stdio: ["pipe", "ignore", "pipe"],
      input: filter ?? Buffer.alloc(0),
    },
  );
  if (r.status === 0) return { bwrap, perl };
  const said = (r.stderr ?? "").trim().split("\n")[0] || (r.error?.message ?? `exit ${r.status ?? r.signal}`);
  return `bubblewrap (${bwrap}) cannot create a sandbox on this machine: ${said}. It needs user namespaces: enable them (sysctl kernel.unprivileged_userns_clone=1; on Ubuntu 23.10 and later also kernel.apparmor_restrict_unprivileged_userns=0, or an AppArmor profile for bwrap), or set "sandbox": "off"`;
}
