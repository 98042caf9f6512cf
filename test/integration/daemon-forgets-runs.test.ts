import {
  existsSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { execa } from "execa";
import { afterAll, describe, expect, it } from "vitest";
import { BIN, cliEnv, killServer, uniqueSocket, waitFor } from "./harness.js";

// A long-running daemon must keep nothing per run once the run is answered, or its memory grows
// with every file dropped (the soak campaign's concern, test/reliability/soak.mjs). It kept the
// id of every run whose answer it wrote itself (an invalid file, a run that failed to complete)
// in its set of runs answered through onReport, which only ever removed the others. Looked for in
// a heap snapshot (taking one collects garbage first): the run ids must be gone from the heap.
const socket = uniqueSocket("daemon-forgets");
const dirs: string[] = [];
afterAll(() => {
  killServer(socket);
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

describe("termorch daemon", () => {
  it("keeps no trace of answered invalid runs in its heap", async () => {
    const dir = mkdtempSync(join(tmpdir(), "termorch-forgets-"));
    dirs.push(dir);
    const home = join(dir, "home");
    const prefix = `forgotten${Math.random().toString(36).slice(2, 8)}`;
    const daemon = execa(process.execPath, ["--heapsnapshot-signal=SIGUSR2", BIN, "daemon", "--home", home], {
      reject: false,
      cwd: dir,
      env: cliEnv(socket),
    });
    try {
      const log = join(home, "logs", "termorch.log");
      const logText = () => (existsSync(log) ? readFileSync(log, "utf8") : "");
      await waitFor(() => logText().includes("watching the inbox"), 30_000, "the daemon to watch its inbox");
      // Invalid (no tasks): answered by the daemon itself, never run.
      const drop = (id: string): void => {
        const tmp = join(home, "inbox", `.${id}.tmp`);
        writeFileSync(tmp, JSON.stringify({ run_id: id, tasks: [] }));
        renameSync(tmp, join(home, "inbox", `${id}.json`));
      };
      const finished = async (count: number): Promise<void> => {
        await waitFor(
          () => (logText().match(/"msg":"run finished"/g) ?? []).length >= count,
          60_000,
          "every run to be answered and finished",
        );
      };
      const n = 12;
      for (let i = 0; i < n; i++) drop(`${prefix}-${i}`);
      await finished(n);
      // One more run, not looked for, once those are done: V8 keeps the subject of the last
      // regular expression matched (its regexp_last_match_info), which may be a run's id.
      drop("last");
      await finished(n + 1);
      expect(readdirSync(join(home, "outbox"))).toHaveLength(n + 1);
      daemon.kill("SIGUSR2");
      const snapshot = await waitFor(
        () => readdirSync(dir).find((f) => f.endsWith(".heapsnapshot") && !f.includes(".tmp")),
        60_000,
        "the heap snapshot",
      );
      // Written in one go by V8; parsed once complete.
      const parsed = await waitFor(
        () => {
          try {
            return JSON.parse(readFileSync(join(dir, snapshot), "utf8")) as { strings: string[] };
          } catch {
            return null;
          }
        },
        60_000,
        "a complete heap snapshot",
      );
      const kept = parsed.strings.filter((s) => s.startsWith(`${prefix}-`) && /^[\w-]+$/.test(s));
      expect(kept).toEqual([]);
    } finally {
      daemon.kill("SIGKILL");
      await daemon;
    }
  });
});
