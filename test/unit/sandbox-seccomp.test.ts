import { describe, expect, it } from "vitest";
import { SECCOMP_ARCHES, seccompFilter, TIOCLINUX, TIOCSTI } from "../../src/sandbox/seccomp.js";

// The filter is run here by a classic-BPF interpreter of the instructions it uses (the kernel's
// verdict on the real program: test/integration/sandbox.test.ts), over seccomp_data as the kernel
// lays it out: nr, arch, instruction pointer, six 64-bit arguments, little-endian.
const ALLOW = "allow";
const EPERM = "EPERM";
const ENOSYS = "ENOSYS";

function verdict(program: Buffer, arch: number, nr: number, args: bigint[] = []): string {
  const data = Buffer.alloc(64);
  data.writeUInt32LE(nr >>> 0, 0);
  data.writeUInt32LE(arch >>> 0, 4);
  for (const [i, a] of args.entries()) data.writeBigUInt64LE(a, 16 + 8 * i);
  let acc = 0;
  for (let pc = 0; pc * 8 < program.length; pc++) {
    const code = program.readUInt16LE(pc * 8);
    const jt = program.readUInt8(pc * 8 + 2);
    const jf = program.readUInt8(pc * 8 + 3);
    const k = program.readUInt32LE(pc * 8 + 4);
    if (code === 0x20) acc = data.readUInt32LE(k);
    else if (code === 0x15) pc += acc === k ? jt : jf;
    else if (code === 0x35) pc += acc >= k ? jt : jf;
    else if (code === 0x06) {
      if (k === 0x7fff0000) return ALLOW;
      if (k >>> 16 === 0x0005) return { 1: EPERM, 38: ENOSYS }[k & 0xffff] ?? `errno ${k & 0xffff}`;
      return `ret ${k.toString(16)}`;
    } else throw new Error(`unknown instruction ${code.toString(16)} at ${pc}`);
  }
  throw new Error("ran off the end of the program");
}

// Per ABI: its audit arch, and its numbers of read, ioctl, add_key, request_key and keyctl.
const ABIS = {
  x64: [
    { audit: 0xc000003e, read: 0, ioctl: 16, keyring: [248, 249, 250] },
    { audit: 0x40000003, read: 3, ioctl: 54, keyring: [286, 287, 288] },
  ],
  arm64: [
    { audit: 0xc00000b7, read: 63, ioctl: 29, keyring: [217, 218, 219] },
    { audit: 0x40000028, read: 3, ioctl: 54, keyring: [309, 310, 311] },
  ],
};

describe("the sandbox's seccomp filter", () => {
  it("exists for x64 and arm64 only", () => {
    expect(SECCOMP_ARCHES.sort()).toEqual(["arm64", "x64"]);
    expect(seccompFilter("ia32")).toBeNull();
    expect(seccompFilter("riscv64")).toBeNull();
  });

  for (const [host, abis] of Object.entries(ABIS))
    it(`on ${host}, refuses TIOCSTI, TIOCLINUX and the keyrings in each ABI, and allows the rest`, () => {
      const program = seccompFilter(host)!;
      for (const abi of abis) {
        const v = (nr: number, args?: bigint[]) => verdict(program, abi.audit, nr, args);
        expect(v(abi.ioctl, [0n, BigInt(TIOCSTI)])).toBe(EPERM);
        expect(v(abi.ioctl, [0n, BigInt(TIOCLINUX)])).toBe(EPERM);
        // The kernel reads the request as an unsigned int: bits above it change nothing.
        expect(v(abi.ioctl, [0n, 0xffffffff00000000n | BigInt(TIOCSTI)])).toBe(EPERM);
        // Other ioctls (TCGETS), TIOCSTI's number as another argument, another call with it.
        expect(v(abi.ioctl, [0n, 0x5401n])).toBe(ALLOW);
        expect(v(abi.ioctl, [BigInt(TIOCSTI), 0x5401n])).toBe(ALLOW);
        expect(v(abi.read, [0n, BigInt(TIOCSTI)])).toBe(ALLOW);
        for (const nr of abi.keyring) expect(v(nr)).toBe(ENOSYS);
      }
      // Another ABI than the host's: nothing at all.
      expect(verdict(program, 0xc00000f3, 0)).toBe(ENOSYS);
    });

  it("refuses x32 calls on x64 (the same audit arch, numbers from 0x40000000)", () => {
    const program = seccompFilter("x64")!;
    expect(verdict(program, 0xc000003e, 0x40000000 + 514, [0n, BigInt(TIOCSTI)])).toBe(ENOSYS);
    expect(verdict(program, 0xc000003e, 0x40000000)).toBe(ENOSYS);
    expect(verdict(program, 0xc000003e, 0x3fffffff)).toBe(ALLOW);
  });
});
