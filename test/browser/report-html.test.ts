/// <reference lib="dom" />
// Callbacks of page.$eval run in the browser: their elements are DOM elements.
import {
  copyFileSync,
  existsSync,
  lstatSync,
  mkdirSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import type { Browser } from "puppeteer-core";
import { afterAll, beforeAll, expect, it } from "vitest";
import type { Report } from "../../src/contract/report.js";
import { readLedgerEvents } from "../../src/ledger/ledger.js";
import { readReport, termorch, testFile, writeAssignments } from "../integration/harness.js";
import { describeWith } from "../needs.js";
import { collectPageErrors, keepForDocs, launchChromium, screenshot } from "./chromium.js";

const { socket, workspace } = testFile("report-html");

/** One bar of the page's timeline, as the page shows it. */
interface ShownBar {
  task: string;
  attempt: number;
  outcome: string;
  critical: boolean;
  wave: number;
  left: number;
  boxShadow: string;
}

/**
 * A representative run (7 tasks in 3 waves, max_parallel 2): `flaky` fails once and is retried,
 * `broken` fails, `cli` is skipped for it, and wave 1's third task waits for a slot.
 */
async function representativeRun(): Promise<{ dir: string; report: Report }> {
  const { dir } = workspace();
  const counter = join(dir, "flaky-count");
  const file = writeAssignments(
    dir,
    [
      { id: "models", env: { SLEEP: "1.4", SAY: "models written", WRITE: "src/models.js=export {}" } },
      { id: "utils", env: { SLEEP: "0.8", SAY: "utils written", WRITE: "src/utils.js=export {}" } },
      { id: "flaky", retries: 1 },
      { id: "api", dependencies: ["models"], env: { SLEEP: "1.6", WRITE: "src/api.js=export {}" } },
      { id: "broken", dependencies: ["utils"], env: { SLEEP: "0.6", WARN: "cannot build utils", EXIT: "3" } },
      { id: "docs", dependencies: ["api", "flaky"], env: { SLEEP: "0.7", WRITE: "docs/api.md=# api" } },
      { id: "cli", dependencies: ["api", "broken"], env: { WRITE: "src/cli.js=export {}" } },
    ],
    { environment: { resource_limits: { max_parallel: 2 } } },
  );
  const a = JSON.parse(readFileSync(file, "utf8"));
  // Fails the first time, succeeds the second (a fresh session from the same base).
  a.tasks[2].command = [
    "bash",
    "-c",
    `echo x >> ${counter}; sleep 0.5; if [ $(wc -l < ${counter}) -lt 2 ]; then echo "flaky: network timeout" >&2; exit 1; fi; mkdir -p src && echo ok > src/flaky.js`,
  ];
  writeFileSync(file, JSON.stringify(a));
  const result = await termorch(["run", file], { socket });
  expect(result.exitCode, result.stderr).toBe(1);
  return { dir, report: readReport(dir) };
}

describeWith("chromium", "test/browser/report-html.test.ts")("report.html", () => {
  let browser: Browser;
  let dir: string;
  let report: Report;

  beforeAll(async () => {
    [browser, { dir, report }] = await Promise.all([launchChromium(), representativeRun()]);
  }, 120_000);
  afterAll(async () => {
    await browser?.close();
  });

  async function open(file: string) {
    const page = await browser.newPage();
    await page.setViewport({ width: 1200, height: 800 });
    const errors = collectPageErrors(page);
    const requests: string[] = [];
    page.on("request", (r) => requests.push(r.url()));
    await page.goto(pathToFileURL(file).href, { waitUntil: "load" });
    // Page-side code: the tests are typed without the DOM library, hence attributes and a cast.
    const bars: ShownBar[] = await page.$$eval(".tl .bar", (els) =>
      els.map((el) => {
        const style = (
          globalThis as unknown as { getComputedStyle(e: unknown): { boxShadow: string } }
        ).getComputedStyle(el);
        return {
          task: el.getAttribute("data-task") ?? "",
          attempt: Number(el.getAttribute("data-attempt")),
          outcome: el.getAttribute("data-outcome") ?? "",
          critical: el.getAttribute("data-critical") === "true",
          wave: Number(el.closest(".tl-wave")?.getAttribute("data-wave")),
          left: el.getBoundingClientRect().left,
          boxShadow: style.boxShadow,
        };
      }),
    );
    const hrefs = await page.$$eval("a.log", (els) => els.map((e) => e.getAttribute("href") ?? ""));
    const links = hrefs.map((h) => new URL(h, page.url()).href);
    return { page, errors, requests, bars, links };
  }

  it("is written at the end of the run, next to the report, and loads in Chromium without an error or a request", async () => {
    const html = join(dir, "report.html");
    expect(existsSync(html)).toBe(true);
    expect(statSync(html).mode & 0o777).toBe(statSync(join(dir, "execution_report.json")).mode & 0o777);
    const { page, errors, requests, bars, links } = await open(html);
    expect(errors).toEqual([]);
    // The page itself and nothing else: no CDN, no font, no image, no script from anywhere.
    expect(requests.filter((u) => !u.startsWith("file:"))).toEqual([]);
    expect(requests).toEqual([pathToFileURL(html).href]);

    // One bar per attempt the ledger launched, in the ledger's order by wave, then start (two
    // agents started in the same millisecond: by task, then attempt, as the page orders them).
    const events = await readLedgerEvents(join(dir, "events.jsonl"));
    const planned = events.find((e) => e.type === "run.planned")!.data as {
      waves: string[][];
      critical_path: string[];
    };
    const waveOf = (task: string): number => planned.waves.findIndex((w) => w.includes(task)) + 1;
    const startOf = new Map(
      events
        .filter((e) => e.type === "task.exited")
        .map((e) => [`${e.task_id}#${e.data.attempt}`, Date.parse(e.data.started_at as string)]),
    );
    const launched = events
      .filter((e) => e.type === "task.launched")
      .map((e) => ({ task: e.task_id!, attempt: e.data.attempt as number }));
    expect(bars).toHaveLength(launched.length);
    const expected = launched
      .map((l) => ({ ...l, wave: waveOf(l.task), start: startOf.get(`${l.task}#${l.attempt}`)! }))
      .sort(
        (x, y) =>
          x.wave - y.wave ||
          x.start - y.start ||
          (x.task < y.task ? -1 : x.task > y.task ? 1 : 0) ||
          x.attempt - y.attempt,
      );
    expect(bars.map((b) => `${b.task}#${b.attempt}`)).toEqual(expected.map((e) => `${e.task}#${e.attempt}`));
    expect(bars.map((b) => b.wave)).toEqual(expected.map((e) => e.wave));
    // Drawn where they start: left to right within a wave.
    for (let i = 1; i < bars.length; i++)
      if (bars[i]!.wave === bars[i - 1]!.wave)
        expect(bars[i]!.left).toBeGreaterThanOrEqual(bars[i - 1]!.left);

    // The critical path highlighted, and only it.
    expect(planned.critical_path.length).toBeGreaterThan(1);
    expect(new Set(bars.filter((b) => b.critical).map((b) => b.task))).toEqual(
      new Set(planned.critical_path.filter((t) => bars.some((b) => b.task === t))),
    );
    for (const b of bars) expect(b.boxShadow === "none", `${b.task}#${b.attempt}`).toBe(!b.critical);

    // The retry, the failure, the skip and the wait for a slot are marked.
    expect(bars.filter((b) => b.task === "flaky").map((b) => b.outcome)).toEqual(["retried", "success"]);
    expect(bars.find((b) => b.task === "broken")?.outcome).toBe("failed");
    expect(
      await page.$$eval('.marker[data-marker="skipped"]', (els) =>
        els.map((e) => e.getAttribute("data-task")),
      ),
    ).toEqual(["cli"]);
    expect(await page.$eval('.marker[data-task="cli"]', (e) => e.getAttribute("title"))).toContain("broken");
    expect(await page.$$eval(".wait.queued", (els) => els.length)).toBeGreaterThan(0);
    const legend = await page.$eval(".tl-legend", (e) => e.textContent);
    expect(legend).toContain("critical path");
    expect(legend).toContain("skipped");

    // Every task's logs are linked, and each link leads to the file.
    expect(links.length).toBeGreaterThanOrEqual(2 * report.tasks.filter((t) => t.logs.stdout).length);
    for (const href of links) {
      expect(href.startsWith("file:"), href).toBe(true);
      expect(existsSync(fileURLToPath(href)), href).toBe(true);
    }

    keepForDocs(await screenshot(page, "report-html"), "report-html");
    await page.close();
  });

  it("`termorch report <run> --html` renders the same page again, from the run's files alone", async () => {
    const html = join(dir, "report.html");
    const first = readFileSync(html, "utf8");
    rmSync(html);
    const again = await termorch(["report", report.run_id!, "--html"], { socket });
    expect(again.exitCode, again.stderr).toBe(0);
    expect(again.stdout.trim()).toBe(html);
    expect(readFileSync(html, "utf8")).toBe(first);

    // Elsewhere (--out), with the same bars and log links that still lead to the run's files.
    const out = join(dir, "elsewhere", "page.html");
    mkdirSync(join(dir, "elsewhere"));
    const moved = await termorch(["report", dir, "--html", "--out", out], { socket });
    expect(moved.exitCode, moved.stderr).toBe(0);
    expect(moved.stdout.trim()).toBe(out);
    const a = await open(html);
    const b = await open(out);
    expect(b.errors).toEqual([]);
    expect(b.bars.map(({ left: _l, ...bar }) => bar)).toEqual(a.bars.map(({ left: _l, ...bar }) => bar));
    expect(b.links.length).toBe(a.links.length);
    for (const href of b.links) expect(existsSync(fileURLToPath(href)), href).toBe(true);
    await a.page.close();
    await b.page.close();

    // Without --html: the JSON report.
    const json = await termorch(["report", dir], { socket });
    expect(json.exitCode).toBe(0);
    expect(JSON.parse(json.stdout)).toEqual(report);
  });

  it("is written by the resumed run when the first one died before its report", async () => {
    const { dir: resumedDir } = workspace();
    const file = writeAssignments(resumedDir, [
      { id: "first", env: { WRITE: "first.txt=1" } },
      { id: "second", dependencies: ["first"], env: { WRITE: "second.txt=2" } },
    ]);
    const died = await termorch(["run", file], { socket, env: { TERMORCH_FAULT: "kill-before-report" } });
    expect(died.exitCode).not.toBe(0);
    expect(existsSync(join(resumedDir, "execution_report.json"))).toBe(false);
    expect(existsSync(join(resumedDir, "report.html"))).toBe(false);
    const resumed = await termorch(["resume", resumedDir], { socket });
    expect(resumed.exitCode, resumed.stderr).toBe(0);
    const { page, errors, bars } = await open(join(resumedDir, "report.html"));
    expect(errors).toEqual([]);
    expect(bars.map((b) => [b.task, b.outcome, b.wave])).toEqual([
      ["first", "success", 1],
      ["second", "success", 2],
    ]);
    await page.close();
  });

  it("`termorch report --html` renders a report without a ledger (a run refused before it started), with no timeline", async () => {
    const refused = workspace().dir;
    copyFileSync(join(dir, "execution_report.json"), join(refused, "execution_report.json"));
    const r = await termorch(["report", refused, "--html"], { socket });
    expect(r.stderr).toBe("");
    expect(r.exitCode).toBe(0);
    expect(r.stdout.trim()).toBe(join(refused, "report.html"));
    const { page, errors, bars } = await open(join(refused, "report.html"));
    expect(bars).toEqual([]);
    expect(errors).toEqual([]);
    await page.close();
  });

  it("`termorch report` exits 2 with a clear message for a run without a report, for an --out that is not a regular file, and for bad usage", async () => {
    // A run that has not reported: its state, no report.
    const pending = workspace().dir;
    const state = JSON.parse(readFileSync(join(dir, "state.json"), "utf8"));
    writeFileSync(join(pending, "state.json"), JSON.stringify({ ...state, phase: "running", report: null }));
    const noReport = await termorch(["report", pending, "--html"], { socket });
    expect(noReport.exitCode).toBe(2);
    expect(noReport.stderr).toContain("has no report");
    expect(noReport.stderr).toContain(join(pending, "execution_report.json"));
    expect(existsSync(join(pending, "report.html"))).toBe(false);

    // --out never replaces a link, a folder or a device with the page (as root, /dev/stdout).
    const target = join(pending, "target.html");
    writeFileSync(target, "mine\n");
    symlinkSync(target, join(pending, "link.html"));
    for (const out of [join(pending, "link.html"), pending, "/dev/null"]) {
      const refused = await termorch(["report", dir, "--html", "--out", out], { socket });
      expect(refused.exitCode, out).toBe(2);
      expect(refused.stderr).toContain(`${out} is `);
    }
    expect(lstatSync(join(pending, "link.html")).isSymbolicLink()).toBe(true);
    expect(readFileSync(target, "utf8")).toBe("mine\n");
    expect(lstatSync("/dev/null").isCharacterDevice()).toBe(true);

    const unknown = await termorch(["report", "no-such-run", "--html"], { socket });
    expect(unknown.exitCode).toBe(2);
    expect(unknown.stderr).toContain('no run "no-such-run"');

    const usage = await termorch(["report", dir, "--out", join(dir, "x.html")], { socket });
    expect(usage.exitCode).toBe(2);
    expect(usage.stderr).toContain("--out");
    expect(existsSync(join(dir, "x.html"))).toBe(false);
  });
});
