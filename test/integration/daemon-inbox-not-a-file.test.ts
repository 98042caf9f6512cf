import { execFileSync } from "node:child_process";
import { chmodSync, existsSync, mkdirSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { daemonTestFile } from "./daemon-harness.js";
import { waitFor } from "./harness.js";

const { home, startDaemon, ready, job, answer, readAnswer, logOf } = daemonTestFile("inbox-not-a-file");

// Found by the input campaign (test/reliability/input.mjs, the daemon's inbox, seed 2 --smoke):
// a FIFO or a link to /dev/zero in the inbox blocked the daemon's reads for good (no answer to
// anything after, and SIGTERM did not end it); a file without read permission, a dangling
// symlink and a symlink loop were never seen, so never answered.
describe("daemon: inbox files that are not files are answered, and the daemon goes on", () => {
  it("answers a FIFO, a device, an unreadable file, a dangling link and a link loop with exit 2; then runs a valid file", async () => {
    const h = home();
    const inbox = join(h, "inbox");
    mkdirSync(inbox, { recursive: true });
    execFileSync("mkfifo", [join(inbox, "fifo.json")]);
    symlinkSync("/dev/zero", join(inbox, "zero.json"));
    writeFileSync(join(inbox, "locked.json"), "{}");
    chmodSync(join(inbox, "locked.json"), 0);
    symlinkSync("nowhere.json", join(inbox, "dangling.json"));
    symlinkSync("loop.json", join(inbox, "loop.json"));
    const d = startDaemon(h);
    await ready(h);
    for (const id of ["fifo", "zero", "locked", "dangling", "loop"]) {
      await waitFor(() => existsSync(answer(h, id)), 20_000, `the answer to ${id}.json`).catch(() => {
        throw new Error(`no answer to ${id}.json; log:\n${logOf(h)}`);
      });
      const report = readAnswer(h, id);
      expect(report.exit_code, id).toBe(2);
      expect(report.summary.completed).toBe(false);
      expect(report.error?.problems[0]?.file).toBe(join(h, "runs", id, "assignments.json"));
    }
    const ok = job(h, "still-running", [{ id: "A" }]);
    ok.drop();
    await waitFor(() => existsSync(answer(h, "still-running")), 60_000, "the valid file's answer").catch(
      () => {
        throw new Error(`no answer to the valid file; log:\n${logOf(h)}`);
      },
    );
    expect(readAnswer(h, "still-running").exit_code).toBe(0);
    d.kill("SIGTERM");
    expect((await d).exitCode).toBe(0);
  }, 120_000);
});
