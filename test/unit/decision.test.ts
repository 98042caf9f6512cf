import { execFileSync } from "node:child_process";
import {
  existsSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { parseDecision } from "../../src/contract/decision.js";
import { jsonSchemaOf } from "../../src/contract/json-schema.js";
import { LedgerEntry } from "../../src/contract/ledger-events.js";
import { Redactor } from "../../src/redact/redactor.js";
import {
  clearDecision,
  DECISION_EXAMPLE,
  DECISION_IN_WORKTREE,
  type DecisionRead,
  decisionPath,
  decisionPlace,
  keepDecision,
  MAX_DECISION_BYTES,
  readDecision,
  takeDecision,
} from "../../src/task/decision.js";

// The agent's decision at $TERMORCH_DECISION (issue 36, item 4): the ledgerflow seed's envelope
// (sections 4 to 6), its validation, and how termorch finds, reads and keeps it.

const GOOD = {
  schema_version: "1.1",
  decision: { status: "blocked", reason: "the API key is not in the environment", confidence: 0.9 },
  trace: {
    claim: "cannot call the service",
    evidence: [{ type: "file", ref: "src/client.ts", note: "reads $API_KEY" }],
  },
  routing: { recommended_next_actor: "human", urgency: "high" },
};

type Envelope = {
  decision: Record<string, unknown>;
  trace: Record<string, unknown>;
  routing: Record<string, unknown>;
  [key: string]: unknown;
};

/** GOOD with `change` applied to a copy. */
function variant(change: (d: Envelope) => void): unknown {
  const copy = structuredClone(GOOD) as Envelope;
  change(copy);
  return copy;
}

function problems(value: unknown): string[] {
  const parsed = parseDecision(value);
  if (parsed.ok) throw new Error(`valid: ${JSON.stringify(value)}`);
  return parsed.problems;
}

describe("the decision envelope (contract)", () => {
  it("reads the seed's envelope as it is", () => {
    const parsed = parseDecision(GOOD);
    expect(parsed).toEqual({ ok: true, decision: GOOD });
  });

  it("reads status, reason and confidence at the top level as if under decision", () => {
    const { decision, ...rest } = GOOD;
    const parsed = parseDecision({ ...rest, ...decision });
    expect(parsed).toEqual({ ok: true, decision: GOOD });
  });

  it("refuses them in both places at once", () => {
    expect(problems({ ...GOOD, status: "completed" })).toEqual([
      "status given both at the top level and under decision: give them in one place",
    ]);
  });

  it("takes an envelope without schema_version, and refuses any other version than 1.1", () => {
    const { schema_version: _, ...unversioned } = GOOD;
    expect(parseDecision(unversioned).ok).toBe(true);
    expect(problems({ ...GOOD, schema_version: "2.0" })).toEqual([
      'schema_version: unknown version "2.0": termorch reads "1.1" (or none)',
    ]);
    // The seed's version is a string.
    expect(problems({ ...GOOD, schema_version: 1.1 })[0]).toMatch(/^schema_version: unknown version 1\.1/);
  });

  // Section 6: allowed status; confidence in [0,1]; non-empty reason/claim; typed evidence array.
  it("refuses a status outside the three", () => {
    expect(problems(variant((d) => (d.decision.status = "done")))).toEqual([
      'decision.status: Invalid option: expected one of "completed"|"escalate_to_max"|"blocked"',
    ]);
  });

  it.each([
    [1.01, "decision.confidence: Too big: expected number to be <=1"],
    [-0.1, "decision.confidence: Too small: expected number to be >=0"],
    ["0.5", "decision.confidence: Invalid input: expected number, received string"],
  ])("refuses confidence %j", (confidence, problem) => {
    expect(problems(variant((d) => (d.decision.confidence = confidence)))).toEqual([problem]);
  });

  it("takes confidence 0 and 1, and trace.confidence in [0, 1] only", () => {
    expect(parseDecision(variant((d) => (d.decision.confidence = 0))).ok).toBe(true);
    expect(parseDecision(variant((d) => (d.decision.confidence = 1))).ok).toBe(true);
    expect(problems(variant((d) => (d.trace.confidence = 2)))).toEqual([
      "trace.confidence: Too big: expected number to be <=1",
    ]);
  });

  it.each(["", "   \n"])("refuses an empty reason or claim (%j)", (empty) => {
    expect(problems(variant((d) => (d.decision.reason = empty)))).toEqual([
      "decision.reason: reason is empty",
    ]);
    expect(problems(variant((d) => (d.trace.claim = empty)))).toEqual(["trace.claim: claim is empty"]);
  });

  it("refuses evidence that is not a typed array, naming each bad item", () => {
    expect(problems(variant((d) => (d.trace.evidence = "src/client.ts")))).toEqual([
      "trace.evidence: Invalid input: expected array, received string",
    ]);
    expect(
      problems(
        variant((d) => (d.trace.evidence = ["src/client.ts", { type: "guess", ref: "x" }, { type: "uri" }])),
      ),
    ).toEqual([
      "trace.evidence[0]: Invalid input: expected object, received string",
      'trace.evidence[1].type: Invalid option: expected one of "file"|"text"|"uri"|"line_ref"',
      "trace.evidence[2].ref: missing",
    ]);
    expect(problems(variant((d) => (d.trace.evidence = [{ type: "text", ref: "" }])))).toEqual([
      "trace.evidence[0].ref: ref is empty",
    ]);
  });

  it("takes an empty evidence array and every evidence type", () => {
    expect(parseDecision(variant((d) => (d.trace.evidence = []))).ok).toBe(true);
    const typed = ["file", "text", "uri", "line_ref"].map((type) => ({ type, ref: "r" }));
    expect(parseDecision(variant((d) => (d.trace.evidence = typed))).ok).toBe(true);
  });

  it("takes a completed decision with an empty or no result.output (for a coding task the diff is the output)", () => {
    const completed = (result: unknown) =>
      variant((d) => {
        d.decision.status = "completed";
        d.result = result;
      });
    expect(parseDecision(completed({ output: "", notes: "see changes.patch" })).ok).toBe(true);
    expect(parseDecision(completed(undefined)).ok).toBe(true);
  });

  it("names what is missing, and where status, reason and confidence go", () => {
    expect(problems({})).toEqual([
      "trace: missing",
      "decision: missing (status, reason and confidence go under decision, or at the top level)",
    ]);
    expect(problems({ status: "blocked", reason: "r", confidence: 0.5 })).toEqual(["trace: missing"]);
  });

  it.each([[[]], ["blocked"], [null], [3]])("refuses %j: not an object", (value) => {
    expect(problems(value)).toEqual(["the decision is not a JSON object"]);
  });

  it("ignores fields it does not know (the seed adds agent_profile, hashes)", () => {
    expect(parseDecision({ ...GOOD, agent_profile: "worker", sha256: "ab" })).toEqual({
      ok: true,
      decision: GOOD,
    });
  });

  it("refuses a bad routing", () => {
    expect(problems(variant((d) => (d.routing.recommended_next_actor = "boss")))).toEqual([
      'routing.recommended_next_actor: Invalid option: expected one of "worker"|"planner"|"human"',
    ]);
  });

  it("shows the agent an example that passes", () => {
    expect(parseDecision(structuredClone(DECISION_EXAMPLE)).ok).toBe(true);
  });

  it("is in termorch schema: both forms, with their descriptions", () => {
    const schema = jsonSchemaOf("decision") as {
      anyOf: { properties: Record<string, { description?: string }>; required: string[] }[];
    };
    expect(schema.anyOf).toHaveLength(2);
    const [seed, flat] = schema.anyOf;
    expect(seed!.required.sort()).toEqual(["decision", "trace"]);
    expect(flat!.required.sort()).toEqual(["confidence", "reason", "status", "trace"]);
    expect(flat!.properties.status!.description).toMatch(/escalate_to_max: this needs a stronger agent/);
  });
});

const base = mkdtempSync(join(tmpdir(), "termorch-decision-"));
afterAll(() => rmSync(base, { recursive: true, force: true }));
let n = 0;

/** A task's places: a worktree (or none) and its artifacts folder, and a victim file outside both. */
function task(git = true) {
  const dir = join(base, String(n++));
  const worktree = join(dir, "wt");
  const artifactsDir = join(dir, "run", "artifacts", "t");
  mkdirSync(worktree, { recursive: true });
  mkdirSync(artifactsDir, { recursive: true });
  writeFileSync(join(dir, "victim.json"), JSON.stringify(GOOD));
  return {
    dir,
    runDir: join(dir, "run"),
    victim: join(dir, "victim.json"),
    where: { worktree: git ? worktree : null, cwd: git ? worktree : join(dir, "ws"), artifactsDir },
  };
}

describe("the decision file (task)", () => {
  it("is .termorch/decision.json in the worktree, else decision.json in the artifacts folder", () => {
    const g = task();
    expect(decisionPlace(g.where)).toEqual({ root: g.where.cwd, rel: DECISION_IN_WORKTREE });
    expect(decisionPath(g.where)).toBe(join(g.where.cwd, ".termorch", "decision.json"));
    const plain = task(false);
    expect(decisionPath(plain.where)).toBe(join(plain.where.artifactsDir, "decision.json"));
  });

  it("is none until the agent writes one; then valid, read in the seed's shape", () => {
    const t = task();
    expect(readDecision(t.where)).toEqual({ kind: "none" });
    mkdirSync(join(t.where.cwd, ".termorch"));
    const { decision, ...rest } = GOOD;
    writeFileSync(decisionPath(t.where), JSON.stringify({ ...rest, ...decision }));
    expect(readDecision(t.where)).toEqual({ kind: "valid", decision: GOOD, file: decisionPath(t.where) });
  });

  it("reads bad JSON and a schema failure as invalid, problems named, bytes kept for the quarantine", () => {
    const t = task(false);
    writeFileSync(decisionPath(t.where), "{ status: blocked }");
    const bad = readDecision(t.where);
    expect(bad).toMatchObject({ kind: "invalid", bytes: Buffer.from("{ status: blocked }") });
    expect((bad as { problems: string[] }).problems[0]).toMatch(/^not JSON: /);
    writeFileSync(decisionPath(t.where), JSON.stringify(variant((d) => (d.decision.confidence = 7))));
    expect(readDecision(t.where)).toMatchObject({
      kind: "invalid",
      problems: ["decision.confidence: Too big: expected number to be <=1"],
    });
  });

  it("never follows a link: the file as a link, or its folder as one, is invalid and the target untouched", () => {
    const t = task();
    mkdirSync(join(t.where.cwd, ".termorch"));
    symlinkSync(t.victim, decisionPath(t.where));
    const linked = readDecision(t.where);
    expect(linked).toMatchObject({ kind: "invalid", bytes: null });
    expect((linked as { problems: string[] }).problems[0]).toMatch(/symbolic link/);

    const u = task();
    const elsewhere = join(u.dir, "elsewhere");
    mkdirSync(elsewhere);
    writeFileSync(join(elsewhere, "decision.json"), JSON.stringify(GOOD));
    symlinkSync(elsewhere, join(u.where.cwd, ".termorch"));
    const viaFolder = readDecision(u.where);
    expect(viaFolder).toMatchObject({ kind: "invalid", bytes: null });
    expect((viaFolder as { problems: string[] }).problems[0]).toMatch(/symbolic link/);
    expect(readFileSync(t.victim, "utf8")).toBe(JSON.stringify(GOOD));
  });

  it("reads a fifo as invalid at once (never waits on it)", () => {
    const t = task(false);
    execFileSync("mkfifo", [decisionPath(t.where)]);
    const read = readDecision(t.where);
    expect(read).toMatchObject({ kind: "invalid", bytes: null });
    expect((read as { problems: string[] }).problems[0]).toMatch(/not a regular file/);
  });

  it("reads a file over 64 KiB as invalid, keeping no more than the bound", () => {
    const t = task(false);
    const padded = JSON.stringify({ ...GOOD, pad: "x".repeat(MAX_DECISION_BYTES) });
    writeFileSync(decisionPath(t.where), padded);
    const read = readDecision(t.where);
    expect(read).toMatchObject({ kind: "invalid", problems: [expect.stringMatching(/^larger than 64 KiB/)] });
    expect((read as { bytes: Buffer }).bytes.length).toBe(MAX_DECISION_BYTES);
    // At the bound it is read.
    writeFileSync(decisionPath(t.where), JSON.stringify(GOOD).padEnd(MAX_DECISION_BYTES, " "));
    expect(readDecision(t.where).kind).toBe("valid");
  });

  it("is cleared before an attempt: a file, a link (not its target) or a folder at its name goes; its folder is made", () => {
    const t = task();
    clearDecision(t.where);
    expect(lstatSync(join(t.where.cwd, ".termorch")).isDirectory()).toBe(true);
    writeFileSync(decisionPath(t.where), "{}");
    clearDecision(t.where);
    expect(existsSync(decisionPath(t.where))).toBe(false);
    symlinkSync(t.victim, decisionPath(t.where));
    clearDecision(t.where);
    expect(readDecision(t.where)).toEqual({ kind: "none" });
    expect(readFileSync(t.victim, "utf8")).toBe(JSON.stringify(GOOD));
    mkdirSync(join(decisionPath(t.where), "deep"), { recursive: true });
    clearDecision(t.where);
    expect(existsSync(decisionPath(t.where))).toBe(false);
  });

  it("refuses to clear through a folder that is a link", () => {
    const t = task();
    const elsewhere = join(t.dir, "elsewhere");
    mkdirSync(elsewhere);
    writeFileSync(join(elsewhere, "decision.json"), "theirs");
    symlinkSync(elsewhere, join(t.where.cwd, ".termorch"));
    expect(() => clearDecision(t.where)).toThrow(/symbolic link/);
    expect(readFileSync(join(elsewhere, "decision.json"), "utf8")).toBe("theirs");
  });
});

describe("keeping a decision", () => {
  const SECRET = "hunter2-very-secret";
  const redactor = Redactor.from([], [SECRET]);
  const ledger = () => {
    const events: { type: string; data: unknown; task?: string }[] = [];
    return {
      events,
      append: async (type: string, data: unknown, task?: string) => {
        // What the run's ledger would refuse, this one refuses too.
        LedgerEntry.parse({ type, data });
        events.push({ type, data, ...(task ? { task } : {}) });
        return {} as never;
      },
    };
  };
  const keep = (
    t: ReturnType<typeof task>,
    l: ReturnType<typeof ledger>,
    read: Exclude<DecisionRead, { kind: "none" }>,
    attempt = 2,
  ) =>
    keepDecision(
      { runDir: t.runDir, artifactsDir: t.where.artifactsDir, taskId: "t", attempt, redactor, ledger: l },
      read,
    );

  it("keeps a valid one redacted as attempt-<n>/decision.json, and records it in the ledger", async () => {
    const t = task();
    const l = ledger();
    const decision = variant((d) => (d.decision.reason = `the key ${SECRET} is revoked`));
    const parsed = parseDecision(decision);
    if (!parsed.ok) throw new Error("invalid");
    const kept = await keep(t, l, { kind: "valid", decision: parsed.decision, file: "x" });
    expect(kept).toBe("artifacts/t/attempt-2/decision.json");
    const text = readFileSync(join(t.runDir, kept), "utf8");
    expect(text).not.toContain(SECRET);
    expect(JSON.parse(text).decision.reason).toBe("the key [REDACTED] is revoked");
    expect(l.events).toEqual([
      {
        type: "task.decision",
        task: "t",
        data: {
          attempt: 2,
          kind: "valid",
          status: "blocked",
          reason: `the key ${SECRET} is revoked`,
          confidence: 0.9,
          recommended_next_actor: "human",
          file: kept,
        },
      },
    ]);
  });

  it("quarantines an invalid one's bytes, redacted, as attempt-<n>/decision.quarantined.json", async () => {
    const t = task();
    const l = ledger();
    const bytes = Buffer.from(`{"status": "maybe", "reason": "${SECRET}"}`);
    const kept = await keep(
      t,
      l,
      { kind: "invalid", problems: ["decision.status: bad"], file: "x", bytes },
      1,
    );
    expect(kept).toBe("artifacts/t/attempt-1/decision.quarantined.json");
    expect(readFileSync(join(t.runDir, kept), "utf8")).toBe('{"status": "maybe", "reason": "[REDACTED]"}');
    expect(l.events).toEqual([
      {
        type: "task.decision",
        task: "t",
        data: { attempt: 1, kind: "invalid", problems: ["decision.status: bad"], file: kept },
      },
    ]);
  });

  it("writes fresh: a link the agent left at the kept name is replaced, its target untouched", async () => {
    const t = task();
    mkdirSync(join(t.where.artifactsDir, "attempt-3"));
    symlinkSync(t.victim, join(t.where.artifactsDir, "attempt-3", "decision.quarantined.json"));
    await keep(t, ledger(), { kind: "invalid", problems: ["p"], file: "x", bytes: Buffer.from("nope") }, 3);
    expect(readFileSync(join(t.where.artifactsDir, "attempt-3", "decision.quarantined.json"), "utf8")).toBe(
      "nope",
    );
    expect(readFileSync(t.victim, "utf8")).toBe(JSON.stringify(GOOD));
  });

  it("keeps an empty quarantine when nothing could be read, and records the problems", async () => {
    const t = task();
    const l = ledger();
    const kept = await keep(t, l, {
      kind: "invalid",
      problems: ["not read: a link"],
      file: "x",
      bytes: null,
    });
    expect(kept).toBe("artifacts/t/attempt-2/decision.quarantined.json");
    expect(readFileSync(join(t.runDir, kept), "utf8")).toBe("");
    expect(l.events).toEqual([
      {
        type: "task.decision",
        task: "t",
        data: { attempt: 2, kind: "invalid", problems: ["not read: a link"], file: kept },
      },
    ]);
  });
});

describe("taking a decision (what the attempt loop calls once an attempt ended)", () => {
  const SECRET = "hunter2-very-secret";
  const redactor = Redactor.from([], [SECRET]);
  const ledger = () => {
    const types: string[] = [];
    return { types, append: async (type: string) => void types.push(type) as never };
  };
  const take = (t: ReturnType<typeof task>, l: ReturnType<typeof ledger>, attempt = 1) =>
    takeDecision(
      { runDir: t.runDir, artifactsDir: t.where.artifactsDir, taskId: "t", attempt, redactor, ledger: l },
      t.where,
    );
  const write = (t: ReturnType<typeof task>, value: unknown): void => {
    clearDecision(t.where);
    writeFileSync(decisionPath(t.where), typeof value === "string" ? value : JSON.stringify(value));
  };

  it("is none when the agent wrote nothing", async () => {
    const l = ledger();
    expect(await take(task(), l)).toEqual({ seen: { kind: "none" }, record: null, feedback: null });
    expect(l.types).toEqual([]);
  });

  it("gives the policy, the attempt record and the feedback their parts, redacted, and consumes the file", async () => {
    const t = task();
    const l = ledger();
    write(
      t,
      variant((d) => {
        d.decision.status = "escalate_to_max";
        d.decision.reason = `needs ${SECRET} rotated`;
        d.result = { notes: `try ${SECRET}` };
      }),
    );
    expect(await take(t, l, 3)).toEqual({
      seen: { kind: "valid", status: "escalate_to_max", reason: "needs [REDACTED] rotated", human: true },
      record: {
        status: "escalate_to_max",
        reason: "needs [REDACTED] rotated",
        confidence: 0.9,
        recommended_next_actor: "human",
        file: "artifacts/t/attempt-3/decision.json",
      },
      feedback: { status: "escalate_to_max", reason: "needs [REDACTED] rotated", notes: "try [REDACTED]" },
    });
    expect(l.types).toEqual(["task.decision"]);
    // Read once: a later attempt (a retry from this work, a set-up that fails) does not see it.
    expect(existsSync(decisionPath(t.where))).toBe(false);
    expect(await take(t, l, 4)).toEqual({ seen: { kind: "none" }, record: null, feedback: null });
  });

  it("gives an invalid one's problems to the policy and the record, with its quarantine", async () => {
    const t = task(false);
    write(
      t,
      variant((d) => (d.decision.confidence = 3)),
    );
    const taken = await take(t, ledger(), 2);
    expect(taken).toEqual({
      seen: { kind: "invalid", problems: ["decision.confidence: Too big: expected number to be <=1"] },
      record: {
        status: "invalid",
        reason: "decision.confidence: Too big: expected number to be <=1",
        confidence: null,
        recommended_next_actor: null,
        file: "artifacts/t/attempt-2/decision.quarantined.json",
      },
      feedback: null,
    });
    expect(existsSync(decisionPath(t.where))).toBe(false);
  });

  it("a blocked one that asks for a person is seen as such; feedback only carries an escalation", async () => {
    const t = task();
    write(t, GOOD);
    const taken = await take(t, ledger());
    expect(taken.seen).toEqual({
      kind: "valid",
      status: "blocked",
      reason: GOOD.decision.reason,
      human: true,
    });
    expect(taken.feedback).toBeNull();
  });

  it("finds the kept copy when the process that kept it died before the attempt's record", async () => {
    const t = task();
    write(t, GOOD);
    await take(t, ledger(), 5);
    // Resumed: the file is gone, its copy is there; nothing new is recorded.
    const l = ledger();
    const again = await take(t, l, 5);
    expect(again.seen).toMatchObject({ kind: "valid", status: "blocked", human: true });
    expect(again.record?.file).toBe("artifacts/t/attempt-5/decision.json");
    expect(l.types).toEqual([]);
    write(t, "not json");
    await take(t, ledger(), 6);
    expect((await take(t, ledger(), 6)).seen).toMatchObject({ kind: "invalid" });
  });
});
