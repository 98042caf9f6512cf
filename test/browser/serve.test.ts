/// <reference lib="dom" />
// Callbacks of page.$eval run in the browser: their elements are DOM elements.
import { execFileSync } from "node:child_process";
import {
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { request } from "node:http";
import { networkInterfaces } from "node:os";
import { join } from "node:path";
import { execa, type ResultPromise } from "execa";
import type { Browser, Page } from "puppeteer-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { MAX_TERMINALS } from "../../src/serve/terminal.js";
import { logText, opsWorld, stateOf, waitForStatus } from "../fixtures/ops-helpers.js";
import { BIN, ROOT, readReport, uniqueSocket, waitFor, writeAssignments } from "../integration/harness.js";
import { has } from "../needs.js";
import { collectPageErrors, keepForDocs, launchChromium, screenshot } from "./chromium.js";

const world = opsWorld(uniqueSocket("serve"));
let browser: Browser | null = null;
const servers: ResultPromise[] = [];

const withChromium = has("chromium", "test/browser/serve.test.ts");
beforeAll(async () => {
  if (withChromium) browser = await launchChromium();
});
afterAll(async () => {
  for (const s of servers) if (s.exitCode === null) s.kill("SIGKILL");
  await browser?.close();
  world.teardown();
});

/** `termorch serve` of this file's registry, and the URL it printed. */
async function startServe(args: string[] = []): Promise<{ proc: ResultPromise; url: URL }> {
  const proc = execa(process.execPath, [BIN, "serve", ...args], {
    reject: false,
    cwd: ROOT,
    // As if started from inside the operator's own tmux: its terminals' clients must not inherit TMUX
    // (tmux refuses to attach from "inside" a session).
    env: { ...world.env, TMUX: "/tmp/tmux-0/default,1,0", TMUX_PANE: "%0" },
    stdin: "ignore",
  });
  servers.push(proc);
  let out = "";
  proc.stdout?.on("data", (d: Buffer) => {
    out += d.toString();
  });
  const line = await waitFor(() => /^http:\/\/\S+\n/.exec(out)?.[0], 30_000, "the URL on serve's stdout");
  return { proc, url: new URL(line.trim()) };
}

/** A plain GET (node:http: it sends the Host header given, which fetch() does not let a test set). */
function get(
  url: string,
  headers: Record<string, string> = {},
): Promise<{ status: number; body: string; headers: Record<string, unknown> }> {
  return new Promise((resolve, reject) => {
    const req = request(url, { headers }, (res) => {
      let body = "";
      res.setEncoding("utf8");
      // An event stream that was let through would never end: its first bytes are enough.
      res.on("data", (d: string) => {
        body += d;
        if (res.headers["content-type"]?.startsWith("text/event-stream")) res.destroy();
      });
      res.on("close", () => resolve({ status: res.statusCode ?? 0, body, headers: res.headers }));
    });
    req.on("error", reject);
    req.end();
  });
}

/** An event stream kept open until `close`: its status once the response began. */
function openStream(url: string): Promise<{ status: number; close: () => void }> {
  return new Promise((resolve, reject) => {
    const req = request(url, (res) => resolve({ status: res.statusCode ?? 0, close: () => req.destroy() }));
    req.on("error", reject);
    req.end();
  });
}

/** The text of the xterm screen on the page. */
const screenText = (page: Page): Promise<string> =>
  page
    .$$eval(".xterm-rows > div", (rows) => rows.map((row) => row.textContent ?? ""))
    .then((rows) => rows.join("\n").replaceAll("\u00a0", " "))
    .catch(() => "");

async function waitForScreen(page: Page, needle: string, timeoutMs = 30_000): Promise<string> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const text = await screenText(page);
    if (text.includes(needle)) return text;
    if (Date.now() > deadline)
      throw new Error(`timed out waiting for ${JSON.stringify(needle)} in the terminal; it shows:\n${text}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** The flags of each client of a tmux server (tmux's own `#{client_flags}`). */
function clientFlags(socket: string): string[] {
  try {
    return execFileSync("tmux", ["-L", socket, "list-clients", "-F", "#{client_flags}"], {
      encoding: "utf8",
      env: { ...process.env, TMUX: "" },
    })
      .split("\n")
      .filter(Boolean);
  } catch {
    return [];
  }
}

/** The local addresses of the sockets a process listens on (TCP over IPv4 and IPv6). */
function listeningAddresses(pid: number): string[] {
  const inodes = new Set<string>();
  for (const fd of readdirSync(`/proc/${pid}/fd`)) {
    try {
      const m = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`));
      if (m?.[1]) inodes.add(m[1]);
    } catch {}
  }
  const found: string[] = [];
  for (const [file, v6] of [
    ["/proc/net/tcp", false],
    ["/proc/net/tcp6", true],
  ] as const) {
    let text = "";
    try {
      text = readFileSync(file, "utf8");
    } catch {
      continue;
    }
    for (const line of text.trim().split("\n").slice(1)) {
      const cols = line.trim().split(/\s+/);
      const [local, , state, inode] = [cols[1], cols[2], cols[3], cols[9]];
      // 0A: LISTEN.
      if (state !== "0A" || !local || !inode || !inodes.has(inode)) continue;
      found.push(v6 ? `[${hex6(local.split(":")[0] ?? "")}]` : hex4(local.split(":")[0] ?? ""));
    }
  }
  return found;
}

/** /proc/net/tcp's little-endian hex IPv4 address. */
const hex4 = (h: string): string =>
  [3, 2, 1, 0].map((i) => Number.parseInt(h.slice(i * 2, i * 2 + 2), 16)).join(".");
/** /proc/net/tcp6's address: four little-endian 32-bit words. */
const hex6 = (h: string): string =>
  Array.from(
    { length: 4 },
    (_, w) =>
      h
        .slice(w * 8, w * 8 + 8)
        .match(/../g)
        ?.reverse()
        .join("") ?? "",
  )
    .join("")
    .replace(/(.{4})(?!$)/g, "$1:");

(withChromium ? describe : describe.skip)("termorch serve", () => {
  it("shows a running task's live terminal, its state changing, and refuses requests without the token", async () => {
    const { dir } = world.workspace();
    const gates = join(dir, "gates");
    mkdirSync(gates);
    const config = join(dir, "config.json");
    // A pane the size of a laptop's terminal, so that the screenshot reads well.
    writeFileSync(config, JSON.stringify({ defaults: { session_size: "110x18" } }));
    const file = writeAssignments(dir, [
      { id: "compile", env: { SAY: "compiled 42 modules" } },
      {
        id: "talker",
        // The agent prints a line, waits for the test's go, prints another, waits to be let finish.
        command: [
          "bash",
          "-c",
          [
            'echo "agent: hello from the first line"',
            'echo "agent: reading ctx/task.md"',
            'echo "  [1/3] scanning the repository ... ok"',
            'echo "  [2/3] editing src/parser.ts ... ok"',
            'echo "agent: working on it..."',
            'while [ ! -e "$GATES/more" ]; do sleep 0.05; done',
            'echo "  [3/3] running the tests ... 12 passed"; echo "agent: second line, written after the page loaded"',
            'while [ ! -e "$GATES/finish" ]; do sleep 0.05; done',
            'echo "agent: done"',
          ].join("; "),
        ],
        env: { GATES: gates },
      },
      { id: "docs", dependencies: ["talker"], env: { SAY: "docs rebuilt" } },
    ]);
    const run = world.start(["run", file, "--config", config]);
    await waitForStatus(dir, "talker", "running");
    await waitFor(() => logText(dir, "talker").includes("working on it"), 30_000, "the agent's first lines");
    await waitForStatus(dir, "compile", "success");

    const serve = await startServe();
    const { url } = serve;
    const token = url.searchParams.get("token") ?? "";
    expect(url.hostname).toBe("127.0.0.1");
    expect(token).toMatch(/^[A-Za-z0-9_-]{22,}$/);

    // Every request without the right token gets 403 and none of the data: page, event stream, asset.
    const base = `http://127.0.0.1:${url.port}`;
    const runId = JSON.parse(readFileSync(file, "utf8")).run_id as string;
    // The near miss differs in its last character whatever that is (a token may end in "x").
    const nearMiss = `${token.slice(0, -1)}${token.endsWith("x") ? "y" : "x"}`;
    for (const path of ["/", "/events", "/assets/xterm.js", "/assets/app.js", "/api/view"]) {
      for (const query of ["", "?token=", `?token=${nearMiss}`, `?token=${token}x`]) {
        const res = await get(`${base}${path}${query}`);
        expect(res.status, `${path}${query}`).toBe(403);
        expect(res.body).not.toContain(runId);
        expect(res.body).not.toContain("Terminal");
      }
      const wrongBearer = await get(`${base}${path}`, { Authorization: "Bearer nope" });
      expect(wrongBearer.status).toBe(403);
      const bearer = await get(`${base}${path}`, { Authorization: `Bearer ${token}` });
      expect(bearer.status, `${path} with the token as a bearer`).toBe(200);
      // DNS rebinding: another site's name in Host, even with the token.
      const rebound = await get(`${base}${path}?token=${token}`, { Host: `evil.example:${url.port}` });
      expect(rebound.status).toBe(403);
    }
    const page0 = await get(url.href);
    expect(page0.status).toBe(200);
    expect(page0.headers["cache-control"]).toBe("no-store");
    expect(page0.headers["x-content-type-options"]).toBe("nosniff");
    expect(String(page0.headers["content-security-policy"])).toMatch(/default-src 'none'.*script-src 'self'/);

    // The server binds loopback only.
    const pid = serve.proc.pid as number;
    const listening = listeningAddresses(pid);
    expect(listening.length).toBeGreaterThan(0);
    for (const a of listening) expect(a).toBe("127.0.0.1");
    const outside = Object.values(networkInterfaces())
      .flat()
      .find((i) => i && i.family === "IPv4" && !i.internal);
    if (outside) await expect(get(`http://${outside.address}:${url.port}/?token=${token}`)).rejects.toThrow();

    // Terminals: only a session the view shows for that run's task; a bounded number at once.
    const terminalUrl = (run: string, task: string): string =>
      `${base}/runs/${run}/tasks/${task}/terminal?token=${token}`;
    for (const [r, t] of [
      [runId, "docs"], // pending: no session
      [runId, "nope"],
      ["nope", "talker"],
      [runId, "%ZZ"],
      [runId, encodeURIComponent("talker;kill-server")],
      [runId, encodeURIComponent("=talker")],
    ] as const)
      expect((await get(terminalUrl(r, t))).status, `${r}/${t}`).toBe(404);
    const streams = await Promise.all(
      Array.from({ length: MAX_TERMINALS }, () => openStream(terminalUrl(runId, "talker"))),
    );
    expect(streams.map((s) => s.status)).toEqual(Array(MAX_TERMINALS).fill(200));
    await waitFor(
      () => clientFlags(world.socket).length === MAX_TERMINALS,
      10_000,
      "a tmux client per stream",
    );
    expect((await get(terminalUrl(runId, "talker"))).status).toBe(429);
    for (const s of streams) s.close();
    await waitFor(() => clientFlags(world.socket).length === 0, 10_000, "the streams' tmux clients to end");

    const page = await browser!.newPage();
    await page.setViewport({ width: 1280, height: 900 });
    const errors = collectPageErrors(page);
    const methods = new Set<string>();
    page.on("request", (r) => methods.add(r.method()));
    await page.goto(url.href);
    await page.waitForSelector('article[data-run] tr[data-task="talker"][data-state="running"]', {
      timeout: 30_000,
    });
    await page.waitForSelector('tr[data-task="compile"][data-state="success"]', { timeout: 30_000 });
    expect(await page.$eval('tr[data-task="talker"] .last-line', (el) => el.textContent)).toContain(
      "working on it",
    );
    // The run's timeline, as report.html draws it: a bar per attempt, the running one still open.
    await page.waitForSelector('.tl-host .bar[data-task="compile"][data-outcome="success"]', {
      timeout: 30_000,
    });
    await page.waitForSelector('.tl-host .bar[data-task="talker"][data-outcome="running"]', {
      timeout: 30_000,
    });

    // Its live terminal: what the pane shows, then what the agent writes after the page loaded.
    await clickInPage(page, 'tr[data-task="talker"] button.watch');
    await waitForScreen(page, "hello from the first line");
    await waitForScreen(page, "working on it");
    writeFileSync(join(gates, "more"), "");
    await waitForScreen(page, "second line, written after the page loaded");
    expect(await page.$eval("#term-state", (el) => el.textContent)).toBe("live");
    await page.waitForSelector('tr[data-task="talker"] .last-line', { timeout: 5_000 });
    keepForDocs(await screenshot(page, "serve"), "serve");

    // The terminal is a tmux client that can neither type nor resize the agent's pane.
    const flags = clientFlags(world.socket);
    expect(flags).toHaveLength(1);
    expect(flags[0]).toContain("read-only");
    expect(flags[0]).toContain("ignore-size");
    // The browser closes it: its pty (the tmux client) ends; opened again, it shows the pane again.
    await page.click("#term-close");
    await waitFor(() => clientFlags(world.socket).length === 0, 10_000, "the tmux client to end");
    await clickInPage(page, 'tr[data-task="talker"] button.watch');
    await waitForScreen(page, "second line, written after the page loaded");
    expect(clientFlags(world.socket)).toHaveLength(1);

    // The task finishes: the page shows it, the run goes on and ends; the terminal's session ends with it.
    writeFileSync(join(gates, "finish"), "");
    await page.waitForSelector('tr[data-task="talker"][data-state="success"]', { timeout: 30_000 });
    await page.waitForSelector('article[data-phase="reported"] tr[data-task="docs"][data-state="success"]', {
      timeout: 60_000,
    });
    expect((await run).exitCode).toBe(0);
    // The timeline follows: every bar ended, wave 1's (in the order they started) before wave 2's.
    await page.waitForSelector('.tl-host .bar[data-task="docs"][data-outcome="success"]', {
      timeout: 30_000,
    });
    const bars = await page.$$eval(".tl-host .bar[data-task]", (els) =>
      els.map((b) => `${b.getAttribute("data-task")}:${b.getAttribute("data-outcome")}`),
    );
    expect(bars.slice(0, 2).sort()).toEqual(["compile:success", "talker:success"]);
    expect(bars.slice(2)).toEqual(["docs:success"]);
    await page
      .waitForFunction('document.querySelector("#term-state")?.textContent === "session ended"', {
        timeout: 30_000,
      })
      .catch(() => undefined);
    expect(await page.$eval("#term-state", (el) => el.textContent)).toBe("session ended");

    // The one request cut short is the terminal stream the close button ended (EventSource.close aborts it).
    const closed = errors.filter((e) => /^requestfailed: \S+\/terminal\?token=\S+ net::ERR_ABORTED$/.test(e));
    expect(closed).toHaveLength(1);
    expect(errors.filter((e) => !closed.includes(e))).toEqual([]);
    // The page only ever reads: no keystroke or anything else is sent back.
    expect([...methods]).toEqual(["GET"]);

    // Ctrl-C stops it, the page still connected: streams end, exit 130.
    serve.proc.kill("SIGINT");
    const ended = await serve.proc;
    expect(ended.exitCode).toBe(130);
    await page.close();
  }, 180_000);

  it("ends on SIGTERM with exit 0 (SIGHUP: 130), binds another address only when asked, refuses a bad one", async () => {
    const serve = await startServe();
    serve.proc.kill("SIGTERM");
    expect((await serve.proc).exitCode).toBe(0);
    // The terminal it ran in closed: as Ctrl-C.
    const hungUp = await startServe();
    hungUp.proc.kill("SIGHUP");
    expect((await hungUp.proc).exitCode).toBe(130);
    // Another address only when asked, with a warning.
    const other = await startServe(["--host", "127.0.0.2"]);
    expect(other.url.hostname).toBe("127.0.0.2");
    expect(listeningAddresses(other.proc.pid as number)).toEqual(["127.0.0.2"]);
    const token = other.url.searchParams.get("token");
    expect((await get(other.url.href)).status).toBe(200);
    // Through an SSH tunnel the browser names the tunnel's end: any loopback address, never a DNS name.
    expect((await get(other.url.href, { Host: "127.0.0.1:8080" })).status).toBe(200);
    const named = await get(other.url.href, { Host: `rebound.example:${other.url.port}` });
    expect(named.status).toBe(403);
    expect(named.body).toContain("Host");
    other.proc.kill("SIGTERM");
    const otherEnd = await other.proc;
    expect(otherEnd.exitCode).toBe(0);
    expect(String(otherEnd.stderr)).toContain("warning: serving on 127.0.0.2, not 127.0.0.1");
    expect(token).not.toBe(serve.url.searchParams.get("token"));
    const taken = await execa(process.execPath, [BIN, "serve", "--host", "not-an-address"], {
      reject: false,
      env: world.env,
    });
    expect(taken.exitCode).toBe(2);
    expect(String(taken.stderr)).toMatch(/--host.*IP address/);
  }, 60_000);

  it("answers a task waiting for input: its question's keys as buttons, then a line of text; a send without the token, from another site, not JSON or for no such task is refused", async () => {
    const { dir } = world.workspace();
    const out = join(dir, "out");
    const bin = join(dir, "bin");
    mkdirSync(out);
    mkdirSync(bin);
    // The codex preset's CLI is the menu stub, which opens on codex's model offer.
    symlinkSync(join(ROOT, "test", "fixtures", "agents", "menu-stub"), join(bin, "codex"));
    const file = writeAssignments(dir, [
      {
        id: "ask",
        agent: "codex",
        command: undefined,
        interactive: true,
        waiting_after_s: 1,
        expect_changes: false,
        env: { STUB_OUT: out, STUB_MENU: "codex" },
      },
    ] as never);
    const run = execa(process.execPath, [BIN, "run", file], {
      reject: false,
      cwd: ROOT,
      env: { ...world.env, PATH: `${bin}:${process.env.PATH}` },
      stdin: "ignore",
    });
    const runId = JSON.parse(readFileSync(file, "utf8")).run_id as string;
    const status = join(dir, "status", "ask.running");
    await waitFor(
      () => existsSync(status) && /new model/.test(readFileSync(status, "utf8")),
      30_000,
      "the model offer reported",
    );

    const serve = await startServe();
    const token = serve.url.searchParams.get("token") ?? "";
    const base = `http://127.0.0.1:${serve.url.port}`;
    const sendUrl = (task = "ask", query = `?token=${token}`) =>
      `${base}/runs/${runId}/tasks/${task}/send${query}`;
    const keys2 = JSON.stringify({ keys: ["2"] });
    expect((await post(sendUrl("ask", ""), keys2)).status).toBe(403);
    expect((await post(sendUrl("ask", "?token=nope"), keys2)).status).toBe(403);
    expect((await post(sendUrl(), keys2, { "Content-Type": "text/plain" })).status).toBe(415);
    expect(
      (await post(sendUrl(), keys2, { "Content-Type": "application/json", Origin: "http://evil.example" }))
        .status,
    ).toBe(403);
    const badKey = await post(sendUrl(), JSON.stringify({ keys: ["C-c"] }));
    expect(badKey.status).toBe(400);
    expect(JSON.parse(badKey.body).error).toContain('"C-c" is not a key termorch sends');
    const both = await post(sendUrl(), JSON.stringify({ text: "2", keys: ["2"] }));
    expect(both.status).toBe(400);
    expect(JSON.parse(both.body).error).toContain("text and keys were given");
    expect((await post(sendUrl("nope"), keys2)).status).toBe(404);
    expect((await post(sendUrl(), "x".repeat(70_000))).status).toBe(413);
    expect((await get(sendUrl())).status).toBe(405);
    // None of those typed anything.
    expect(existsSync(join(out, "picks.log"))).toBe(false);

    const page = await browser!.newPage();
    await page.setViewport({ width: 1280, height: 900 });
    const errors = collectPageErrors(page);
    await page.goto(serve.url.href);
    await clickInPage(page, 'tr[data-task="ask"] button.watch');
    await waitForScreen(page, "Use existing model");
    await page.waitForSelector('#answer:not([hidden]) button.answer-key[data-keys="2"]', { timeout: 30_000 });
    expect(await page.$eval("#answer-asks", (el) => el.textContent)).toMatch(/codex offers a new model/);
    expect(await page.$$eval("button.answer-key", (els) => els.map((b) => b.textContent))).toEqual([
      expect.stringMatching(/^2 2\. Use existing model/),
      expect.stringMatching(/^1 1\. Try new model/),
    ]);
    await clickInPage(page, 'button.answer-key[data-keys="2"]');
    await waitFor(() => existsSync(join(out, "picks.log")), 20_000, "the stub's pick");
    expect(JSON.parse(readFileSync(join(out, "picks.log"), "utf8"))).toEqual({
      picked: "Use existing model",
      keys: ["2"],
    });
    // Past the question: the prompt goes in, and the agent waits for its next message.
    await waitFor(() => existsSync(join(out, "prompt.txt")), 20_000, "the prompt pasted");
    await page.waitForFunction(
      'document.querySelector("#answer-asks")?.textContent?.includes("has not changed") && !document.querySelector("button.answer-key")',
      { timeout: 30_000 },
    );
    await page.type("#answer-text", "make it blue");
    await page.click("#answer-form button[type=submit]");
    await waitFor(() => existsSync(join(out, "messages.log")), 20_000, "the message typed");
    expect(readFileSync(join(out, "messages.log"), "utf8")).toBe('"make it blue"\n');
    // The page says so once the send's answer is back, which may be after the stub read the message.
    await page.waitForFunction('document.querySelector("#answer-result")?.textContent === "sent"', {
      timeout: 20_000,
    });

    expect((await world.cli(["finish", "ask", "--run", runId])).exitCode).toBe(0);
    expect((await run).exitCode).toBe(0);
    expect(errors.filter((e) => !/\/terminal\?token=/.test(e))).toEqual([]);
    await page.close();
    serve.proc.kill("SIGTERM");
    await serve.proc;
  }, 120_000);

  it("shows a redo under way: the task's redo state, then its conflicted attempt and its redo on the timeline", async () => {
    const { dir, repo } = world.workspace();
    writeFileSync(join(repo, "f.txt"), "line1\nline2\nline3\n");
    execFileSync("git", ["-C", repo, "add", "-A"]);
    execFileSync("git", ["-C", repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "f"]);
    const release = join(dir, "release");
    const resolve = join(ROOT, "test", "fixtures", "agents", "resolve.mjs");
    const edit = (text: string) => JSON.stringify([{ set: "f.txt", line: 2, text }]);
    const file = writeAssignments(
      dir,
      [
        { id: "A", agent: "resolve", command: ["node", resolve], env: { EDITS: edit("A") } },
        { id: "B", agent: "resolve", command: ["node", resolve], env: { EDITS: edit("B"), HOLD: release } },
      ] as never,
      { mode: { merge: { on_conflict: "redo" } } },
    );
    const run = world.start(["run", file]);
    const serve = await startServe();
    const page = await browser!.newPage();
    const errors = collectPageErrors(page);
    await page.goto(serve.url.href);
    // One state, `redo`, as status and watch show it: the row's, its label, and the summary's count.
    await page.waitForSelector('tr[data-task="B"][data-state="redo"] .state-redo[data-redo="1"]', {
      timeout: 30_000,
    });
    expect(await page.$eval('tr[data-task="B"] .state', (el) => el.textContent)).toBe("redo 1/1");
    expect(await page.$eval("#summary", (el) => el.textContent)).toMatch(/0 tasks running · 1 redo/);
    writeFileSync(release, "");
    await page.waitForSelector('article[data-phase="reported"] tr[data-task="B"][data-state="success"]', {
      timeout: 30_000,
    });
    await page.waitForSelector('.tl-host .bar[data-task="B"][data-outcome="conflicted"]', {
      timeout: 30_000,
    });
    await page.waitForSelector('.tl-host .bar[data-task="B"][data-redo="1"][data-outcome="success"]', {
      timeout: 30_000,
    });
    expect((await run).exitCode).toBe(0);
    expect(errors).toEqual([]);
    await page.close();
    serve.proc.kill("SIGTERM");
    await serve.proc;
  }, 90_000);

  it("approves and rejects what waits for a person: a rejection's reason is the next attempt's feedback, an approval ends the task done; a decision without the token, from another site, not JSON or on nothing waiting is refused and writes nothing", async () => {
    const { dir } = world.workspace();
    const file = writeAssignments(dir, [
      { id: "work", approval: "result", retries: 1, env: { SAY: "did the work" } },
    ] as never);
    const runId = JSON.parse(readFileSync(file, "utf8")).run_id as string;
    const run = world.start(["run", file]);
    const waitsOn = (attempt: number) =>
      waitFor(
        () => stateOf(dir)?.tasks.find((t) => t.id === "work")?.waiting.approval?.attempt === attempt,
        30_000,
        `work waiting for approval of attempt ${attempt}`,
      );
    await waitsOn(1);

    const serve = await startServe();
    const token = serve.url.searchParams.get("token") ?? "";
    const base = `http://127.0.0.1:${serve.url.port}`;
    const decideUrl = (verb: string, what = "tasks/work", query = `?token=${token}`) =>
      `${base}/runs/${runId}/${what}/${verb}${query}`;
    const because = JSON.stringify({ reason: "not like this" });
    const json = { "Content-Type": "application/json" };
    // Refused as a send is: no token, a wrong one, another site's name in Host or Origin, not JSON.
    for (const verb of ["approve", "reject"]) {
      expect((await post(decideUrl(verb, "tasks/work", ""), because)).status).toBe(403);
      expect((await post(decideUrl(verb, "tasks/work", "?token=nope"), because)).status).toBe(403);
      expect(
        (await post(decideUrl(verb), because, { ...json, Host: `evil.example:${serve.url.port}` })).status,
      ).toBe(403);
      const crossSite = await post(decideUrl(verb), because, { ...json, Origin: "http://evil.example" });
      expect(crossSite.status).toBe(403);
      expect(JSON.parse(crossSite.body).error).toContain("this dashboard's own page");
      expect((await post(decideUrl(verb), because, { "Content-Type": "text/plain" })).status).toBe(415);
      expect((await post(decideUrl(verb), "{", json)).status).toBe(400);
      expect((await post(decideUrl(verb), JSON.stringify({ reason: 7 }))).status).toBe(400);
      expect((await post(decideUrl(verb, "tasks/nope"), because)).status).toBe(404);
      expect((await post(`${base}/runs/nope/tasks/work/${verb}?token=${token}`, because)).status).toBe(404);
      expect((await get(decideUrl(verb))).status).toBe(405);
      // The merge does not wait: decide's InputError, as a send's (400, its message and hint).
      const merge = await post(decideUrl(verb, "merge"), because);
      expect(merge.status).toBe(400);
      expect(JSON.parse(merge.body)).toMatchObject({
        error: expect.stringContaining(
          `the merge of run ${runId} is not waiting for approval; waiting: work`,
        ),
        hint: expect.any(String),
      });
    }
    const noReason = await post(decideUrl("reject"), JSON.stringify({ reason: "  " }));
    expect(noReason.status).toBe(400);
    expect(JSON.parse(noReason.body).error).toContain("a rejection needs its reason");
    // None of those decided anything: no decision file, the task still waits on its first attempt.
    const approvals = join(dir, ".termorch", runId, "approvals");
    expect(existsSync(approvals) ? readdirSync(approvals) : []).toEqual([]);
    expect(stateOf(dir)?.tasks[0]?.waiting.approval).toMatchObject({ at: "result", attempt: 1 });

    const page = await browser!.newPage();
    await page.setViewport({ width: 1280, height: 700 });
    const errors = collectPageErrors(page);
    await page.goto(serve.url.href);
    const item = (attempt: number) =>
      `.approval[data-task="work"][data-at="result"][data-attempt="${attempt}"]`;
    await page.waitForSelector(`${item(1)} button.reject`, { timeout: 30_000 });
    expect(await page.$eval(`${item(1)} .approval-line`, (el) => el.textContent)).toMatch(
      /^waiting for a person to approve attempt 1's result \(since /,
    );
    expect(await page.$eval('tr[data-task="work"] .approval-wait', (el) => el.textContent)).toBe(
      "waiting for approval",
    );
    // Reject asks for its reason before it posts anything.
    await clickInPage(page, `${item(1)} button.reject`);
    await page.waitForSelector('.approval-result[data-outcome="bad"]', { timeout: 5_000 });
    expect(await page.$eval(".approval-result", (el) => el.textContent)).toContain("needs its reason");
    const reason = "Use the v2 endpoint, not v1.";
    await page.type(`${item(1)} input.approval-reason`, reason);
    await clickInPage(page, `${item(1)} button.reject`);
    await page.waitForSelector('.approval-result[data-outcome="ok"][data-decision="reject"]', {
      timeout: 10_000,
    });
    expect(await page.$eval(".approval-result", (el) => el.textContent)).toBe(
      `rejected task work (attempt 1's result): ${reason} · its run's driver takes it within a second`,
    );
    // The reason is what the next attempt is told; its result waits for a decision in turn.
    const feedback = join(dir, "artifacts", "work", "attempt-2", "feedback.md");
    await waitFor(
      () => existsSync(feedback) && readFileSync(feedback, "utf8").includes(reason),
      30_000,
      "the reason in attempt 2's feedback",
    );
    await page.waitForSelector(`${item(2)} button.approve`, { timeout: 30_000 });
    expect(await page.$$(item(1))).toHaveLength(0);
    await screenshot(page, "serve-approval");
    await clickInPage(page, `${item(2)} button.approve`);
    await page.waitForSelector('.approval-result[data-outcome="ok"][data-decision="approve"]', {
      timeout: 10_000,
    });
    await page.waitForSelector('article[data-phase="reported"] tr[data-task="work"][data-state="success"]', {
      timeout: 30_000,
    });
    expect(await page.$$(".approval[data-task]")).toHaveLength(0);
    expect((await run).exitCode).toBe(0);
    expect(readReport(dir).tasks[0]).toMatchObject({ status: "success", attempts: 2 });
    const decided = readFileSync(join(dir, "events.jsonl"), "utf8")
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l))
      .filter((e) => e.type === "task.approval_decided");
    expect(
      decided.map((e) => [e.task_id, e.data.decision, e.data.by, e.data.attempt, e.data.reason]),
    ).toEqual([
      ["work", "reject", "serve", 1, reason],
      ["work", "approve", "serve", 2, null],
    ]);
    // The run is over: a late decision is refused with the reason.
    const late = await post(decideUrl("approve"), "{}");
    expect(late.status).toBe(400);
    expect(JSON.parse(late.body).error).toContain("is finished");
    expect(errors).toEqual([]);
    await page.close();
    serve.proc.kill("SIGTERM");
    await serve.proc;
  }, 120_000);

  it("approves the run's merge (merge.approval) from the page", async () => {
    const { dir, repo } = world.workspace();
    const file = writeAssignments(dir, [{ id: "a", env: { WRITE: "a.txt=from a" } }], {
      mode: { merge: { approval: true } },
    });
    const run = world.start(["run", file]);
    await waitFor(() => stateOf(dir)?.merge?.step === "waiting_approval", 30_000, "the merge waiting");
    const serve = await startServe();
    const page = await browser!.newPage();
    const errors = collectPageErrors(page);
    await page.goto(serve.url.href);
    const item = '.approval[data-merge][data-at="merge"][data-attempt="0"]';
    await page.waitForSelector(`${item} button.approve`, { timeout: 30_000 });
    expect(await page.$eval(`${item} .approval-line`, (el) => el.textContent)).toMatch(
      /^waiting for a person to approve the merge \(since /,
    );
    await page.type(`${item} input.approval-reason`, "looks good");
    await clickInPage(page, `${item} button.approve`);
    await page.waitForSelector('.approval-result[data-outcome="ok"][data-decision="approve"]', {
      timeout: 10_000,
    });
    expect(await page.$eval(".approval-result", (el) => el.textContent)).toBe(
      "approved the merge: looks good · its run's driver takes it within a second",
    );
    expect((await run).exitCode).toBe(0);
    expect(readReport(dir).merge).toMatchObject({ result: "success" });
    expect(readFileSync(join(repo, "a.txt"), "utf8")).toBe("from a\n");
    const decided = readFileSync(join(dir, "events.jsonl"), "utf8")
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l))
      .filter((e) => e.type === "run.approval_decided");
    expect(decided.map((e) => [e.data.decision, e.data.by, e.data.reason])).toEqual([
      ["approve", "serve", "looks good"],
    ]);
    expect(errors).toEqual([]);
    await page.close();
    serve.proc.kill("SIGTERM");
    await serve.proc;
  }, 90_000);
});

/** A POST (node:http: it sends the Host and Origin headers given). */
function post(
  url: string,
  body: string,
  headers: Record<string, string> = { "Content-Type": "application/json" },
): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(url, { method: "POST", headers }, (res) => {
      let text = "";
      res.setEncoding("utf8");
      res.on("data", (d: string) => {
        text += d;
      });
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body: text }));
    });
    req.on("error", reject);
    req.end(body);
  });
}

/**
 * Clicks an element the page redraws from its live feed: found and clicked in one turn of the
 * page's own script, so a redraw cannot detach it between the two (as `page.click` can under load).
 */
async function clickInPage(page: Page, selector: string): Promise<void> {
  await page.waitForFunction(
    (sel: string) => {
      const el = document.querySelector<HTMLElement>(sel);
      el?.click();
      return el !== null;
    },
    { timeout: 30_000 },
    selector,
  );
}
