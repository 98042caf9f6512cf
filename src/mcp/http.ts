import {
  createServer,
  type Server as HttpServer,
  type IncomingMessage,
  type ServerResponse,
} from "node:http";
import type { AddressInfo } from "node:net";
import { hostAllowed, tokenMatches, tokenOf } from "../serve/auth.js";
import { type McpOptions, termorchServer } from "./server.js";

/** `termorch mcp --http`: MCP over the SDK's streamable HTTP transport, at `/mcp`. */
export interface McpHttp {
  url: string;
  port: number;
  close(): Promise<void>;
}

/**
 * Listens on `host:port` (loopback unless told otherwise). Every request must name the bound
 * address in its Host header (DNS rebinding) and carry the token (`Authorization: Bearer`, or
 * `?token=`), as `serve`'s do. Stateless: each POST gets a server and transport of its own, so
 * no session outlives its request and a restarted server is the same to its clients.
 */
export async function serveMcpHttp(
  o: McpOptions & { host: string; port: number; token: string },
): Promise<McpHttp> {
  const { StreamableHTTPServerTransport } = await import(
    "@modelcontextprotocol/sdk/server/streamableHttp.js"
  );
  const refuse = (res: ServerResponse, status: number, message: string): void => {
    res
      .writeHead(status, { "content-type": "application/json" })
      .end(JSON.stringify({ jsonrpc: "2.0", error: { code: -32000, message }, id: null }));
  };
  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const url = new URL(req.url ?? "/", "http://localhost");
    if (!hostAllowed(req.headers.host, o.host))
      return refuse(res, 403, "this Host is not the server's address");
    if (!tokenMatches(tokenOf(url, req.headers.authorization), o.token))
      return refuse(res, 401, "missing or wrong token: send Authorization: Bearer <token>");
    if (url.pathname !== "/mcp") return refuse(res, 404, "termorch's MCP endpoint is /mcp");
    if (req.method !== "POST") return refuse(res, 405, "this server is stateless: POST only");
    const server = await termorchServer(o);
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
    res.on("close", () => {
      void transport.close();
      void server.close();
    });
    await server.connect(transport);
    await transport.handleRequest(req, res);
  };
  const http: HttpServer = createServer((req, res) => {
    handle(req, res).catch((error: unknown) => {
      if (!res.headersSent) refuse(res, 500, error instanceof Error ? error.message : String(error));
      else res.end();
    });
  });
  await new Promise<void>((resolve, reject) => {
    http.once("error", reject);
    http.listen(o.port, o.host, () => {
      http.off("error", reject);
      resolve();
    });
  });
  const port = (http.address() as AddressInfo).port;
  const shown = o.host.includes(":") ? `[${o.host}]` : o.host;
  return {
    url: `http://${shown}:${port}/mcp`,
    port,
    close: () =>
      new Promise<void>((resolve) => {
        http.closeAllConnections();
        http.close(() => resolve());
      }),
  };
}
