import { spawn } from "node:child_process";
import { existsSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { BIN, cliEnv, ROOT, termorch, testFile, waitFor, writeAssignments } from "./harness.js";

const { socket, workspace } = testFile("cli-output");

interface Piped {
  code: number | null;
  signal: NodeJS.Signals | null;
  /** The other stream, read to its end. */
  rest: string;
}

/**
 * Runs the CLI with one of its outputs read up to its first line and then closed, like
 * `termorch ... | head -1`; the other output is read whole.
 */
function firstLineThenClose(
  args: string[],
  closing: "stdout" | "stderr",
): { closed: Promise<void>; ended: Promise<Piped> } {
  let closed: () => void = () => {};
  const whenClosed = new Promise<void>((resolve) => {
    closed = resolve;
  });
  const ended = new Promise<Piped>((resolve, reject) => {
    const child = spawn(process.execPath, [BIN, ...args], {
      cwd: ROOT,
      env: { ...process.env, ...cliEnv(socket) },
      stdio: ["ignore", "pipe", "pipe"],
    });
    const early = closing === "stdout" ? child.stdout : child.stderr;
    const other = closing === "stdout" ? child.stderr : child.stdout;
    let seen = "";
    early.on("data", (chunk: Buffer) => {
      seen += chunk.toString("utf8");
      if (seen.includes("\n") && !early.destroyed) {
        early.destroy();
        closed();
      }
    });
    let rest = "";
    other.on("data", (chunk: Buffer) => {
      rest += chunk.toString("utf8");
    });
    child.on("error", reject);
    child.on("close", (code, signal) => resolve({ code, signal, rest }));
  });
  return Object.assign(
    ended.then((r) => r),
    { closed: whenClosed, ended },
  );
}

/** An assignments file of a long chain: `validate` prints one line per wave, in many writes. */
function chain(dir: string, n: number): string {
  return writeAssignments(
    dir,
    Array.from({ length: n }, (_, i) => ({ id: `T${i}`, dependencies: i ? [`T${i - 1}`] : [] })),
  );
}

describe("a reader that goes away", () => {
  it("ends every command quietly, with its own exit code", async () => {
    const { dir } = workspace();
    const file = chain(dir, 60);
    const invalid = join(dir, "invalid.json");
    writeFileSync(
      invalid,
      JSON.stringify({ tasks: Array.from({ length: 40 }, (_, i) => ({ id: `bad id ${i}` })) }),
    );
    // The failure was intermittent (2 of 3 tries): many tries of the commands that write in
    // many pieces (a single write smaller than the pipe's buffer cannot fail this way).
    for (let i = 0; i < 8; i++) {
      const validate = await firstLineThenClose(["validate", file], "stdout").ended;
      expect(validate).toMatchObject({ code: 0, signal: null, rest: "" });
      // The problems go to stderr: an uncaught EPIPE there would exit 1, not 2.
      const problems = await firstLineThenClose(["validate", invalid], "stderr").ended;
      expect(problems).toMatchObject({ code: 2, signal: null, rest: "" });
    }
    for (const args of [["schema", "report"], ["--help"], ["validate", file, "--json"]]) {
      expect(await firstLineThenClose(args, "stdout").ended).toMatchObject({
        code: 0,
        signal: null,
        rest: "",
      });
    }
  });

  it("ends `logs` of a long log, and `logs --follow`, when the reader goes away", async () => {
    const { dir } = workspace();
    const [go, never] = [join(dir, "go"), join(dir, "never")];
    const wait = (f: string): string => `while [ ! -e ${f} ]; do sleep 0.05; done`;
    const file = writeAssignments(dir, [
      { id: "chatty", env: { SAY: "x".repeat(99), LINES: "5000" } },
      {
        id: "waiting",
        command: ["bash", "-c", `echo first; ${wait(go)}; echo second; echo third; ${wait(never)}`],
      },
    ]);
    const run = termorch(["run", file, "--max-parallel", "2"], { socket });
    await waitFor(() => existsSync(join(dir, "status", "chatty.success")), 60_000, "chatty done");
    for (let i = 0; i < 5; i++) {
      const logs = await firstLineThenClose(["logs", "chatty", "--run", dir], "stdout").ended;
      expect(logs).toMatchObject({ code: 0, signal: null, rest: "" });
    }
    // A follow learns that its reader left at its next write (like `tail -f | head -1`): then it
    // stops, though the task is still running.
    const follow = firstLineThenClose(["logs", "waiting", "--run", dir, "--follow"], "stdout");
    await follow.closed;
    writeFileSync(go, "");
    expect(await follow.ended).toMatchObject({ code: 0, signal: null, rest: "" });
    expect(existsSync(join(dir, "status", "waiting.running"))).toBe(true);
    writeFileSync(never, "");
    expect((await run).exitCode).toBe(0);
  });
});

describe("output wording", () => {
  it("counts in the singular and the plural", async () => {
    const { dir } = workspace();
    const one = writeAssignments(dir, [{ id: "A" }], {}, "one.json");
    expect((await termorch(["validate", one], { socket })).stdout).toContain("valid, 1 task in 1 wave\n");
    const three = writeAssignments(
      dir,
      [{ id: "A" }, { id: "B" }, { id: "C", dependencies: ["A"] }],
      {},
      "three.json",
    );
    expect((await termorch(["validate", three], { socket })).stdout).toContain("valid, 3 tasks in 2 waves\n");
  });

  it("prints one header for a dry run", async () => {
    const { dir } = workspace();
    const file = writeAssignments(dir, [{ id: "A" }]);
    const result = await termorch(["run", file, "--dry-run"], { socket });
    expect(result.exitCode).toBe(0);
    const headers = result.stderr.split("\n").filter((l) => l.startsWith("termorch:"));
    expect(headers).toEqual([
      expect.stringMatching(/^termorch: dry run of \w+: 1 task in 1 wave \(nothing started\)$/),
    ]);
  });
});
