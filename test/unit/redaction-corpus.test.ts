// The one redaction and capping corpus (test/corpus/redaction.json, rules in src/redact/RULES.md),
// run through every engine: TypeScript's (Redactor + CappedLog, which gate logs use) and the pane
// supervisor's Perl (its own subs, the code that writes an agent's logs).
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, describe, expect, it } from "vitest";
import { CappedLog } from "../../src/fs/capped-log.js";
import { Redactor } from "../../src/redact/redactor.js";

type Bytes = string | { hex: string } | { repeat: string; times: number } | Bytes[];
interface Case {
  name: string;
  sources?: string[];
  patterns?: string[];
  secrets?: string[];
  max_bytes?: number;
  chunks: Bytes[];
  expected: Bytes;
}

const corpusFile = fileURLToPath(new URL("../corpus/redaction.json", import.meta.url));
const supervisor = fileURLToPath(new URL("../../src/tmux/supervisor.pl", import.meta.url));
const { cases } = JSON.parse(readFileSync(corpusFile, "utf8")) as { cases: Case[] };
const dir = mkdtempSync(join(tmpdir(), "redaction-corpus-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function bytes(b: Bytes): Buffer {
  if (typeof b === "string") return Buffer.from(b, "utf8");
  if (Array.isArray(b)) return Buffer.concat(b.map(bytes));
  if ("hex" in b) return Buffer.from(b.hex, "hex");
  return Buffer.from(b.repeat.repeat(b.times), "utf8");
}

function redactorOf(c: Case): Redactor {
  return c.sources ? new Redactor(c.sources) : Redactor.from(c.patterns ?? [], c.secrets ?? []);
}

/**
 * Feeds the supervisor's own log engine (supervisor.pl, `require`d: then it only defines its subs)
 * the frames "LENGTH\n" + bytes on stdin, one log_feed per chunk, as its main loop does per read.
 */
const FEED = `
  my ($supervisor, $settings) = @ARGV;
  require $supervisor;
  my $spec = read_settings($settings);
  my $error = use_patterns($spec->{redact});
  die "$error\\n" if $error;
  my $log = log_open($spec->{stdout_log}, $spec->{max_log_bytes});
  binmode STDIN;
  while (defined(my $len = <STDIN>)) {
    read(STDIN, my $chunk, $len) == $len or die "short frame\\n";
    log_feed($log, $chunk);
  }
  log_close($log);
  die "$log->{failed}\\n" if $log->{failed};`;

/** How session.ts writes a launch-file value. */
const enc = (v: string): string =>
  v.replace(/[%\n\r\0]/g, (ch) => `%${ch.charCodeAt(0).toString(16).padStart(2, "0")}`);

/** Shows where two byte strings part, instead of megabytes of both. */
function expectSame(got: Buffer, want: Buffer): void {
  if (got.equals(want)) return;
  let at = 0;
  while (at < got.length && at < want.length && got[at] === want[at]) at += 1;
  const around = (b: Buffer) => JSON.stringify(b.subarray(Math.max(0, at - 40), at + 40).toString("latin1"));
  expect(`${got.length} bytes, from byte ${at}: ${around(got)}`).toBe(
    `${want.length} bytes, from byte ${at}: ${around(want)}`,
  );
}

describe("the redaction corpus", () => {
  it("has cases", () => expect(cases.length).toBeGreaterThan(20));

  describe.each(cases.map((c, i) => [c.name, c, i] as const))("%s", (_name, c, i) => {
    it("TypeScript: Redactor + CappedLog", async () => {
      const path = join(dir, `ts-${i}.log`);
      const log = new CappedLog(path, redactorOf(c), c.max_bytes ?? 0);
      for (const chunk of c.chunks) log.write(bytes(chunk));
      await log.close();
      expectSame(readFileSync(path), bytes(c.expected));
    });

    it("Perl: the pane supervisor's log engine", () => {
      const path = join(dir, `perl-${i}.log`);
      const settings = join(dir, `perl-${i}.settings`);
      const lines = [`stdout_log=${enc(path)}`, `max_log_bytes=${c.max_bytes ?? 0}`];
      for (const source of redactorOf(c).sources) lines.push(`redact=${enc(source)}`);
      writeFileSync(settings, `${lines.join("\n")}\n`);
      const frames = c.chunks.flatMap((chunk) => {
        const b = bytes(chunk);
        return [Buffer.from(`${b.length}\n`), b];
      });
      const r = spawnSync("perl", ["-e", FEED, supervisor, settings], { input: Buffer.concat(frames) });
      expect(r.stderr.toString()).toBe("");
      expect(r.status).toBe(0);
      expectSame(readFileSync(path), bytes(c.expected));
    });
  });
});
