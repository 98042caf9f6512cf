/**
 * The seccomp filter of termorch's sandbox, pure: a classic-BPF program that bubblewrap loads
 * (`--seccomp FD`) before it runs the agent, for the whole of its process tree. Node has no
 * libseccomp binding, and the filter is small enough to assemble here.
 *
 * What it refuses, and why (docs/guides/sandbox.md):
 * - `ioctl(TIOCSTI)` and `ioctl(TIOCLINUX)`: pushing bytes into a terminal's input, as if typed.
 *   A tty agent keeps the pane's terminal (its controlling one), and kernels that still allow
 *   TIOCSTI (`dev.tty.legacy_tiocsti=1`) would let it type into whatever reads that terminal
 *   outside the sandbox. EPERM, what the kernel answers a process it does not allow. (Other
 *   agents and the gates have no controlling terminal: their supervisor or runShellGate gives them
 *   a session of their own. bwrap's --new-session would too, but would also put the agent out of
 *   reach of the TERM sent to its process group, which must reach it for its grace.)
 * - `keyctl`, `add_key`, `request_key`: the kernel's keyrings are not namespaced. The session
 *   keyring termorch was started in, and the user's keyring, would be readable from inside.
 *   ENOSYS, what a kernel without keyrings answers, which programs take as "no keyring here".
 *
 * Every other system call is allowed: the mount, namespace and privilege calls are already
 * refused by the sandbox itself (no capability is kept, even as root).
 */

/** The data seccomp filters read: `nr` at 0, `arch` at 4, `args[i]` at 16 + 8i (u64, host order). */
const NR = 0;
const ARCH = 4;
/** The low half of an argument, the whole of an `unsigned int` one (little-endian hosts only). */
const argLow = (i: number): number => 16 + 8 * i;

const RET_ALLOW = 0x7fff0000;
const RET_ERRNO = 0x00050000;
const EPERM = 1;
const ENOSYS = 38;

/** Terminal ioctls that push input (the same numbers on every architecture below). */
export const TIOCSTI = 0x5412;
export const TIOCLINUX = 0x541c;

/** One ABI a process of the host may call the kernel through: its audit arch and the numbers used. */
interface Abi {
  name: string;
  audit: number;
  ioctl: number;
  keyring: readonly number[];
  /** Numbers at and above this one are another ABI sharing the audit arch (x32): all refused. */
  foreignFrom?: number;
}

const X86_64: Abi = {
  name: "x86_64",
  audit: 0xc000003e,
  ioctl: 16,
  keyring: [248, 249, 250],
  foreignFrom: 0x40000000,
};
const I386: Abi = { name: "i386", audit: 0x40000003, ioctl: 54, keyring: [286, 287, 288] };
const AARCH64: Abi = { name: "aarch64", audit: 0xc00000b7, ioctl: 29, keyring: [217, 218, 219] };
const ARM: Abi = { name: "arm", audit: 0x40000028, ioctl: 54, keyring: [309, 310, 311] };

/** The ABIs of each host architecture (Node's `process.arch`): its own, then its 32-bit compat one. */
const HOSTS: Readonly<Record<string, readonly Abi[]>> = {
  x64: [X86_64, I386],
  arm64: [AARCH64, ARM],
};

/** The host architectures the filter exists for. */
export const SECCOMP_ARCHES = Object.keys(HOSTS);

/** One instruction; jumps name their targets by label until `assemble` resolves them. */
type Insn =
  | { op: "ld"; offset: number }
  | { op: "jeq" | "jge"; k: number; to: string }
  | { op: "ret"; k: number }
  | { label: string };

const LD_W_ABS = 0x20;
const JEQ_K = 0x15;
const JGE_K = 0x35;
const RET_K = 0x06;

/**
 * The filter for a host architecture (`process.arch`), as the bytes of its `struct sock_filter`
 * array; null where termorch has no table of system call numbers (the sandbox then runs without one).
 */
export function seccompFilter(arch: string): Buffer | null {
  const abis = HOSTS[arch];
  if (!abis) return null;
  const code: Insn[] = [{ op: "ld", offset: ARCH }];
  for (const abi of abis) code.push({ op: "jeq", k: abi.audit, to: abi.name });
  // A process of an ABI this host does not have cannot exist: if one does, it gets nothing.
  code.push({ op: "ret", k: RET_ERRNO | ENOSYS });
  for (const abi of abis) {
    code.push({ label: abi.name }, { op: "ld", offset: NR });
    if (abi.foreignFrom !== undefined) code.push({ op: "jge", k: abi.foreignFrom, to: "enosys" });
    code.push({ op: "jeq", k: abi.ioctl, to: "ioctl" });
    for (const nr of abi.keyring) code.push({ op: "jeq", k: nr, to: "enosys" });
    code.push({ op: "ret", k: RET_ALLOW });
  }
  // The request is an unsigned int: the kernel ignores the argument's upper half, so must we.
  code.push(
    { label: "ioctl" },
    { op: "ld", offset: argLow(1) },
    { op: "jeq", k: TIOCSTI, to: "eperm" },
    { op: "jeq", k: TIOCLINUX, to: "eperm" },
    { op: "ret", k: RET_ALLOW },
    { label: "eperm" },
    { op: "ret", k: RET_ERRNO | EPERM },
    { label: "enosys" },
    { op: "ret", k: RET_ERRNO | ENOSYS },
  );
  return assemble(code);
}

/** The program's bytes, labels resolved to forward jumps (a jump not taken falls through). */
function assemble(code: readonly Insn[]): Buffer {
  const at = new Map<string, number>();
  const insns: Exclude<Insn, { label: string }>[] = [];
  for (const i of code) {
    if ("label" in i) at.set(i.label, insns.length);
    else insns.push(i);
  }
  const out = Buffer.alloc(insns.length * 8);
  insns.forEach((insn, pc) => {
    const jump = (label: string): number => {
      const to = at.get(label);
      const off = to === undefined ? -1 : to - pc - 1;
      if (off < 0 || off > 255) throw new Error(`seccomp filter: no forward jump to ${label} from ${pc}`);
      return off;
    };
    const o = pc * 8;
    if (insn.op === "ld") {
      out.writeUInt16LE(LD_W_ABS, o);
      out.writeUInt32LE(insn.offset, o + 4);
    } else if (insn.op === "ret") {
      out.writeUInt16LE(RET_K, o);
      out.writeUInt32LE(insn.k >>> 0, o + 4);
    } else {
      out.writeUInt16LE(insn.op === "jeq" ? JEQ_K : JGE_K, o);
      out.writeUInt8(jump(insn.to), o + 2);
      out.writeUInt32LE(insn.k >>> 0, o + 4);
    }
  });
  return out;
}
