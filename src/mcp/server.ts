import type { Server } from "@modelcontextprotocol/sdk/server/index.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { z } from "zod";
import { RUN_ID_PATTERN } from "../contract/assignments.js";
import { jsonSchemaOf, type SchemaName, schemas } from "../contract/json-schema.js";
import { schemaProblems } from "../contract/parse.js";
import { errorText, InputError, TermorchError } from "../errors.js";
import { runScope, scopeRuns } from "../ops/run-feed.js";
import { reportOf, TOOLS, type ToolCall } from "./tools.js";

/** What every call of one server shares. */
export interface McpOptions {
  env: Readonly<Record<string, string | undefined>>;
  cwd: string;
  home: string | null;
  version: string;
}

/** MCP wants a tool's schemas as plain JSON Schema objects; draft-07 is what clients validate with. */
function jsonSchema(schema: z.ZodType, io: "input" | "output"): { type: "object"; [k: string]: unknown } {
  const { $schema: _, ...rest } = z.toJSONSchema(schema, { io, target: "draft-7" }) as Record<
    string,
    unknown
  >;
  return { ...rest, type: "object" };
}

/**
 * A tool error: termorch's message as the CLI prints it, its kind and exit code (in the text, for
 * the model, and in `_meta`, for programs). Never a stack trace.
 */
export function toolError(error: unknown): CallToolResult {
  const known = error instanceof TermorchError;
  const kind = known ? error.kind : "internal";
  const exitCode = known ? error.exitCode : 70;
  const hint = error instanceof InputError ? error.hint : null;
  const message = errorText(error);
  const label = kind === "invalid_input" ? "invalid input" : kind;
  const text = [
    `termorch: ${label}:`,
    ...message.split("\n").map((l) => `  ${l}`),
    ...(hint ? [`  ${hint}`] : []),
    `  (error kind ${kind}, exit code ${exitCode})`,
  ].join("\n");
  return {
    isError: true,
    content: [{ type: "text", text }],
    _meta: {
      "termorch/error": {
        kind,
        exit_code: exitCode,
        message,
        hint,
        problems: error instanceof InputError ? error.problems : [],
      },
    },
  };
}

/** What tools/list answers, built once per process (each HTTP request has a server of its own). */
const toolList = (() => {
  let listed: Array<Record<string, unknown> & { name: string; inputSchema: { type: "object" } }> | null =
    null;
  return () =>
    (listed ??= TOOLS.map((t) => ({
      name: t.name,
      title: t.title,
      description: t.description,
      inputSchema: jsonSchema(t.input, "input"),
      outputSchema: jsonSchema(t.output, "output"),
      annotations: { title: t.title, readOnlyHint: t.readOnly, openWorldHint: false },
    })));
})();

const REPORT_URI = /^termorch:\/\/runs\/([^/]+)\/report$/;
const SCHEMA_URI = /^termorch:\/\/schema\/([a-z-]+)$/;

/**
 * `termorch mcp`'s server: the tools of src/mcp/tools.ts, run reports and JSON Schemas as
 * resources. The SDK is loaded here, on demand: no other command pays for it.
 */
export async function termorchServer(o: McpOptions): Promise<Server> {
  const { Server } = await import("@modelcontextprotocol/sdk/server/index.js");
  const {
    CallToolRequestSchema,
    ErrorCode,
    ListResourcesRequestSchema,
    ListResourceTemplatesRequestSchema,
    ListToolsRequestSchema,
    McpError,
    ReadResourceRequestSchema,
  } = await import("@modelcontextprotocol/sdk/types.js");
  const server = new Server(
    { name: "termorch", title: "termorch", version: o.version },
    {
      capabilities: { tools: { listChanged: false }, resources: { listChanged: false } },
      instructions:
        "termorch runs coding agents in parallel, each in its own tmux session and git worktree, then merges their branches. Write an assignments document (tasks with ids, agents, context files, dependencies), check it with validate, start it with run, follow it with wait (passing each answer's cursor to the next call) until finished, then read report. Answer a task waiting for input with send, and one waiting for a person's decision (its approval) with approve or reject.",
    },
  );
  const byName = new Map<string, (typeof TOOLS)[number]>(TOOLS.map((t) => [t.name, t]));

  server.setRequestHandler(ListToolsRequestSchema, () => ({ tools: toolList() }));

  server.setRequestHandler(CallToolRequestSchema, async (request, extra): Promise<CallToolResult> => {
    const { name, arguments: args = {} } = request.params;
    const t = byName.get(name);
    if (!t)
      return toolError(
        new InputError(
          [{ message: `no tool "${name}"` }],
          `The tools: ${TOOLS.map((x) => x.name).join(", ")}.`,
        ),
      );
    const parsed = t.input.safeParse(args);
    if (!parsed.success)
      return toolError(
        new InputError(
          schemaProblems(parsed.error, args, `the ${name} tool's arguments`),
          "Call it again with them fixed.",
        ),
      );
    const token = request.params._meta?.progressToken;
    let last = Number.NEGATIVE_INFINITY;
    const call: ToolCall = {
      env: o.env,
      cwd: o.cwd,
      home: o.home,
      signal: extra.signal,
      progress: async (progress, total, message) => {
        // The protocol wants progress to grow; every two seconds is enough to show life.
        if (token === undefined || progress < last + 2) return;
        last = progress;
        await extra
          .sendNotification({
            method: "notifications/progress",
            params: { progressToken: token, progress, total, message },
          })
          .catch(() => {});
      },
    };
    try {
      // biome-ignore lint/suspicious/noExplicitAny: each tool's call takes its own input's type
      const out = await t.call(parsed.data as any, call);
      // Compact: a large report counts against the client's limit on a tool answer.
      return { content: [{ type: "text", text: JSON.stringify(out) }], structuredContent: out };
    } catch (error) {
      return toolError(error);
    }
  });

  server.setRequestHandler(ListResourcesRequestSchema, async () => {
    const runs = await scopeRuns(runScope(undefined, o.home ?? undefined, o.cwd), o.env, o.cwd).catch(
      () => [],
    );
    return {
      resources: [
        ...runs
          .filter((r) => r.state?.report)
          .map((r) => ({
            uri: `termorch://runs/${r.runId}/report`,
            name: `report of ${r.runId}`,
            description: `execution_report.json of run ${r.runId} (${r.runDir})`,
            mimeType: "application/json",
          })),
        ...Object.keys(schemas).map((name) => ({
          uri: `termorch://schema/${name}`,
          name: `${name} schema`,
          description: `JSON Schema of termorch's ${name} format`,
          mimeType: "application/schema+json",
        })),
      ],
    };
  });

  server.setRequestHandler(ListResourceTemplatesRequestSchema, () => ({
    resourceTemplates: [
      {
        uriTemplate: "termorch://runs/{run_id}/report",
        name: "run report",
        description: "A run's execution_report.json, once it finished",
        mimeType: "application/json",
      },
    ],
  }));

  server.setRequestHandler(ReadResourceRequestSchema, async (request) => {
    const uri = request.params.uri;
    const schema = SCHEMA_URI.exec(uri)?.[1];
    if (schema && schema in schemas)
      return {
        contents: [
          {
            uri,
            mimeType: "application/schema+json",
            text: JSON.stringify(jsonSchemaOf(schema as SchemaName), null, 2),
          },
        ],
      };
    const run = REPORT_URI.exec(uri)?.[1];
    if (run !== undefined && RUN_ID_PATTERN.test(run)) {
      try {
        const report = await reportOf(run, o.env, o.cwd);
        return { contents: [{ uri, mimeType: "application/json", text: JSON.stringify(report, null, 2) }] };
      } catch (error) {
        throw new McpError(ErrorCode.InvalidParams, errorText(error));
      }
    }
    throw new McpError(
      ErrorCode.InvalidParams,
      `no resource ${uri}: termorch has termorch://runs/<run_id>/report and termorch://schema/<name>`,
    );
  });

  return server;
}
