import { z } from "zod";

/**
 * A host an agent may reach from its sandbox: a DNS name or an IPv4 address, with `:port`
 * (default 443, the port every coding-agent CLI's API is on).
 */
const HOST_LABEL = "[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?";
export const HOST_ENTRY_PATTERN = new RegExp(`^(${HOST_LABEL}(?:\\.${HOST_LABEL})*)(?::([0-9]{1,5}))?$`);

export const NetworkHost = z
  .string()
  .regex(
    HOST_ENTRY_PATTERN,
    "must be a host name or IPv4 address, with :port when not 443 (e.g. 127.0.0.1:8080)",
  )
  .refine((entry) => {
    const port = HOST_ENTRY_PATTERN.exec(entry)?.[2];
    return port === undefined || (Number(port) >= 1 && Number(port) <= 65535);
  }, "its port must be 1-65535")
  .refine((entry) => {
    const host = HOST_ENTRY_PATTERN.exec(entry)?.[1] ?? "";
    return !/^[0-9.]+$/.test(host) || host.startsWith("127.");
  }, "an IP address other than 127.x cannot be reached from the sandbox: name the host instead (its name is what the agent connects to)");

/** A path a sandbox rule names: absolute, or in the agent's home (`~/...`). */
export const SandboxPath = z
  .string()
  .refine((p) => !p.includes("\0"), "must not contain a NUL byte")
  .refine(
    (p) => p.startsWith("/") || p.startsWith("~/"),
    "must be absolute or start with ~/ (the agent's home)",
  );

export const SandboxNetwork = z
  .union([z.enum(["host", "none"]), z.array(NetworkHost).min(1)])
  .describe(
    'What the agent may reach: "host" (everything this machine reaches), "none" (nothing, not even loopback), or a list of hosts ("api.anthropic.com", "127.0.0.1:8080"); every other host, port and raw connection is refused. Default: the preset\'s API hosts, "none" for an agent of its own command',
  );
export type SandboxNetwork = z.infer<typeof SandboxNetwork>;

export const SandboxFilesystem = z.strictObject({
  allow_write: z
    .array(SandboxPath)
    .default([])
    .describe(
      "Paths the agent may write besides its worktree, temporary folder, artifacts and its CLI's own folders (the preset's)",
    ),
  deny_read: z
    .array(SandboxPath)
    .default([])
    .describe(
      "Paths hidden from the agent besides the built-in ones (~/.ssh, ~/.aws, ~/.gnupg, ~/.config/gh, ~/.netrc, …)",
    ),
  allow_read: z
    .array(SandboxPath)
    .default([])
    .describe(
      "Paths shown read-only where the sandbox hides what is around them (under /tmp, which the agent sees as its own, or under a hidden folder): a tool installed there",
    ),
});
export type SandboxFilesystem = z.infer<typeof SandboxFilesystem>;

export const SandboxSpec = z.strictObject({
  filesystem: SandboxFilesystem.optional(),
  network: SandboxNetwork.optional(),
});
export type SandboxSpec = z.infer<typeof SandboxSpec>;

/**
 * `sandbox` in the config's `defaults`, an agent entry and a task: "off", or the agent's whole
 * process tree confined by bubblewrap (docs/guides/sandbox.md).
 */
export const Sandbox = z
  .union([z.literal("off"), SandboxSpec])
  .describe(
    'Confine the agent\'s whole process tree (bubblewrap): "off", or {"filesystem": {"allow_write": [...], "deny_read": [...]}, "network": "host" | "none" | [hosts]}. The most specific level that sets it (task, then agent, then defaults) decides whether it is on; its lists add to those of the levels above it',
  );
export type Sandbox = z.infer<typeof Sandbox>;
