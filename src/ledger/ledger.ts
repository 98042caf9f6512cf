import { createHash } from "node:crypto";
import { readFile, truncate } from "node:fs/promises";
import { z } from "zod";
import type { LedgerData, LedgerEntry, LedgerEntryType } from "../contract/ledger-events.js";
import { AppendFile } from "../fs/append-file.js";
import type { Redactor } from "../redact/redactor.js";
import { canonicalJson } from "./canonical.js";

export const LEDGER_SCHEMA_VERSION = 1;
/** `prev` of the first event. */
export const GENESIS = "0".repeat(64);

/** One line of events.jsonl. */
export const LedgerEvent = z.strictObject({
  schema_version: z.literal(LEDGER_SCHEMA_VERSION),
  seq: z.number().int().min(0),
  ts: z.string(),
  type: z.string().min(1),
  task_id: z.string().optional(),
  data: z.record(z.string(), z.unknown()),
  prev: z.string().regex(/^[0-9a-f]{64}$/),
  hash: z.string().regex(/^[0-9a-f]{64}$/),
});
export type LedgerEvent = z.infer<typeof LedgerEvent>;

/** SHA-256 over prev + the canonical line without its hash. */
export function hashOf(event: Omit<LedgerEvent, "hash">): string {
  return createHash("sha256").update(event.prev).update(canonicalJson(event)).digest("hex");
}

/**
 * The run's append-only, hash-chained record of decisions (docs/guides/run-directory.md: Interrupted runs, locks and the ledger). Each event is
 * one write() of one line to a file opened O_APPEND, so a crash leaves at most a torn last
 * line, which verification reports. Appends are synchronous (AppendFile), which also keeps the
 * chain in call order without a queue.
 */
export class Ledger {
  private seq = 0;
  private prev = GENESIS;
  private readonly file: AppendFile;

  private constructor(
    readonly path: string,
    private readonly redactor: Redactor,
    private readonly now: () => Date,
  ) {
    this.file = new AppendFile(path);
  }

  /** Opens (or creates) a ledger, continuing an existing chain. */
  static async open(path: string, redactor: Redactor, now: () => Date = () => new Date()): Promise<Ledger> {
    const ledger = new Ledger(path, redactor, now);
    let text = await readFile(path, "utf8").catch(() => "");
    if (text !== "" && !text.endsWith("\n")) {
      // A crash mid-append left a torn last line: it was never an event, so it goes.
      text = text.slice(0, text.lastIndexOf("\n") + 1);
      await truncate(path, Buffer.byteLength(text));
    }
    // Continue after the last well-formed event; verify-ledger still reports any damage before it.
    for (const line of text.split("\n").filter(Boolean).reverse()) {
      const event = LedgerEvent.safeParse(safeJson(line));
      if (!event.success) continue;
      ledger.seq = event.data.seq + 1;
      ledger.prev = event.data.hash;
      break;
    }
    return ledger;
  }

  /** Closes the file; a later append opens it again. */
  async close(): Promise<void> {
    this.file.close();
  }

  /** Appends one event of the run (contract/ledger-events.ts: the types and their data). */
  append<T extends LedgerEntryType>(type: T, data: LedgerData<T>, taskId?: string): Promise<LedgerEvent> {
    return this.record({ type, data } as LedgerEntry, taskId);
  }

  /** Appends an event given whole (its type known only at run time, e.g. a task's start). */
  record(entry: LedgerEntry, taskId?: string): Promise<LedgerEvent> {
    try {
      return Promise.resolve(this.appendNow(entry.type, entry.data, taskId));
    } catch (error) {
      return Promise.reject(error);
    }
  }

  private appendNow(type: string, data: Record<string, unknown>, taskId: string | undefined): LedgerEvent {
    const body: Omit<LedgerEvent, "hash"> = {
      schema_version: LEDGER_SCHEMA_VERSION,
      seq: this.seq,
      ts: this.now().toISOString(),
      type,
      ...(taskId === undefined ? {} : { task_id: taskId }),
      data: this.redactor.redactDeep(data),
      prev: this.prev,
    };
    // The canonical line sorts keys: "data" first, then "hash" (absent from the hashed body),
    // then the rest. Serialising data once serves both the hash and the line.
    const { data: d, ...rest } = body;
    const dataJson = canonicalJson(d);
    const restJson = canonicalJson(rest).slice(1);
    const hash = createHash("sha256")
      .update(body.prev)
      .update(`{"data":${dataJson},${restJson}`)
      .digest("hex");
    this.file.append(`{"data":${dataJson},"hash":"${hash}",${restJson}\n`);
    this.seq += 1;
    this.prev = hash;
    return { ...body, hash };
  }
}

export type LedgerCheck =
  | { ok: true; events: number }
  | { ok: false; line: number; seq: number | null; problem: string };

/** Checks the whole chain; on failure names the first broken line (1-based) and its seq. */
export async function verifyLedger(path: string): Promise<LedgerCheck> {
  const text = await readFile(path, "utf8");
  const lines = text.split("\n");
  if (lines.at(-1) === "") lines.pop();
  let prev = GENESIS;
  for (const [i, line] of lines.entries()) {
    const fail = (problem: string, seq: number | null = null): LedgerCheck => ({
      ok: false,
      line: i + 1,
      seq,
      problem,
    });
    let raw: unknown;
    try {
      raw = JSON.parse(line);
    } catch {
      return fail("not valid JSON (torn or edited line)");
    }
    const parsed = LedgerEvent.safeParse(raw);
    const seq = typeof (raw as { seq?: unknown })?.seq === "number" ? (raw as { seq: number }).seq : null;
    if (!parsed.success)
      return fail(`not a ledger event: ${parsed.error.issues[0]?.message ?? "invalid"}`, seq);
    const event = parsed.data;
    if (event.seq !== i)
      return fail(`seq ${event.seq} where ${i} was expected (a line was removed or reordered)`, event.seq);
    if (event.prev !== prev) return fail("prev does not match the previous line's hash", event.seq);
    const { hash, ...body } = event;
    if (hashOf(body) !== hash)
      return fail("hash does not match the line's content (the line was altered)", event.seq);
    prev = hash;
  }
  return { ok: true, events: lines.length };
}

/**
 * The ledger's events for a viewer (report.html, serve): leniently, since a live run may be
 * mid-append. A torn last line, and any line that is not an event, is left out; `verifyLedger`
 * is what reports damage. A missing file has no events.
 */
export async function readLedgerEvents(path: string): Promise<LedgerEvent[]> {
  const text = await readFile(path, "utf8").catch((error: unknown) => {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return "";
    throw error;
  });
  const events: LedgerEvent[] = [];
  for (const line of text.split("\n")) {
    if (line === "") continue;
    const event = LedgerEvent.safeParse(safeJson(line));
    if (event.success) events.push(event.data);
  }
  return events;
}

function safeJson(line: string): unknown {
  try {
    return JSON.parse(line);
  } catch {
    return null;
  }
}
