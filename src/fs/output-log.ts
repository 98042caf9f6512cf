import { statSync } from "node:fs";
import { join } from "node:path";

/**
 * Which of a task's two logs holds its output, the one to read when it failed. A terminal
 * agent's (tty) is its stdout log, the transcript of both streams. Otherwise its stderr log when
 * that has anything, else its stdout log when that has (a program that reports its errors on
 * stdout), else the stderr log.
 */
export function outputLogOf(
  runDir: string,
  logs: { stdout: string; stderr: string },
  tty: boolean,
): "stdout" | "stderr" {
  if (tty) return "stdout";
  const size = (rel: string): number => {
    try {
      return statSync(join(runDir, rel)).size;
    } catch {
      return 0;
    }
  };
  return size(logs.stderr) === 0 && size(logs.stdout) > 0 ? "stdout" : "stderr";
}
