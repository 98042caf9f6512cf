import { describe, expect, it } from "vitest";
import { agentFor } from "../../src/agent/command.js";
import { Config } from "../../src/contract/config.js";
import { Sandbox } from "../../src/contract/sandbox.js";
import {
  bwrapArgs,
  proxyEnv,
  resolveSandbox,
  routesFile,
  routesOf,
  type SandboxPlace,
} from "../../src/sandbox/policy.js";

const NEEDS = { write: ["~/.cli/"], hosts: ["api.example.com"] };

describe("resolveSandbox", () => {
  it("is off unless a level turns it on, and the most specific level decides", () => {
    expect(resolveSandbox([undefined, undefined, undefined], NEEDS)).toBeNull();
    expect(resolveSandbox([{}, undefined, "off"], NEEDS)).toBeNull();
    expect(resolveSandbox(["off", undefined, {}], NEEDS)).not.toBeNull();
  });

  it("adds up the lists since the last off, takes the most specific network, and defaults to the CLI's hosts", () => {
    const s = resolveSandbox(
      [
        { filesystem: { allow_write: ["/a"], deny_read: ["~/x"], allow_read: [] }, network: "none" },
        { filesystem: { allow_write: ["/b"], deny_read: [], allow_read: [] } },
        undefined,
      ],
      NEEDS,
      ["~/.other/"],
    );
    expect(s).toEqual({
      allowWrite: ["/a", "/b", "~/.cli/"],
      denyRead: ["~/.other/", "~/x"],
      allowRead: [],
      network: "none",
    });
    expect(resolveSandbox([{}], NEEDS)?.network).toEqual(["api.example.com"]);
    expect(resolveSandbox([{}], null)?.network).toBe("none");
    // Another CLI's folder stays visible when this agent is given it.
    expect(
      resolveSandbox([{ filesystem: { allow_write: ["~/.other"], deny_read: [], allow_read: [] } }], null, [
        "~/.other/",
      ])?.denyRead,
    ).toEqual([]);
  });
});

describe("the schema", () => {
  it("takes host names and 127.x addresses, and refuses other addresses, bad ports and relative paths", () => {
    expect(
      Sandbox.safeParse({ network: ["api.anthropic.com", "127.0.0.1:8080", "localhost:1"] }).success,
    ).toBe(true);
    expect(Sandbox.safeParse({ network: ["10.0.0.1:80"] }).success).toBe(false);
    expect(Sandbox.safeParse({ network: ["host:70000"] }).success).toBe(false);
    expect(Sandbox.safeParse({ network: [] }).success).toBe(false);
    expect(Sandbox.safeParse({ filesystem: { allow_write: ["relative"] } }).success).toBe(false);
    expect(Sandbox.safeParse({ filesystem: { deny_read: ["~/ok", "/ok"], allow_read: [] } }).success).toBe(
      true,
    );
  });
});

describe("routesOf, routesFile and proxyEnv", () => {
  it("listens for 127.x inside, sends names through the proxy, and keeps each host and port once", () => {
    const routes = routesOf(["api.example.com", "127.0.0.1:8080", "127.0.0.1:8080", "localhost:8080"]);
    expect(routes).toEqual([
      { host: "api.example.com", port: 443, listen: null },
      { host: "127.0.0.1", port: 8080, listen: "127.0.0.1" },
      { host: "localhost", port: 8080, listen: null },
    ]);
    expect(routesFile(routes)).toBe(
      "route\t0\tapi.example.com\t443\t-\nroute\t1\t127.0.0.1\t8080\t127.0.0.1\nroute\t2\tlocalhost\t8080\t-\nproxy\t127.0.0.1\t3128\n",
    );
    expect(proxyEnv(routes)).toMatchObject({ HTTPS_PROXY: "http://127.0.0.1:3128", no_proxy: "127.0.0.1" });
    // Only local servers: no proxy at all; one on the proxy's port moves the proxy.
    expect(proxyEnv(routesOf(["127.0.0.1:9000"]))).toEqual({});
    expect(proxyEnv(routesOf(["127.0.0.1:3128", "x.example"])).HTTP_PROXY).toBe("http://127.0.0.1:3129");
  });
});

describe("bwrapArgs", () => {
  const place: SandboxPlace = {
    home: "/home/u",
    worktree: "/data/wt/run/t",
    tmp: "/data/att/tmp",
    writable: ["/data/run/artifacts/t"],
    readable: ["/data/repo/ctx.md"],
    hidden: ["/data/wt", "/data/run"],
    git: null,
    resolvConf: null,
    relay: null,
  };
  const all = () => "dir" as const;

  it("binds what is writable over what is hidden (deeper wins), and hides ~/.ssh and the deny list", () => {
    const args = bwrapArgs(
      { allowWrite: ["~/.cli/"], denyRead: ["~/secret"], allowRead: [], network: "none" },
      place,
      all,
    );
    const at = (...seq: string[]) => args.findIndex((_, i) => seq.every((s, j) => args[i + j] === s));
    expect(at("--tmpfs", "/data/wt")).toBeGreaterThan(-1);
    expect(at("--bind", "/data/wt/run/t", "/data/wt/run/t")).toBeGreaterThan(at("--tmpfs", "/data/wt"));
    expect(at("--bind", "/data/run/artifacts/t", "/data/run/artifacts/t")).toBeGreaterThan(
      at("--tmpfs", "/data/run"),
    );
    expect(at("--tmpfs", "/home/u/.ssh")).toBeGreaterThan(-1);
    expect(at("--tmpfs", "/home/u/secret")).toBeGreaterThan(-1);
    expect(at("--bind", "/home/u/.cli", "/home/u/.cli")).toBeGreaterThan(-1);
    expect(at("--bind", "/data/att/tmp", "/tmp")).toBeGreaterThan(-1);
    expect(args).toContain("--unshare-net");
    expect(at("--cap-drop", "ALL")).toBeGreaterThan(-1);
    // Hidden folders end read-only, after everything is bound inside them.
    expect(at("--remount-ro", "/data/wt")).toBeGreaterThan(at("--bind", "/data/wt/run/t", "/data/wt/run/t"));
  });

  it("hides rather than binds a path both writable and denied, and skips what does not exist", () => {
    const args = bwrapArgs(
      { allowWrite: ["/x", "/missing"], denyRead: ["/x"], allowRead: [], network: "host" },
      place,
      (p) => (p === "/missing" ? null : "dir"),
    );
    const join = args.join(" ");
    expect(join.indexOf("--tmpfs /x")).toBeGreaterThan(join.indexOf("--bind /x /x"));
    expect(join).not.toContain("/missing");
    expect(args).not.toContain("--unshare-net");
  });
});

describe("bwrapArgs: the kernel's settings", () => {
  const place: SandboxPlace = {
    home: "/home/u",
    worktree: "/w",
    tmp: "/t",
    writable: [],
    readable: [],
    hidden: [],
    git: null,
    resolvConf: null,
    relay: null,
  };
  const setting = { allowWrite: [], denyRead: [], allowRead: [], network: "none" as const };
  const proc = (p: string) =>
    p === "/proc/keys" ? ("file" as const) : p === "/proc/sysrq-trigger" ? null : ("dir" as const);

  it("covers /proc's settings read-only and empties /proc/keys, after /proc is mounted", () => {
    const args = bwrapArgs(setting, place, proc);
    const at = (...seq: string[]) => args.findIndex((_, i) => seq.every((s, j) => args[i + j] === s));
    for (const p of ["/proc/sys", "/proc/irq", "/proc/bus", "/proc/fs"])
      expect(at("--ro-bind", p, p), p).toBeGreaterThan(at("--proc", "/proc"));
    expect(at("--ro-bind", "/dev/null", "/proc/keys")).toBeGreaterThan(at("--proc", "/proc"));
    // What this kernel has not (no sysrq) is not named: bwrap would fail on it.
    expect(args).not.toContain("/proc/sysrq-trigger");
  });
});

describe("a preset inside the sandbox", () => {
  it("runs codex with termorch's confinement instead of its own nested one, headless and interactive", () => {
    const codex = agentFor({ agent: "codex" }, Config.parse({}))!;
    expect(codex.command.join(" ")).toContain("--sandbox workspace-write");
    expect(codex.sandboxedCommand.join(" ")).toContain("--sandbox danger-full-access");
    expect(codex.sandboxedCommand.join(" ")).not.toContain("workspace-write");
    expect(codex.interactive.sandboxedCommand.join(" ")).toContain(
      "--sandbox danger-full-access --ask-for-approval on-request",
    );
    // A CLI without a sandbox of its own runs the same either way.
    const claude = agentFor({ agent: "claude" }, Config.parse({}))!;
    expect(claude.sandboxedCommand).toEqual(claude.command);
  });
});
