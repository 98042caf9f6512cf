// The supervisor's logs: separate streams without loss, redaction, the size cap.
import { readFile } from "node:fs/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { TmuxServer } from "../../src/tmux/server.js";
import { makeTmpDir, removeDir, runnerOf, taskSpec, testServer, waitFor } from "../fixtures/tmux-helpers.js";

let server: TmuxServer;
let root: string;

beforeAll(async () => {
  server = testServer();
  root = await makeTmpDir();
});

afterAll(async () => {
  await server.kill();
  await removeDir(root);
});

/** Writes N numbered lines to stdout and N to stderr, interleaved, as fast as it can. */
const TWO_STREAMS =
  'my $n = shift; for my $i (1 .. $n) { print STDOUT "out $i\\n"; print STDERR "err $i\\n" }';

function expectNumbered(text: string, prefix: string, n: number): void {
  const lines = text.split("\n");
  expect(lines.pop()).toBe("");
  expect(lines.length).toBe(n);
  for (let i = 0; i < n; i += 1) {
    if (lines[i] !== `${prefix} ${i + 1}`) expect(lines[i]).toBe(`${prefix} ${i + 1}`);
  }
}

describe("logs", () => {
  it("keeps 20,000 + 20,000 lines in separate logs, complete in 5 of 5 runs", async () => {
    const n = 20_000;
    for (let run = 0; run < 5; run += 1) {
      const spec = taskSpec(root, ["perl", "-e", TWO_STREAMS, String(n)]);
      const exit = await (await runnerOf(server).launch(spec)).exited;
      expect(exit).toMatchObject({ exit_code: 0, truncated: false });
      const [out, err] = await Promise.all([
        readFile(spec.stdoutLog, "utf8"),
        readFile(spec.stderrLog, "utf8"),
      ]);
      expectNumbered(out, "out", n);
      expectNumbered(err, "err", n);
      expect(exit.stdout_bytes).toBe(Buffer.byteLength(out));
      expect(exit.stderr_bytes).toBe(Buffer.byteLength(err));
      await server.killSession(spec.session);
    }
  });

  it("redacts a literal secret and a pattern in both logs; the pane shows them raw", async () => {
    const secret = "hunter2.(x)*";
    const script = [
      'print "stdout has $ENV{API_KEY} and Bearer abcdefgh12345678 inline\\n";',
      'print STDERR "stderr has $ENV{API_KEY}\\nand bearer zyxwvuts98765432\\n";',
      // A secret split across two writes (and pipe reads) must still be caught.
      '$| = 1; print "split: hunt"; select undef, undef, undef, 0.2; print "er2.(x)* done\\n";',
      'print "no newline at the end: $ENV{API_KEY}";',
    ].join(" ");
    const escaped = secret.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
    const spec = taskSpec(root, ["perl", "-e", script], {
      env: { PATH: "/usr/bin:/bin", API_KEY: secret },
      redact: [escaped, "(?i)bearer\\s+[a-z0-9]{8,}"],
    });
    const exit = await (await runnerOf(server).launch(spec)).exited;
    expect(exit.exit_code).toBe(0);
    const out = await readFile(spec.stdoutLog, "utf8");
    const err = await readFile(spec.stderrLog, "utf8");
    expect(out).toBe(
      "stdout has [REDACTED] and [REDACTED] inline\nsplit: [REDACTED] done\nno newline at the end: [REDACTED]",
    );
    expect(err).toBe("stderr has [REDACTED]\nand [REDACTED]\n");
    const pane = await waitFor(async () => {
      const text = await server.capturePane(spec.session);
      return text.includes("no newline at the end") ? text : null;
    });
    expect(pane).toContain(`stdout has ${secret}`);
    expect(pane).toContain("Bearer abcdefgh12345678");
  });

  it("caps each log with a marker and keeps draining", async () => {
    const spec = taskSpec(root, ["perl", "-e", TWO_STREAMS, "5000"], { maxLogBytes: 1000 });
    const exit = await (await runnerOf(server).launch(spec)).exited;
    expect(exit).toMatchObject({ exit_code: 0, truncated: true });
    const out = await readFile(spec.stdoutLog, "utf8");
    const marker = "\n[termorch: log truncated at 1000 bytes]\n";
    expect(out.endsWith(marker)).toBe(true);
    expect(Buffer.byteLength(out)).toBe(1000 + marker.length);
    expect(out.startsWith("out 1\nout 2\n")).toBe(true);
    expect((await readFile(spec.stderrLog, "utf8")).endsWith(marker)).toBe(true);
    // Every byte was still received from the agent.
    expect(exit.stdout_bytes).toBe(Array.from({ length: 5000 }, (_, i) => `out ${i + 1}\n`).join("").length);
  });

  it("redacts a private key printed over several lines", async () => {
    const key = [
      "-----BEGIN OPENSSH PRIVATE KEY-----",
      "b3BlbnNzaC1rZXktdjEAAAAA",
      "QyNTUxOQAAACBmb29iYXI=",
      "-----END OPENSSH PRIVATE KEY-----",
    ];
    const spec = taskSpec(root, ["printf", "%s\\n", "before", ...key, "after"], {
      redact: ["unrelated-pattern"],
    });
    const exit = await (await runnerOf(server).launch(spec)).exited;
    expect(exit.exit_code).toBe(0);
    expect(await readFile(spec.stdoutLog, "utf8")).toBe(
      "before\n[REDACTED]\n[REDACTED]\n[REDACTED]\n[REDACTED]\nafter\n",
    );
  });

  it("fails closed on a redaction pattern perl cannot compile", async () => {
    const spec = taskSpec(root, ["sh", "-c", "echo should-not-run"], { redact: ["(unclosed"] });
    const exit = await (await runnerOf(server).launch(spec)).exited;
    expect(exit).toMatchObject({ exit_code: 125, launch_failed: true });
    expect(exit.detail).toMatch(/redaction pattern 1 does not compile/);
    expect(await readFile(spec.stdoutLog, "utf8").catch(() => "")).toBe("");
  });

  it("flushes a partial line longer than 1 MB and keeps binary bytes intact", async () => {
    const spec = taskSpec(
      root,
      ["perl", "-e", 'binmode STDOUT; print "a" x 3_000_000, "\\xff\\x00\\xfe\\n"'],
      {
        redact: ["zzz"],
      },
    );
    const exit = await (await runnerOf(server).launch(spec)).exited;
    expect(exit.exit_code).toBe(0);
    const out = await readFile(spec.stdoutLog);
    expect(out.length).toBe(3_000_004);
    expect([...out.subarray(-4)]).toEqual([0xff, 0x00, 0xfe, 0x0a]);
  });

  it("waits for output of a background child, then ends leftovers before recording the exit", async () => {
    const spec = taskSpec(root, ["sh", "-c", "(sleep 0.3; echo late) & echo early"]);
    const exit = await (await runnerOf(server).launch(spec)).exited;
    expect(exit.exit_code).toBe(0);
    expect(await readFile(spec.stdoutLog, "utf8")).toBe("early\nlate\n");
  });
});
