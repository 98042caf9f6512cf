import { randomBytes } from "node:crypto";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { z } from "zod";
import { SendAnswer } from "../contract/send.js";
import { isLive, type RunView, type StatusView, type TaskView } from "../contract/status-view.js";
import { InputError } from "../errors.js";
import { type Deciding, decide } from "../ops/approval.js";
import type { RunFeed } from "../ops/run-feed.js";
import { type Asset, loadAssets } from "./assets.js";
import { hostAllowed, newToken, tokenMatches, tokenOf } from "./auth.js";
import { PtyUnavailable, SessionGone, type TerminalPool, TooManyTerminals } from "./terminal.js";

export interface DashboardOptions {
  feed: RunFeed;
  terminals: TerminalPool;
  /** Address to bind: 127.0.0.1 unless the operator said otherwise. */
  host: string;
  /** 0: a free port. */
  port: number;
  /** A run's timeline as an HTML fragment and its CSS (from its ledger and report), or null when it has none. */
  timeline?: (run: RunView) => Promise<{ html: string; css: string } | null>;
  /** The access token; a new random one when not given. */
  token?: string;
  /**
   * Types an answer into a task's agent as `termorch send` does; an InputError says why it
   * cannot (the task does not run, is not interactive). Absent: the page answers nothing.
   */
  send?: (run: RunView, taskId: string, answer: SendAnswer) => Promise<void>;
  /**
   * Answers what waits for a person's decision in a run, as `termorch approve|reject` does: a
   * task's (its start, or its attempt's result), or with no task the run's merge's; an InputError
   * says why it cannot (nothing waits, the run is finished), nothing written. Default: the ops'
   * decide() with this process's environment and working directory (the CLI's own).
   */
  decide?: (run: RunView, taskId: string | undefined, deciding: Deciding) => Promise<void>;
}

/** What an approve or a reject takes: why (required to reject; to approve, a note kept in the ledger). */
const DecisionBody = z.strictObject({
  reason: z
    .string()
    .max(16 * 1024)
    .nullable()
    .optional(),
});

/** By default a decision is written as `termorch approve|reject` writes it, with this process's environment. */
const decideInRun: NonNullable<DashboardOptions["decide"]> = async (run, taskId, deciding) => {
  // The run by its folder: a run id may name runs of two workspaces.
  await decide(run.run_dir, taskId, deciding, { env: process.env, cwd: process.cwd(), now: Date.now() });
};

/** The largest body a send (text to paste, or keys) or a decision (its reason) takes. */
const MAX_SEND_BYTES = 64 * 1024;

/** How often an idle event stream sends a comment, so that proxies and tunnels keep it open. */
const KEEPALIVE_MS = 20_000;

const FORBIDDEN_HOST =
  "403 forbidden: the address in this request's Host is not the one `termorch serve` listens on (open the URL it printed, or a tunnel to it)\n";
const FORBIDDEN =
  "403 forbidden: open the URL that `termorch serve` printed (its token is required on every request)\n";

/**
 * `termorch serve`'s HTTP server (node:http): the page, its assets, the live StatusView as
 * server-sent events from the RunFeed, each run's timeline, a live read-only terminal of a
 * task's tmux session as server-sent events from a pty, the answer to a task waiting for
 * input (POST .../send, JSON: text or keys, as MCP's send), and a person's decision on what waits
 * for one (POST .../approve or .../reject, JSON: a reason). Every request must carry the token
 * (query `token` or `Authorization: Bearer`) and name the bound address in Host; anything else
 * gets 403 and nothing of the data.
 */
export class Dashboard {
  readonly token: string;
  private readonly server: Server;
  private readonly assets = loadAssets();
  private readonly streams = new Set<ServerResponse>();
  private closing: Promise<void> | null = null;

  private constructor(private readonly options: DashboardOptions) {
    this.token = options.token ?? newToken();
    this.server = createServer((req, res) => {
      this.handle(req, res).catch(() => {
        // No detail to the browser: a message could carry a path or worse.
        if (!res.headersSent) send(res, 500, "text/plain; charset=utf-8", "500 internal error\n");
        else res.end();
      });
    });
  }

  static async start(options: DashboardOptions): Promise<Dashboard> {
    const dashboard = new Dashboard(options);
    await new Promise<void>((resolve, reject) => {
      dashboard.server.once("error", reject);
      dashboard.server.listen({ host: options.host, port: options.port, exclusive: true }, () => {
        dashboard.server.off("error", reject);
        resolve();
      });
    });
    return dashboard;
  }

  get port(): number {
    return (this.server.address() as AddressInfo).port;
  }

  /** The address to open, token included. */
  get url(): string {
    const host = this.options.host.includes(":") ? `[${this.options.host}]` : this.options.host;
    return `http://${host}:${this.port}/?token=${this.token}`;
  }

  /** Ends the event streams and terminals, then the server. */
  close(): Promise<void> {
    this.closing ??= (async () => {
      this.options.terminals.closeAll();
      for (const res of this.streams) res.end();
      this.streams.clear();
      const closed = new Promise<void>((resolve) => this.server.close(() => resolve()));
      this.server.closeAllConnections();
      await closed;
    })();
    return this.closing;
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? "/", "http://serve.invalid");
    if (!hostAllowed(req.headers.host, this.options.host)) {
      send(res, 403, "text/plain; charset=utf-8", FORBIDDEN_HOST);
      return;
    }
    if (!tokenMatches(tokenOf(url, req.headers.authorization), this.token)) {
      send(res, 403, "text/plain; charset=utf-8", FORBIDDEN);
      return;
    }
    const path = url.pathname;
    const answer = /^\/runs\/([^/]+)\/tasks\/([^/]+)\/send$/.exec(path);
    if (answer?.[1] && answer[2]) {
      if (req.method === "POST") return this.answer(req, res, decode(answer[1]), decode(answer[2]));
      res.setHeader("Allow", "POST");
      send(res, 405, "text/plain; charset=utf-8", "405 method not allowed: a send is a POST\n");
      return;
    }
    // A task's wait for a person's decision, or (merge) the run's integration's.
    const decision = /^\/runs\/([^/]+)\/(?:tasks\/([^/]+)|(merge))\/(approve|reject)$/.exec(path);
    if (decision?.[1] && decision[4]) {
      const verb = decision[4] as "approve" | "reject";
      if (req.method === "POST")
        return this.decision(
          req,
          res,
          verb,
          decode(decision[1]),
          decision[3] ? undefined : decode(decision[2] ?? ""),
        );
      res.setHeader("Allow", "POST");
      send(res, 405, "text/plain; charset=utf-8", `405 method not allowed: ${verb} is a POST\n`);
      return;
    }
    if (req.method !== "GET" && req.method !== "HEAD") {
      res.setHeader("Allow", "GET, HEAD");
      send(
        res,
        405,
        "text/plain; charset=utf-8",
        "405 method not allowed: only a task's send (POST /runs/<run>/tasks/<task>/send) and a decision (POST /runs/<run>/tasks/<task>/approve|reject, /runs/<run>/merge/approve|reject) change anything\n",
      );
      return;
    }
    if (path === "/") return this.page(res);
    const asset = this.assets.files.get(path);
    if (asset) return sendAsset(res, asset);
    if (path === "/api/view") {
      send(res, 200, "application/json; charset=utf-8", JSON.stringify(this.options.feed.current()));
      return;
    }
    const timeline = /^\/runs\/([^/]+)\/timeline$/.exec(path);
    if (timeline?.[1]) return this.timeline(res, decode(timeline[1]));
    const terminal = /^\/runs\/([^/]+)\/tasks\/([^/]+)\/terminal$/.exec(path);
    if ((path === "/events" || terminal) && req.method === "HEAD") {
      // A stream's headers only: no feed listener, no pty for a request that reads no body.
      send(res, 200, "text/event-stream; charset=utf-8", "");
      return;
    }
    if (path === "/events") return this.viewStream(req, res);
    if (terminal?.[1] && terminal[2])
      return this.terminal(req, res, decode(terminal[1]), decode(terminal[2]));
    send(res, 404, "text/plain; charset=utf-8", "404 not found\n");
  }

  private page(res: ServerResponse): void {
    // A nonce per page for its style elements: xterm.js adds <style> elements at run time, which a
    // CSP without 'unsafe-inline' only lets in with the page's nonce (app.js gives it to them).
    const nonce = randomBytes(16).toString("base64");
    const html = this.assets.index.replaceAll("{{TOKEN}}", this.token).replaceAll("{{NONCE}}", nonce);
    send(res, 200, "text/html; charset=utf-8", html, nonce);
  }

  /** The StatusView as server-sent events: the current one at once, then each new one. */
  private viewStream(req: IncomingMessage, res: ServerResponse): void {
    const stream = this.openStream(req, res);
    const push = (view: StatusView): void => {
      event(res, "view", JSON.stringify(view));
    };
    push(this.options.feed.current());
    const stop = this.options.feed.subscribe(push);
    stream.onClose(stop);
  }

  private async timeline(res: ServerResponse, runId: string | null): Promise<void> {
    const run = runId === null ? undefined : findRun(this.options.feed.current(), runId);
    if (!run) {
      send(res, 404, "text/plain; charset=utf-8", "404 no such run\n");
      return;
    }
    // No timeline (yet) is an answer, not an error: the page asks again as the run moves on.
    const fragment = (await this.options.timeline?.(run)) ?? { html: null, css: null };
    send(res, 200, "application/json; charset=utf-8", JSON.stringify(fragment));
  }

  /**
   * A live read-only terminal of a task's session: `size` (the pane's cols and rows), then the
   * client's output as JSON strings, then `end` when the session (or the server) ends. The run
   * and the task are looked up in the feed's view: only a session termorch shows for that task
   * reaches tmux, never a string from the URL.
   */
  private async terminal(
    req: IncomingMessage,
    res: ServerResponse,
    runId: string | null,
    taskId: string | null,
  ): Promise<void> {
    const found =
      runId === null || taskId === null ? null : findTask(this.options.feed.current(), runId, taskId);
    if (!found) {
      send(res, 404, "text/plain; charset=utf-8", "404 no such task with a tmux session\n");
      return;
    }
    const { run, task } = found;
    let term: Awaited<ReturnType<TerminalPool["attach"]>>;
    try {
      term = await this.options.terminals.attach({
        socket: run.socket,
        socketPath: run.socket_path,
        session: task.session as string,
      });
    } catch (error) {
      if (error instanceof TooManyTerminals)
        send(res, 429, "text/plain; charset=utf-8", `429 ${error.message}\n`);
      else if (error instanceof SessionGone)
        send(res, 404, "text/plain; charset=utf-8", `404 ${error.message}\n`);
      else if (error instanceof PtyUnavailable)
        send(res, 503, "text/plain; charset=utf-8", `503 ${error.message}\n`);
      else throw error;
      return;
    }
    if (req.destroyed || this.closing) {
      term.close();
      return;
    }
    const stream = this.openStream(req, res);
    event(res, "size", JSON.stringify({ cols: term.cols, rows: term.rows }));
    term.onData((chunk) => {
      // The browser reads slower than the agent writes: stop reading the pty until it caught up.
      if (!res.write(`data: ${JSON.stringify(chunk)}\n\n`)) {
        term.pause();
        res.once("drain", () => term.resume());
      }
    });
    term.onEnd(() => {
      event(res, "end", "{}");
      stream.end();
    });
    stream.onClose(() => term.close());
  }

  /**
   * An answer to a task's agent: a JSON body (SendAnswer: text or keys) typed into the task's
   * session as `termorch send` types it. JSON only, so that no page of another site can post one
   * as a form; the run and the task are looked up in the feed's view, like a terminal's.
   */
  private async answer(
    req: IncomingMessage,
    res: ServerResponse,
    runId: string | null,
    taskId: string | null,
  ): Promise<void> {
    const json = jsonSender(res);
    if (!this.options.send) return json(404, { error: "this dashboard answers no task" });
    const given = await readJsonRequest(req, json, "a send");
    if (given === undefined) return;
    const parsed = SendAnswer.safeParse(given);
    if (!parsed.success) return json(400, { error: issuesText(parsed.error) });
    const found =
      runId === null || taskId === null ? null : findTask(this.options.feed.current(), runId, taskId);
    if (!found) return json(404, { error: "no such task with a tmux session" });
    try {
      await this.options.send(found.run, found.task.id, parsed.data);
    } catch (error) {
      if (error instanceof InputError) return json(400, { error: error.message, hint: error.hint });
      throw error;
    }
    json(200, { run_id: found.run.run_id, task: found.task.id, detail: "sent" });
  }

  /**
   * A person's decision, as `termorch approve|reject <run> [task]` gives it (by "serve"): on a
   * task's wait (its start, or its attempt's result) or, `taskId` undefined, on the run's merge's.
   * A JSON body (`{"reason": ...}`, required to reject) of the page's own origin, as a send's;
   * the run and the task are looked up in the feed's view. Nothing waits, or the run is finished:
   * 400 and its reason, nothing written.
   */
  private async decision(
    req: IncomingMessage,
    res: ServerResponse,
    verb: "approve" | "reject",
    runId: string | null,
    taskId: string | null | undefined,
  ): Promise<void> {
    const json = jsonSender(res);
    const given = await readJsonRequest(req, json, verb === "approve" ? "an approval" : "a rejection");
    if (given === undefined) return;
    const parsed = DecisionBody.safeParse(given);
    if (!parsed.success) return json(400, { error: issuesText(parsed.error) });
    const reason = parsed.data.reason?.trim() || null;
    if (verb === "reject" && reason === null)
      return json(400, {
        error: "a rejection needs its reason (the body's `reason`)",
        hint: "Say what is wrong: the reason is what the task's next attempt is told.",
      });
    const run = runId === null ? undefined : findRun(this.options.feed.current(), runId);
    if (!run) return json(404, { error: "no such run" });
    if (taskId === null || (taskId !== undefined && !run.tasks.some((t) => t.id === taskId)))
      return json(404, { error: "no such task in that run" });
    try {
      await (this.options.decide ?? decideInRun)(run, taskId, { decision: verb, reason, by: "serve" });
    } catch (error) {
      if (error instanceof InputError) return json(400, { error: error.message, hint: error.hint });
      throw error;
    }
    json(200, {
      run_id: run.run_id,
      task: taskId ?? null,
      decision: verb,
      // As `termorch approve|reject` says it: a dead driver's resume takes it.
      detail: run.driver_alive
        ? "its run's driver takes it within a second"
        : `its run's driver is not live: it is taken when the run is resumed (termorch resume ${run.run_dir})`,
    });
  }

  private openStream(
    req: IncomingMessage,
    res: ServerResponse,
  ): { onClose: (fn: () => void) => void; end: () => void } {
    res.writeHead(200, {
      ...SECURITY_HEADERS,
      "Content-Type": "text/event-stream; charset=utf-8",
      Connection: "keep-alive",
      // A proxy in front (nginx) would buffer the stream otherwise.
      "X-Accel-Buffering": "no",
    });
    res.write("retry: 2000\n\n");
    this.streams.add(res);
    const keepalive = setInterval(() => res.write(": keepalive\n\n"), KEEPALIVE_MS).unref();
    const closers: Array<() => void> = [];
    let closed = false;
    const close = (): void => {
      if (closed) return;
      closed = true;
      clearInterval(keepalive);
      this.streams.delete(res);
      for (const fn of closers) fn();
    };
    req.on("close", close);
    res.on("close", close);
    return {
      onClose: (fn) => {
        if (closed) fn();
        else closers.push(fn);
      },
      end: () => {
        res.end();
        close();
      },
    };
  }
}

const CSP = (nonce: string): string =>
  [
    "default-src 'none'",
    "script-src 'self'",
    `style-src 'self' 'nonce-${nonce}'`,
    // The timeline places its bars with style attributes (report.html's fragment). An attribute
    // can only restyle what it sits on; with the sources above it loads nothing from elsewhere.
    "style-src-attr 'unsafe-inline'",
    "connect-src 'self'",
    "img-src 'self' data:",
    "font-src 'self'",
    "base-uri 'none'",
    "form-action 'none'",
    "frame-ancestors 'none'",
  ].join("; ");

const SECURITY_HEADERS = {
  "Cache-Control": "no-store",
  "X-Content-Type-Options": "nosniff",
  "Referrer-Policy": "no-referrer",
  "X-Frame-Options": "DENY",
  "Cross-Origin-Resource-Policy": "same-origin",
};

function send(
  res: ServerResponse,
  status: number,
  type: string,
  body: string | Buffer,
  nonce?: string,
): void {
  res.writeHead(status, {
    ...SECURITY_HEADERS,
    "Content-Security-Policy": CSP(nonce ?? randomBytes(16).toString("base64")),
    "Content-Type": type,
    "Content-Length": Buffer.byteLength(body),
  });
  res.end(body);
}

/** Answers with a JSON body. */
function jsonSender(res: ServerResponse): (status: number, body: object) => void {
  return (status, body) => send(res, status, "application/json; charset=utf-8", JSON.stringify(body));
}

/**
 * The JSON body of a request that changes something (a send, a decision), or undefined once it
 * was refused (the answer sent): JSON only, so that no page of another site can post one as a
 * form; from the dashboard's own origin when the browser names one; at most MAX_SEND_BYTES.
 */
async function readJsonRequest(
  req: IncomingMessage,
  json: (status: number, body: object) => void,
  what: string,
): Promise<unknown> {
  if (!/^application\/json\s*(;|$)/i.test(req.headers["content-type"] ?? "")) {
    json(415, { error: `${what}'s body is JSON (Content-Type: application/json)` });
    return undefined;
  }
  const origin = req.headers.origin;
  if (origin !== undefined && hostOf(origin) !== req.headers.host?.toLowerCase()) {
    json(403, { error: `${what} comes from this dashboard's own page` });
    return undefined;
  }
  const body = await readBody(req, MAX_SEND_BYTES);
  if (body === null) {
    json(413, { error: `${what}'s body is at most ${MAX_SEND_BYTES} bytes` });
    return undefined;
  }
  try {
    return JSON.parse(body);
  } catch {
    json(400, { error: "the body is not JSON" });
    return undefined;
  }
}

function issuesText(error: z.ZodError): string {
  return error.issues.map((i) => `${i.path.join(".") || "body"}: ${i.message}`).join("; ");
}

function sendAsset(res: ServerResponse, asset: Asset): void {
  send(res, 200, asset.type, asset.body);
}

function event(res: ServerResponse, name: string, data: string): void {
  res.write(`event: ${name}\ndata: ${data}\n\n`);
}

/**
 * The request's body as text, or null when it is longer than `max` bytes: the rest is read and
 * dropped, so that the client, still sending, gets the answer that says so.
 */
function readBody(req: IncomingMessage, max: number): Promise<string | null> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on("data", (chunk: Buffer) => {
      size += chunk.length;
      if (size <= max) chunks.push(chunk);
    });
    req.on("end", () => resolve(size > max ? null : Buffer.concat(chunks).toString("utf8")));
    req.on("error", reject);
  });
}

/** `http://127.0.0.1:8080` → `127.0.0.1:8080` (what Host says for the same page); null when not a URL. */
function hostOf(origin: string): string | null {
  try {
    return new URL(origin).host.toLowerCase();
  } catch {
    return null;
  }
}

function decode(part: string): string | null {
  try {
    return decodeURIComponent(part);
  } catch {
    return null;
  }
}

/** The run of that id; of two runs with one id (two workspaces), the one still running, else the newest. */
function findRun(view: StatusView, runId: string): RunView | undefined {
  const runs = view.runs.filter((r) => r.run_id === runId);
  return runs.findLast((r) => r.phase === "running") ?? runs.at(-1);
}

function findTask(view: StatusView, runId: string, taskId: string): { run: RunView; task: TaskView } | null {
  for (const run of view.runs.filter((r) => r.run_id === runId).reverse()) {
    const task = run.tasks.find((t) => t.id === taskId);
    // A running task's session may be newer than the feed's last look at the sessions (it lists
    // them at most once a second): tmux says whether it is there.
    if (task?.session && (task.session_exists || isLive(task.state))) return { run, task };
  }
  return null;
}
