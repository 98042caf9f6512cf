import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { execa } from "execa";
import { afterAll, describe, expect, it } from "vitest";
import { PtyScreen } from "../fixtures/pty-screen.js";
import { has } from "../needs.js";
import { BIN, cliEnv, ROOT, readReport, termorch, testFile, waitFor, writeAssignments } from "./harness.js";

const { socket, workspace } = testFile("watch");
const ESC = "\x1b";
const screens: PtyScreen[] = [];
const runs: ReturnType<typeof execa>[] = [];
afterAll(() => {
  for (const s of screens) s.kill();
  for (const r of runs) if (r.exitCode === null) r.kill("SIGKILL");
});

/** The environment of a termorch the operator starts: this file's registry and socket, outside tmux, not in CI. */
function operatorEnv(extra: Record<string, string> = {}): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env))
    if (v !== undefined && !["TMUX", "NO_COLOR", "PAGER", "LESS", "CI", "FORCE_COLOR"].includes(k))
      env[k] = v;
  return { ...env, ...cliEnv(socket), TERM: "xterm-256color", LANG: "C.UTF-8", ...extra };
}

/** `termorch watch ARGS` on an 80x24 pseudo-terminal. */
function watchScreen(args: string[], extra: Record<string, string> = {}, size = { cols: 80, rows: 24 }) {
  const screen = new PtyScreen(process.execPath, [BIN, "watch", ...args], {
    ...size,
    cwd: ROOT,
    env: operatorEnv(extra),
  });
  screens.push(screen);
  return screen;
}

/**
 * A run whose tasks wait for gate files the test creates: `a` and `b` (wave 1, each prints a line
 * first), and `c` after `a` (wave 2).
 */
function gatedRun() {
  const { dir } = workspace();
  const gate = (id: string) => join(dir, `gate-${id}`);
  const file = writeAssignments(dir, [
    { id: "a", env: { SAY: "alpha-says-hello", WAIT_FILE: gate("a") } },
    { id: "b", env: { SAY: "bravo-is-busy", WAIT_FILE: gate("b") } },
    { id: "c", dependencies: ["a"], env: { SAY: "charlie-done" } },
  ]);
  const runId = JSON.parse(readFileSync(file, "utf8")).run_id as string;
  const run = execa(process.execPath, [BIN, "run", file], {
    reject: false,
    cwd: ROOT,
    env: cliEnv(socket),
    stdin: "ignore",
  });
  runs.push(run);
  const open = (id: string) => writeFileSync(gate(id), "");
  return { dir, runId, run, open };
}

const running = (dir: string, id: string) => existsSync(join(dir, "status", `${id}.running`));
/** A task's row on the dashboard: its id, then its state. */
const row = (id: string, state: string) => new RegExp(`^[> ] ${id}\\s+${state}\\b`, "m");

const tmux = (...args: string[]) =>
  execa("tmux", ["-L", socket, ...args], { env: { TMUX: "" }, reject: false }).then((r) => String(r.stdout));

describe("termorch watch on a terminal", () => {
  it("shows a run's tasks go from running to success; enter attaches and a detach comes back; l pages the log; q restores the terminal", async () => {
    const { dir, runId, run, open } = gatedRun();
    await waitFor(() => running(dir, "a") && running(dir, "b"), 30_000, "a and b running");
    const screen = watchScreen([dir]);
    await screen.until((s) => row("a", "running").test(s) && row("b", "running").test(s), "a and b running");
    expect(screen.screenKind()).toBe("alternate");
    expect(screen.text()).toMatch(row("c", "pending"));
    expect(screen.text()).toContain(`run ${runId}  running`);
    // Header and key help stay on screen; the frame fits 80 columns.
    expect(screen.lines()[0]).toContain("termorch watch");
    expect(screen.text()).toContain("enter attach");
    expect(screen.lines().every((l) => l.length <= 80)).toBe(true);

    // Keys typed together are a paste to tmux, which never triggers key bindings: turned off on
    // this file's own server so that C-b d detaches (a person types slower than a test).
    await tmux("set-option", "-g", "assume-paste-time", "0");
    // The first running task is selected: enter puts the terminal on its session.
    expect(screen.text()).toMatch(/^> a\s+running/m);
    screen.write("\r");
    await screen.until(
      (s) => !s.includes("LAST LOG LINE") && s.includes("alpha-says-hello"),
      "the agent's pane on the terminal",
    );
    await waitFor(
      async () => (await tmux("list-clients", "-F", "#{client_session}")).includes(`termorch-${runId}-a`),
      20_000,
      "a tmux client on a's session",
      50,
    );
    screen.write("\x02d");
    await screen.until(
      (s) => s.includes("LAST LOG LINE") && s.includes("detached from a"),
      "the dashboard back",
    );
    expect(screen.screenKind()).toBe("alternate");
    expect(await tmux("list-clients", "-F", "#{client_session}")).not.toContain(`termorch-${runId}-a`);

    // l: the selected task's log in the pager; q in the pager comes back.
    screen.write("j");
    await screen.until((s) => /^> b\s+running/m.test(s), "b selected");
    screen.write("l");
    await screen.until((s) => !s.includes("LAST LOG LINE") && s.includes("bravo-is-busy"), "b's log in less");
    screen.write("q");
    await screen.until((s) => s.includes("LAST LOG LINE"), "the dashboard after the pager");

    // The run goes on: each task turns success on screen, then the run is reported.
    open("a");
    await screen.until((s) => row("a", "success").test(s), "a success");
    await screen.until((s) => row("c", "(running|success)").test(s), "c started");
    open("b");
    await screen.until(
      (s) => row("b", "success").test(s) && row("c", "success").test(s) && s.includes("reported, exit 0"),
      "every task success and the run reported",
    );
    expect((await run).exitCode).toBe(0);

    // A smaller terminal: the frame follows, the list scrolls to keep the selection in sight.
    screen.resize(60, 8);
    await screen.until((s) => s.split("\n")[6]!.includes("enter attach") && /↓\d/.test(s), "the 60x8 frame");
    screen.write("G");
    await screen.until((s) => /^> c\s+success/m.test(s) && /↑\d/.test(s), "c selected, scrolled");
    expect(screen.lines().every((l) => l.length <= 60)).toBe(true);

    screen.write("q");
    expect(await screen.exited).toBe(0);
    // The shell's screen is back, with the cursor shown.
    expect(screen.screenKind()).toBe("normal");
    const raw = screen.raw();
    expect(raw.lastIndexOf("\x1b[?1049l")).toBeGreaterThan(raw.lastIndexOf("\x1b[?1049h"));
    expect(raw.lastIndexOf("\x1b[?25h")).toBeGreaterThan(raw.lastIndexOf("\x1b[?25l"));
  });

  it("c then y cancels the selected task's run; n does not", async () => {
    const { dir, runId, run } = gatedRun();
    await waitFor(() => running(dir, "a") && running(dir, "b"), 30_000, "a and b running");
    const screen = watchScreen([runId]);
    await screen.until((s) => row("a", "running").test(s), "a running");
    screen.write("c");
    await screen.until((s) => s.includes(`cancel run ${runId} (2 tasks running)? y/n`), "the question");
    screen.write("n");
    await screen.until((s) => s.includes(`run ${runId} not cancelled`), "not cancelled");
    expect(existsSync(join(dir, ".termorch", runId, "cancel"))).toBe(false);
    screen.write("c");
    await screen.until((s) => s.includes("? y/n"), "the question again");
    screen.write("y");
    await screen.until((s) => s.includes("reported, exit 130"), "the run cancelled");
    expect((await run).exitCode).toBe(130);
    expect(readReport(dir).tasks.find((t) => t.id === "a")?.reason).toBe("cancelled");
    expect(screen.text()).toMatch(row("a", "failed"));
    screen.write("q");
    expect(await screen.exited).toBe(0);
  });

  it("NO_COLOR: no colour escapes at all (colours otherwise)", async () => {
    const { dir, run, open } = gatedRun();
    open("a");
    open("b");
    expect((await run).exitCode).toBe(0);
    const colourSgr = (raw: string): string[] =>
      [...raw.matchAll(new RegExp(`${ESC}\\[([0-9;]*)m`, "g"))]
        .map((m) => m[1]!)
        .filter((p) => p.split(";").some((n) => /^(3[0-9]|4[0-9]|9[0-7]|10[0-7])$/.test(n)));
    for (const noColor of [true, false]) {
      const screen = watchScreen([dir], noColor ? { NO_COLOR: "1" } : {});
      await screen.until((s) => row("c", "success").test(s), "the finished run");
      screen.write("q");
      expect(await screen.exited).toBe(0);
      if (noColor) expect(colourSgr(screen.raw())).toEqual([]);
      else expect(colourSgr(screen.raw()).length).toBeGreaterThan(0);
    }
  });
  it("Ctrl-C, or SIGTERM, quits too (exit 130) and restores the terminal", async () => {
    const { dir, runId, run, open } = gatedRun();
    await waitFor(() => running(dir, "a"), 30_000, "a running");
    for (const how of ["ctrl-c", "sigterm"] as const) {
      const screen = watchScreen([runId]);
      await screen.until((s) => row("a", "running").test(s), "a running");
      expect(screen.screenKind()).toBe("alternate");
      if (how === "ctrl-c") screen.write("\x03");
      else process.kill(screen.proc.pid, "SIGTERM");
      expect(await screen.exited).toBe(130);
      expect(screen.screenKind()).toBe("normal");
    }
    open("a");
    open("b");
    expect((await run).exitCode).toBe(0);
  });
});

describe("termorch watch without a terminal", () => {
  it("prints one plain line per task state change and exits 0 once the run is reported", async () => {
    const { dir, runId, run, open } = gatedRun();
    await waitFor(() => running(dir, "a") && running(dir, "b"), 30_000, "a and b running");
    const watch = execa(process.execPath, [BIN, "watch", runId], {
      reject: false,
      cwd: ROOT,
      env: cliEnv(socket),
      stdin: "ignore",
    });
    runs.push(watch);
    let out = "";
    watch.stdout?.on("data", (d: Buffer) => {
      out += d.toString();
    });
    await waitFor(() => out.includes(`${runId} a running wave 1 attempt 1`), 20_000, "a's running line");
    open("a");
    await waitFor(
      () => out.includes(`${runId} a success wave 1 attempt 1 exit 0`),
      20_000,
      "a's success line",
    );
    open("b");
    const result = await watch;
    expect((await run).exitCode).toBe(0);
    expect(result.exitCode).toBe(0);
    const lines = String(result.stdout).trim().split("\n");
    const iso = "\\d{4}-\\d\\d-\\d\\dT\\d\\d:\\d\\d:\\d\\d\\.\\d{3}Z";
    for (const line of lines) expect(line).toMatch(new RegExp(`^${iso} ${runId} `));
    expect(lines).toContainEqual(
      expect.stringMatching(new RegExp(`^${iso} ${runId} c pending wave 2 attempt 0$`)),
    );
    expect(lines).toContainEqual(
      expect.stringMatching(new RegExp(`^${iso} ${runId} b success wave 1 attempt 1 exit 0$`)),
    );
    expect(lines.at(-1)).toMatch(new RegExp(`^${iso} ${runId} - reported exit 0$`));
    // One line per change: a's running line is there once.
    expect(lines.filter((l) => l.includes(` ${runId} a running `))).toHaveLength(1);
    expect(String(result.stdout)).not.toContain("\x1b");
  });

  it("exits 130 on SIGTERM while runs go on", async () => {
    const { dir, runId, open } = gatedRun();
    await waitFor(() => running(dir, "a"), 30_000, "a running");
    const watch = execa(process.execPath, [BIN, "watch"], { reject: false, cwd: ROOT, env: cliEnv(socket) });
    runs.push(watch);
    let out = "";
    watch.stdout?.on("data", (d: Buffer) => {
      out += d.toString();
    });
    await waitFor(() => out.includes(`${runId} a running`), 20_000, "a's running line");
    watch.kill("SIGTERM");
    expect((await watch).exitCode).toBe(130);
    open("a");
    open("b");
  });

  it("an unknown run, or a run and --home: exit 2 with the reason", async () => {
    const unknown = await termorch(["watch", "no-such-run"], { socket });
    expect(unknown.exitCode).toBe(2);
    expect(unknown.stderr).toContain('no run "no-such-run"');
    const both = await termorch(["watch", "x", "--home", "/tmp"], { socket });
    expect(both.exitCode).toBe(2);
    expect(both.stderr).toContain("pass either a run or --home, not both");
  });
});

describe("termorch watch, the README's picture", () => {
  it("renders a representative run (8 tasks, 3 waves: done with costs, running, waiting for input, failed, pending), drawn to a PNG on request", async () => {
    const { dir } = workspace();
    const gate = join(dir, "gate");
    const slow = (say: string) => ({ SAY: say, WAIT_FILE: gate });
    const out = join(dir, "stub-out");
    mkdirSync(out);
    // aider's stand-in (test/fixtures/agents/) reports tokens and cost, as the real one does;
    // the interactive stand-in asks a question and waits for an answer.
    const file = writeAssignments(dir, [
      { id: "schema", agent: "aider", command: undefined },
      { id: "lint-rules", env: { SAY: "error: 3 files break rule no-unused-vars", EXIT: "1" } },
      {
        id: "review",
        agent: "istub",
        command: undefined,
        interactive: true,
        waiting_after_s: 1,
        env: { STUB_OUT: out },
      },
      { id: "models", agent: "aider", command: undefined, dependencies: ["schema"] },
      { id: "api", dependencies: ["schema"], env: slow("compiling routes (12/40): /orders/:id") },
      { id: "ui", dependencies: ["schema"], env: slow("vite: transforming (214) src/components/Table.tsx") },
      { id: "e2e", dependencies: ["api", "ui"] },
      { id: "docs", dependencies: ["models", "api"] },
    ]);
    const config = join(dir, "termorch.json");
    writeFileSync(
      config,
      JSON.stringify({
        agents: { istub: { command: [join(ROOT, "test", "fixtures", "agents", "interactive-stub")] } },
      }),
    );
    const runId = JSON.parse(readFileSync(file, "utf8")).run_id as string;
    const env = {
      ...cliEnv(socket),
      PATH: `${join(ROOT, "test", "fixtures", "agents")}:${process.env.PATH}`,
    };
    const run = execa(process.execPath, [BIN, "run", file, "--config", config, "--max-parallel", "4"], {
      reject: false,
      cwd: ROOT,
      env,
      stdin: "ignore",
    });
    runs.push(run);
    await waitFor(
      () =>
        ["api", "ui"].every((id) => running(dir, id)) &&
        ["schema", "models"].every((id) => existsSync(join(dir, "status", `${id}.success`))) &&
        existsSync(join(dir, "status", "lint-rules.failed")),
      60_000,
      "the run half-way",
    );
    const screen = watchScreen([dir]);
    await screen.until(
      (s) =>
        row("api", "running").test(s) &&
        row("models", "success").test(s) &&
        row("review", "waiting").test(s) &&
        /\$\d/.test(s),
      "the run half-way on screen, review waiting for input",
    );
    // The waiting task, selected, says since when.
    while (!/^> review/m.test(screen.text())) {
      const before = screen.text();
      screen.write(/^> (schema|lint-rules)/m.test(before) ? "j" : "k");
      await screen.until((s) => s !== before, "the selection to move");
    }
    await screen.until(
      (s) => /review \(istub\) of \S+ · waiting for input for \d/.test(s),
      "review's details",
    );
    // Its picture for the README (a real browser draws the screen with xterm.js), drawn only when
    // the pictures of docs/img/ are refreshed (UPDATE_DOCS_IMG=1): it asserts nothing of
    // termorch's, and a browser's start took seconds of CPU from every test run.
    if (
      process.env.UPDATE_DOCS_IMG === "1" &&
      has("chromium", "the watch picture in test/integration/watch.test.ts")
    ) {
      const { keepForDocs, launchChromium, screenshot } = await import("../browser/chromium.js");
      const browser = await launchChromium();
      try {
        const page = await browser.newPage();
        const xtermDir = join(ROOT, "node_modules", "@xterm", "xterm");
        const css = readFileSync(join(xtermDir, "css", "xterm.css"), "utf8");
        const js = readFileSync(join(xtermDir, "lib", "xterm.js"), "utf8");
        // Everything inlined: the page loads nothing from anywhere.
        await page.setContent(
          `<!doctype html><html><head><meta charset="utf-8"><style>${css}
  body { margin: 0; background: #11131a; }
  #frame { display: inline-block; padding: 16px; background: #11131a; }
  </style></head><body><div id="frame"><div id="term"></div></div>
  <script>${js.replace(/<\/script/gi, "<\\/script")}</script>
  <script>
  window.term = new Terminal({ cols: 80, rows: 24, fontSize: 14, fontFamily: "DejaVu Sans Mono, monospace",
    theme: { background: "#11131a", foreground: "#d8dee9", cyan: "#5fd7ff", green: "#87d787", red: "#ff6b6b",
             blue: "#2f5fb3", magenta: "#d7afff", yellow: "#e5c07b", brightBlack: "#5c6370", brightWhite: "#ffffff" } });
  window.term.open(document.getElementById("term"));
  </script></body></html>`,
        );
        await page.evaluate(
          (data) =>
            new Promise<void>((r) =>
              (globalThis as unknown as { term: { write(d: string, done: () => void): void } }).term.write(
                data,
                r,
              ),
            ),
          screen.raw(),
        );
        const box = await page.$eval("#frame", (e) => {
          const r = (
            e as unknown as { getBoundingClientRect(): { width: number; height: number } }
          ).getBoundingClientRect();
          return { width: Math.ceil(r.width), height: Math.ceil(r.height) };
        });
        await page.setViewport(box);
        const png = await screenshot(page, "watch");
        expect(readFileSync(png).subarray(1, 4).toString()).toBe("PNG");
        keepForDocs(png, "watch");
      } finally {
        await browser.close();
      }
    }
    writeFileSync(gate, "");
    const answered = await termorch(["send", "review", "yes, go on", "--run", runId], { socket });
    expect(answered.exitCode, answered.stderr).toBe(0);
    await screen.until((s) => s.includes("reported, exit 1"), "the run reported");
    expect((await run).exitCode).toBe(1);
    screen.write("q");
    expect(await screen.exited).toBe(0);
  });
});
