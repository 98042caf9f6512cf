import { execFileSync } from "node:child_process";
import { describe, expect, it } from "vitest";
import { REDACTED, Redactor } from "../../src/redact/redactor.js";

const secrets = ['pa"ss\\wörd é/x+1', "tab\there\nnew line", "emoji😀-$HOME@{x}(?{ die })", "[a-z]*.^%25~'!"];

/** The forms an agent may print a secret in (JSON.stringify, json.dumps, URL and form encodings). */
function forms(secret: string): string[] {
  const json = JSON.stringify(secret).slice(1, -1);
  const ascii = json.replace(
    /[\u007f-\uffff]/g,
    (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`,
  );
  const uri = encodeURIComponent(secret);
  return [
    secret,
    json,
    ascii,
    ascii.replace(/\\u[0-9a-f]{4}/g, (m) => `\\u${m.slice(2).toUpperCase()}`),
    json.replaceAll("/", "\\/"),
    uri,
    uri.replace(/%[0-9A-F]{2}/g, (m) => m.toLowerCase()),
    new URLSearchParams({ v: secret }).toString().slice(2),
  ].filter((f) => !f.includes("\n"));
}

/** Redacts each line with the supervisor's engine: Perl, over bytes, patterns compiled with qr//. */
function perlRedact(patterns: readonly string[], lines: readonly string[]): string[] {
  const script = `
    my ($n, @rest) = @ARGV;
    my @res = map { qr/$_/ } @rest[0 .. $n - 1];
    for my $line (@rest[$n .. $#rest]) { $line =~ s/$_/${REDACTED}/g for @res; print "$line\\n" }`;
  return execFileSync("perl", ["-e", script, String(patterns.length), ...patterns, ...lines], {
    encoding: "utf8",
  })
    .split("\n")
    .slice(0, -1);
}

describe("secret patterns", () => {
  it("match every common encoding of the secret, whole, in JavaScript", () => {
    for (const secret of secrets) {
      const r = Redactor.from([], [secret]);
      for (const form of forms(secret)) expect(r.redact(`<${form}>`), form).toBe(`<${REDACTED}>`);
    }
  });

  it("match the same in the supervisor's Perl, and compile there", () => {
    // What the supervisor is given: the redactor's own pattern sources.
    const patterns = Redactor.from([], secrets).sources;
    const lines = secrets.flatMap((s) => forms(s).map((f) => `<${f}>`));
    expect(perlRedact(patterns, lines)).toEqual(lines.map(() => `<${REDACTED}>`));
  });

  it("match a non-ASCII secret in byte-exact (latin1) text, as artifacts are redacted", () => {
    const secret = "wörd-é-😀";
    const bytes = Buffer.from(`x ${secret} y`, "utf8").toString("latin1");
    expect(Redactor.from([], [secret]).redact(bytes)).toBe(`x ${REDACTED} y`);
  });

  it("leave what merely resembles the secret alone", () => {
    const r = Redactor.from([], ['pa"ss wörd']);
    expect(r.redact("pa ss wörd pa%22ss_wörd pass wörd")).toBe("pa ss wörd pa%22ss_wörd pass wörd");
  });
});
