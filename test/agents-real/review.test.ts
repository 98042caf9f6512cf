// The review gate (issue 38) through the real agent CLIs pinned in test/agents-real/package.json:
// a reviewer agent, headless in a copy of the task's commit, reads its prompt (the task, the diff,
// the gates) and writes its verdict with its CLI's own file tool where the prompt says
// (.termorch/verdict.json in its working folder). The scripted model decides from what each
// request carries: a task's first attempt writes a wrong value; a reviewer that sees that value in
// the diff requests changes with a comment naming the right one; an attempt given the comment
// writes the value it names; a reviewer that sees the right value approves. The right value is in
// the reviewer's comment only (neither the task's context nor any earlier request names it), so
// the run passes only if the comment went from the reviewer's CLI through its verdict file and
// the feedback section to the second attempt's CLI, another CLI than the first and the
// reviewer's. Then: a reviewer's edit of the work is discarded and named, and an invalid verdict
// fails the gate. Each run prints the time and tokens its reviews took (the ledger's
// task.review_started to task.reviewed; each review's usage). Last, a person in the reviewer's
// place: claude's result rejected with the same comment through `termorch reject`, which reaches
// its next attempt's request to the model the same way.
import { execFileSync } from "node:child_process";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import type { Report } from "../../src/contract/report.js";
import { type CliRecipe, RECIPES, SECRET } from "./clis.js";
import { allText, readReport, realAgentsSuite, stringsOf } from "./harness.js";
import type { RecordedRequest, Script, ScriptUsage, Step } from "./model-server.js";

const { world, server: modelServer } = realAgentsSuite("review");

/** The task's context: it names the file, never the value the reviewer will want. */
const CONTEXT = "Put the agreed value into out.txt. REVIEW-TASK R\n";
const MARK = "REVIEW-TASK R";
/** Every reviewer prompt starts so (review-prompt.ts). */
const REVIEW_HEADING = "# Review of task R, attempt ";
const FEEDBACK_HEADING = "### The reviewer requested changes";
const WRONG = "first draft";
const RIGHT = "agreed-value-7q3k";
const COMMENT = `REVIEW-FIX: write '${RIGHT}' into out.txt`;
const VERDICT = ".termorch/verdict.json";

/** Tokens of each final answer; each tool call's turn reports 10 in, 5 out (model-server.ts). */
const FIRST: ScriptUsage = { input: 1000, output: 50 };
const SECOND: ScriptUsage = { input: 2000, output: 70 };
const REVIEW_1: ScriptUsage = { input: 300, output: 30 };
const REVIEW_2: ScriptUsage = { input: 400, output: 40 };
/** Each review: one write (the verdict) and its answer. */
const REVIEW_USAGE = [
  { input_tokens: 10 + REVIEW_1.input, output_tokens: 5 + REVIEW_1.output },
  { input_tokens: 10 + REVIEW_2.input, output_tokens: 5 + REVIEW_2.output },
];
/** Attempt 1: a write and its answer; attempt 2: a read, a write and its answer. */
const ATTEMPT_USAGE = [
  { input_tokens: 10 + FIRST.input, output_tokens: 5 + FIRST.output },
  { input_tokens: 2 * 10 + SECOND.input, output_tokens: 2 * 5 + SECOND.output },
];
const sum = (xs: { input_tokens: number; output_tokens: number }[]) => ({
  input_tokens: xs.reduce((n, x) => n + x.input_tokens, 0),
  output_tokens: xs.reduce((n, x) => n + x.output_tokens, 0),
});

const isReview = (q: RecordedRequest): boolean => stringsOf(q.text).includes(REVIEW_HEADING);

/**
 * The model of task R and of its reviewer. `reviewer(prompt)`: the steps of a review (its request
 * carries "# Review of task R"); by default, request changes unless the diff adds the right value.
 */
function model(reviewer: (prompt: string) => Step[] = judge): Script {
  return (text) => {
    const prompt = stringsOf(text);
    if (prompt.includes(REVIEW_HEADING)) return reviewer(prompt);
    const wanted = /REVIEW-FIX: write '([^']*)' into out\.txt/.exec(prompt)?.[1];
    if (wanted !== undefined)
      return [
        // Read first: Claude Code and opencode write over a file only once it was read.
        { read: "out.txt" },
        { write: "out.txt", content: `${wanted}\n` },
        { reply: `Fixed: out.txt says ${wanted}`, usage: SECOND },
      ];
    return [
      { write: "out.txt", content: `${WRONG}\n` },
      { reply: "Done: wrote out.txt", usage: FIRST },
    ];
  };
}

/** A reviewer that approves the right value in the diff, and asks for it otherwise. */
function judge(prompt: string): Step[] {
  if (prompt.includes(`\n+${RIGHT}\n`))
    return [
      {
        write: VERDICT,
        content: JSON.stringify({ verdict: "approve", summary: "out.txt holds the value." }),
      },
      { reply: "Approved.", usage: REVIEW_2 },
    ];
  return [
    {
      write: VERDICT,
      content: JSON.stringify({
        verdict: "request_changes",
        summary: "out.txt holds a draft, not the agreed value.",
        comments: [{ file: "out.txt", line: 1, body: COMMENT }],
      }),
    },
    { reply: "Changes requested.", usage: REVIEW_1 },
  ];
}

/** A run of task R on `author` (escalating to `escalation` when given), reviewed by `reviewer`. */
function prepare(
  author: CliRecipe,
  reviewer: CliRecipe,
  task: Record<string, unknown>,
  escalation?: CliRecipe,
): { dir: string; repo: string; file: string; config: string; recipes: CliRecipe[] } {
  const recipes = [author, reviewer, ...(escalation ? [escalation] : [])];
  const { dir, repo } = world.workspace();
  writeFileSync(join(repo, "ctx", "R.md"), CONTEXT);
  execFileSync("git", ["-C", repo, "add", "-A"]);
  execFileSync("git", ["-C", repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "R"]);
  const agents = Object.fromEntries(recipes.map((r) => [r.preset, r.agent(modelServer().url)]));
  const config = join(dir, "termorch.json");
  writeFileSync(config, JSON.stringify({ agents }));
  const file = join(dir, "assignments.json");
  writeFileSync(
    file,
    JSON.stringify({
      run_id: `rv-${recipes.map((r) => r.preset).join("-")}-${Math.random().toString(36).slice(2, 8)}`,
      tasks: [
        {
          id: "R",
          agent: author.preset,
          context_path: "ctx/R.md",
          dependencies: [],
          success_criteria: { review: reviewer.preset },
          ...(escalation ? { retries: 1, escalation: [escalation.preset] } : {}),
          ...task,
        },
      ],
      environment: { workspace_dir: "repo", env_vars: [...new Set(recipes.map((r) => r.keyVar))] },
    }),
  );
  return { dir, repo, file, config, recipes };
}

async function run(
  p: ReturnType<typeof prepare>,
): Promise<{ exitCode: number; report: Report; stderr: string }> {
  const r = await world.termorch(["run", p.file, "--config", p.config], {
    env: Object.fromEntries(p.recipes.map((x) => [x.keyVar, SECRET])),
  });
  return { exitCode: r.exitCode, report: readReport(p.dir), stderr: r.stderr };
}

interface LedgerLine {
  ts: string;
  type: string;
  task_id?: string;
  data: Record<string, unknown>;
}

const ledger = (dir: string): LedgerLine[] =>
  readFileSync(join(dir, "events.jsonl"), "utf8")
    .split("\n")
    .filter(Boolean)
    .map((l) => JSON.parse(l) as LedgerLine);

/**
 * Each review's wall time from the ledger (its reviewer's launch to its verdict read; and from the
 * event before it, the attempt's commit and gates, to the verdict: what the review added to the
 * attempt), and its tokens from the report; printed for the record.
 */
function measure(label: string, dir: string, report: Report): { launchMs: number; addedMs: number }[] {
  const events = ledger(dir);
  const out: { launchMs: number; addedMs: number }[] = [];
  const history = report.tasks[0]!.attempt_history ?? [];
  events.forEach((e, i) => {
    if (e.type !== "task.review_started") return;
    const end = events.slice(i).find((x) => x.type === "task.reviewed" && x.task_id === e.task_id)!;
    const before = events[i - 1]!;
    const launchMs = Date.parse(end.ts) - Date.parse(e.ts);
    const addedMs = Date.parse(end.ts) - Date.parse(before.ts);
    out.push({ launchMs, addedMs });
    const review = history[Number(e.data.attempt) - 1]?.review;
    console.log(
      `[review timing] ${label}, attempt ${String(e.data.attempt)}: reviewer ${String(e.data.agent)} ran ${launchMs} ms (launch to verdict read), ${addedMs} ms after "${before.type}"; verdict ${String(end.data.verdict)}; usage ${JSON.stringify(review?.usage ?? null)}`,
    );
  });
  return out;
}

const committed = (repo: string, path: string): string =>
  execFileSync("git", ["-C", repo, "show", `HEAD:${path}`], {
    encoding: "utf8",
    stdio: ["ignore", "pipe", "pipe"],
  });

/** The reviewer's CLI, the task's, and the escalation's (another CLI again): each of the four CLIs reviews once. */
const CASES = [
  [RECIPES.claude, RECIPES.codex, RECIPES.opencode],
  [RECIPES.codex, RECIPES.opencode, RECIPES.claude],
  [RECIPES.gemini, RECIPES.opencode, RECIPES.codex],
  [RECIPES.opencode, RECIPES.gemini, RECIPES.claude],
].map(([reviewer, author, escalation]) => ({
  name: reviewer!.preset,
  reviewer: reviewer!,
  author: author!,
  escalation: escalation!,
}));

describe.each(CASES)("$name as the reviewer", ({ reviewer, author, escalation }) => {
  it(`${reviewer.preset} requests changes on ${author.preset}'s attempt; ${escalation.preset}'s attempt gets the comment, fixes the file; ${reviewer.preset} approves and the task merges`, async () => {
    modelServer().setScript(model());
    const p = prepare(author, reviewer, {}, escalation);
    const before = modelServer().requests.length;
    const { exitCode, report, stderr } = await run(p);
    const task = report.tasks[0]!;
    expect(exitCode, `${stderr}\n${JSON.stringify(task, null, 2)}`).toBe(0);
    expect(task).toMatchObject({ status: "success", attempts: 2 });
    const history = task.attempt_history!;
    expect(history.map((h) => [h.agent, h.reason])).toEqual([
      [author.preset, "review"],
      [escalation.preset, null],
    ]);
    expect(history.map((h) => h.review?.agent)).toEqual([reviewer.preset, reviewer.preset]);
    expect(history.map((h) => h.review?.verdict)).toEqual(["request_changes", "approve"]);
    expect(history.map((h) => h.review?.comments)).toEqual([1, 0]);
    expect(history.map((h) => h.review?.discarded)).toEqual([[], []]);
    expect(history[0]!.detail).toContain(
      `its reviewer ${reviewer.preset} requested changes (1 comment): out.txt:1: ${COMMENT}`,
    );
    expect(task.gates.at(-1)).toMatchObject({ name: "review", passed: true });
    expect(task.gates.at(-1)!.detail).toMatch(new RegExp(`^approved by ${reviewer.preset}`));

    // The verdicts as the reviewer's CLI wrote them, kept with each attempt's artifacts.
    expect(history.map((h) => h.review?.file)).toEqual([
      "artifacts/R/attempt-1/review.json",
      "artifacts/R/attempt-2/review.json",
    ]);
    const written = readFileSync(join(p.dir, history[0]!.review!.file!), "utf8");
    console.log(`[review verdict] ${reviewer.preset} wrote ${history[0]!.review!.file}: ${written}`);
    expect(JSON.parse(written)).toEqual({
      verdict: "request_changes",
      summary: "out.txt holds a draft, not the agreed value.",
      comments: [{ file: "out.txt", line: 1, body: COMMENT }],
    });
    expect(JSON.parse(readFileSync(join(p.dir, history[1]!.review!.file!), "utf8"))).toMatchObject({
      verdict: "approve",
    });

    // Who asked the model what: each CLI speaks its own protocol, so the protocol names the CLI.
    const mine = modelServer()
      .requests.slice(before)
      .filter((q) => q.main && stringsOf(q.text).includes(MARK));
    const reviews = mine.filter(isReview);
    const work = mine.filter((q) => !isReview(q));
    const first = work.filter((q) => !stringsOf(q.text).includes(FEEDBACK_HEADING));
    const second = work.filter((q) => stringsOf(q.text).includes(FEEDBACK_HEADING));
    expect(first.length).toBeGreaterThan(0);
    expect(second.length).toBeGreaterThan(0);
    expect(reviews.length).toBeGreaterThan(0);
    expect(new Set(first.map((q) => q.protocol))).toEqual(new Set([author.protocol]));
    expect(new Set(second.map((q) => q.protocol))).toEqual(new Set([escalation.protocol]));
    expect(new Set(reviews.map((q) => q.protocol))).toEqual(new Set([reviewer.protocol]));
    // Both reviews asked, each with its attempt's diff. The right value reached no request before
    // the reviewer's comment did: not attempt 1's, nor the first review's before it wrote its
    // verdict (its first step; its later requests carry its own write).
    const review1 = reviews.filter((q) => stringsOf(q.text).includes(`${REVIEW_HEADING}1`));
    const review2 = reviews.filter((q) => stringsOf(q.text).includes(`${REVIEW_HEADING}2`));
    expect(review1.length).toBeGreaterThan(0);
    expect(review2.length).toBeGreaterThan(0);
    expect(stringsOf(review1[0]!.text)).toContain(`\n+${WRONG}\n`);
    expect(stringsOf(review2[0]!.text)).toContain(`\n+${RIGHT}\n`);
    expect(review1.some((r) => r.step === 0)).toBe(true);
    for (const q of [...first, ...review1.filter((r) => r.step === 0)]) expect(q.text).not.toContain(RIGHT);
    // The comment reached attempt 2's CLI, in the feedback section of its request to the model.
    const told = stringsOf(second[0]!.text);
    expect(told).toContain(FEEDBACK_HEADING);
    expect(told).toContain(`- \`out.txt:1\`: ${COMMENT}`);
    expect(told).toContain(`Its reviewer (${reviewer.preset}) read the change and did not approve it.`);

    // Merged: the reviewed value, in the repository's branch.
    expect(report.merge.result).toBe("success");
    expect(readFileSync(join(p.repo, "out.txt"), "utf8")).toBe(`${RIGHT}\n`);
    expect(committed(p.repo, "out.txt")).toBe(`${RIGHT}\n`);

    // Tokens: each attempt's own, each review's own, and the task's all four.
    expect(history.map((h) => h.usage)).toMatchObject(ATTEMPT_USAGE);
    expect(history.map((h) => h.review?.usage)).toMatchObject(REVIEW_USAGE);
    expect(task.usage).toMatchObject(sum([...ATTEMPT_USAGE, ...REVIEW_USAGE]));
    expect(report.summary.usage).toMatchObject(sum([...ATTEMPT_USAGE, ...REVIEW_USAGE]));

    // The ledger: each review started and ended, in order, with its verdict.
    const events = ledger(p.dir).filter(
      (e) => e.type === "task.review_started" || e.type === "task.reviewed",
    );
    expect(events.map((e) => [e.type, e.data.attempt, e.data.agent, e.data.verdict])).toEqual([
      ["task.review_started", 1, reviewer.preset, undefined],
      ["task.reviewed", 1, reviewer.preset, "request_changes"],
      ["task.review_started", 2, reviewer.preset, undefined],
      ["task.reviewed", 2, reviewer.preset, "approve"],
    ]);
    expect(
      measure(`${reviewer.preset} reviewing ${author.preset}/${escalation.preset}`, p.dir, report),
    ).toHaveLength(2);
    // The key went to the CLIs and into no file of the run.
    expect(allText(p.dir)).not.toContain(SECRET);
  });
});

describe("what a reviewer may not do, through a real CLI", () => {
  const reviewer = RECIPES.opencode;
  const author = RECIPES.codex;

  it("a reviewer in its own sandbox (none configured) cannot edit the work: its write is refused; the task's work merges", async () => {
    modelServer().setScript(
      model(() => [
        { read: "out.txt" },
        { write: "out.txt", content: "the reviewer's own edit\n" },
        { write: VERDICT, content: JSON.stringify({ verdict: "approve", summary: "Fine." }) },
        { reply: "Approved.", usage: REVIEW_1 },
      ]),
    );
    const p = prepare(author, reviewer, {});
    const { exitCode, report, stderr } = await run(p);
    const task = report.tasks[0]!;
    expect(exitCode, `${stderr}\n${JSON.stringify(task, null, 2)}`).toBe(0);
    expect(ledger(p.dir).find((e) => e.type === "task.review_started")?.data.sandboxed).toBe(true);
    // Its copy was read-only: nothing of it changed, nothing to discard, its verdict taken.
    expect(task.attempt_history![0]!.review).toMatchObject({ verdict: "approve", discarded: [] });
    expect(committed(p.repo, "out.txt")).toBe(`${WRONG}\n`);
  });

  it("a reviewer whose task turns the sandbox off, and edits the work, has its edit discarded and named; the task's own work merges", async () => {
    const EDIT = "the reviewer's own edit\n";
    modelServer().setScript(
      model(() => [
        { read: "out.txt" },
        { write: "out.txt", content: EDIT },
        { write: VERDICT, content: JSON.stringify({ verdict: "approve", summary: "Fine." }) },
        { reply: "Approved, and tidied out.txt.", usage: REVIEW_1 },
      ]),
    );
    const p = prepare(author, reviewer, { sandbox: "off" });
    const before = modelServer().requests.length;
    const { exitCode, report, stderr } = await run(p);
    const task = report.tasks[0]!;
    expect(exitCode, `${stderr}\n${JSON.stringify(task, null, 2)}`).toBe(0);
    expect(task).toMatchObject({ status: "success", attempts: 1 });
    // The reviewer's CLI did write over out.txt in its copy: its tool said so to the model.
    const reviews = modelServer()
      .requests.slice(before)
      .filter((q) => q.main && isReview(q) && q.protocol === reviewer.protocol);
    expect(reviews.map((q) => q.step)).toContain(3);
    const review = task.attempt_history![0]!.review!;
    expect(review).toMatchObject({ agent: reviewer.preset, verdict: "approve", comments: 0 });
    expect(review.discarded).toContain("out.txt");
    expect(review.discarded).not.toContain(VERDICT);
    expect(task.gates.at(-1)).toMatchObject({ name: "review", passed: true });
    expect(task.gates.at(-1)!.detail).toContain(`what it changed in its copy was discarded: `);
    expect(task.gates.at(-1)!.detail).toContain("out.txt");
    expect(report.merge.result).toBe("success");
    expect(readFileSync(join(p.repo, "out.txt"), "utf8")).toBe(`${WRONG}\n`);
    expect(committed(p.repo, "out.txt")).toBe(`${WRONG}\n`);
    const discardedEvent = ledger(p.dir).find((e) => e.type === "task.reviewed")!;
    expect(discardedEvent.data.discarded).toEqual(review.discarded);
    measure(`${reviewer.preset} reviewing ${author.preset} (edits)`, p.dir, report);
  });

  it("an invalid verdict fails the gate: the task fails with reason review, its problem named, nothing merged", async () => {
    modelServer().setScript(
      model(() => [
        { write: VERDICT, content: JSON.stringify({ verdict: "maybe" }) },
        { reply: "Not sure.", usage: REVIEW_1 },
      ]),
    );
    const p = prepare(author, reviewer, { retries: 0 });
    const { exitCode, report, stderr } = await run(p);
    const task = report.tasks[0]!;
    expect(exitCode, `${stderr}\n${JSON.stringify(task, null, 2)}`).not.toBe(0);
    expect(task).toMatchObject({ status: "failed", reason: "review", attempts: 1 });
    expect(task.detail).toContain(`its reviewer ${reviewer.preset} wrote no valid verdict: verdict: `);
    expect(task.attempt_history![0]).toMatchObject({ reason: "review" });
    const review = task.attempt_history![0]!.review!;
    expect(review).toMatchObject({
      agent: reviewer.preset,
      verdict: "invalid",
      comments: 0,
      file: "artifacts/R/attempt-1/review.json",
      discarded: [],
    });
    expect(readFileSync(join(p.dir, review.file!), "utf8")).toBe('{"verdict":"maybe"}');
    expect(task.gates.at(-1)).toMatchObject({ name: "review", passed: false });
    expect(report.merge.result).not.toBe("success");
    expect(() => committed(p.repo, "out.txt")).toThrow();
    expect(ledger(p.dir).find((e) => e.type === "task.reviewed")?.data.verdict).toBe("invalid");
    measure(`${reviewer.preset} reviewing ${author.preset} (invalid)`, p.dir, report);
  });
});

describe("a person's rejection through a real CLI", () => {
  it("claude's result is rejected with a reason; its next attempt's request to the model carries it, and the approved fix merges", async () => {
    modelServer().setScript(model());
    const claude = RECIPES.claude;
    // No reviewer: a person decides, once each attempt passed its gates.
    const p = prepare(claude, claude, { retries: 1, approval: "result", success_criteria: {} });
    const waitsOn = (attempt: number) =>
      existsSync(join(p.dir, "events.jsonl")) &&
      ledger(p.dir).some((e) => e.type === "task.waiting_approval" && e.data.attempt === attempt);
    const before = modelServer().requests.length;
    const running = run(p);
    const bounded = async (attempt: number): Promise<void> => {
      for (const deadline = Date.now() + 60_000; !waitsOn(attempt); ) {
        if (Date.now() > deadline) throw new Error(`attempt ${attempt} never waited for approval`);
        await new Promise((r) => setTimeout(r, 50));
      }
    };
    await bounded(1);
    const rejected = await world.termorch(["reject", p.dir, "R", "--reason", COMMENT]);
    expect(rejected.exitCode, rejected.stderr).toBe(0);
    await bounded(2);
    const approved = await world.termorch(["approve", p.dir, "R"]);
    expect(approved.exitCode, approved.stderr).toBe(0);
    const { exitCode, report, stderr } = await running;
    expect(exitCode, stderr).toBe(0);
    expect(report.tasks[0]!.attempt_history!.map((h) => h.reason)).toEqual(["rejected", null]);
    // The reason reached the model only through attempt 2's feedback section, in claude's request.
    const second = modelServer()
      .requests.slice(before)
      .filter((q) => q.main && stringsOf(q.text).includes("### A person rejected the result"));
    expect(second.length).toBeGreaterThan(0);
    expect(stringsOf(second[0]!.text)).toContain(COMMENT);
    expect(committed(p.repo, "out.txt")).toBe(`${RIGHT}\n`);
  });
});
