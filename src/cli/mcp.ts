import { resolve } from "node:path";
import type { Command } from "commander";
import { ExitCode, InputError } from "../errors.js";
import { TOOLS } from "../mcp/tools.js";
import { isLoopback, newToken } from "../serve/auth.js";
import type { Io } from "./io.js";
import { address, listenFailure, port, untilStopped } from "./listen-options.js";
import { stopSignal } from "./stop-signal.js";
import { packageVersion } from "./version.js";

/** The shortest token `$TERMORCH_MCP_TOKEN` may set: as hard to guess as a fresh one. */
const MIN_TOKEN = 24;

/** `termorch mcp --help`'s list of tools: each one's name and the first sentence of its description. */
function toolList(): string {
  const width = Math.max(...TOOLS.map((t) => t.name.length));
  return [
    "",
    "Tools:",
    ...TOOLS.flatMap((t) =>
      wrap(t.description.split(/(?<=\.)\s/)[0] ?? "", 76 - width).map(
        (line, i) => `  ${(i === 0 ? t.name : "").padEnd(width)}  ${line}`,
      ),
    ),
    "",
    "Resources: termorch://runs/<run_id>/report (each finished run's report) and",
    "termorch://schema/<name> (the JSON Schemas of termorch's files).",
    "",
    "Set-up for each agent CLI: docs/guides/mcp.md.",
    "",
  ].join("\n");
}

/** Words into lines of at most `width` characters. */
function wrap(text: string, width: number): string[] {
  const lines: string[] = [];
  let line = "";
  for (const word of text.split(" ")) {
    if (line && line.length + 1 + word.length > width) {
      lines.push(line);
      line = word;
    } else line = line ? `${line} ${word}` : word;
  }
  return [...lines, line];
}

/**
 * `termorch mcp` (docs/guides/mcp.md): an MCP server on stdin/stdout, or with
 * `--http` on a loopback port with a token. Runs it starts belong to detached drivers (or the
 * daemon of `--home`), never to this process.
 */
export function registerMcpCommand(program: Command, io: Io, setCode: (code: number) => void): void {
  program
    .command("mcp")
    .description(
      "an MCP server for an agent that drives termorch: validate, run, status, wait, report, logs, send, finish, approve, reject, stop, cancel, agents as tools",
    )
    .option(
      "--home <dir>",
      "start runs through the daemon of this home (its inbox) instead of detached drivers",
    )
    .option("--http", "serve MCP over streamable HTTP (at /mcp) instead of stdin/stdout")
    .option("--port <n>", "with --http: port to listen on (default: 0, a free one)", port, 0)
    .option(
      "--host <addr>",
      "with --http: address to listen on (default 127.0.0.1; any other makes it reachable from elsewhere)",
      address,
      "127.0.0.1",
    )
    .addHelpText("after", toolList())
    .action(async (o: { home?: string; http?: boolean; port: number; host: string }) => {
      setCode(await mcp(o, io));
    });
}

async function mcp(
  o: { home?: string; http?: boolean; port: number; host: string },
  io: Io,
): Promise<number> {
  const options = {
    env: io.env,
    cwd: io.cwd,
    home: o.home === undefined ? null : resolve(io.cwd, o.home),
    version: packageVersion(),
  };
  if (!o.http) {
    const { termorchServer } = await import("../mcp/server.js");
    const { StdioServerTransport } = await import("@modelcontextprotocol/sdk/server/stdio.js");
    const server = await termorchServer(options);
    const closed = new Promise<void>((done) => {
      server.onclose = done;
    });
    // The client went away (closed our stdin): so does the server; the runs it started go on.
    process.stdin.once("end", () => void server.close());
    const stop = stopSignal(io, { readerGone: false });
    stop.signal.addEventListener("abort", () => void server.close(), { once: true });
    try {
      await server.connect(new StdioServerTransport());
      await closed;
      return ExitCode.ok;
    } finally {
      stop.dispose();
    }
  }
  const token = io.env.TERMORCH_MCP_TOKEN ?? newToken();
  if (token.length < MIN_TOKEN)
    throw new InputError(
      [
        {
          message: `TERMORCH_MCP_TOKEN is ${token.length} characters long; it must be at least ${MIN_TOKEN}`,
        },
      ],
      "Unset it (a fresh token is made at each start) or make it longer, e.g. openssl rand -base64 24.",
    );
  if (!isLoopback(o.host))
    io.stderr.write(
      `termorch: warning: MCP on ${o.host}: other machines can reach it; anyone with its token can start runs. Prefer the default and an SSH tunnel.\n`,
    );
  const { serveMcpHttp } = await import("../mcp/http.js");
  let http: Awaited<ReturnType<typeof serveMcpHttp>>;
  try {
    http = await serveMcpHttp({ ...options, host: o.host, port: o.port, token });
  } catch (error) {
    throw listenFailure(error, o.host, o.port);
  }
  const stop = stopSignal(io, { readerGone: false });
  try {
    io.stdout.write(`${http.url}\n`);
    io.stderr.write(
      `termorch mcp: MCP over HTTP at the URL above; send the header "Authorization: Bearer ${token}"; Ctrl-C stops it\n`,
    );
    return await untilStopped(stop);
  } finally {
    stop.dispose();
    await http.close();
  }
}
