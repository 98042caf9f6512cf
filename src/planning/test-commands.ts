import { lstatSync, readFileSync } from "node:fs";
import { join } from "node:path";

/** npm's placeholder test script (`npm init`): no test at all. */
const NPM_PLACEHOLDER = /no test specified/;

/**
 * The commands a repository's tests seem to run with, from the files that say so (a hint in the
 * planner's prompt; the planner decides): package.json's test script, a Makefile's test target,
 * a Python project's pytest, cargo, go.
 */
export function testCommandsOf(workspace: string): string[] {
  const text = (name: string): string | null => {
    const path = join(workspace, name);
    if (!lstatSync(path, { throwIfNoEntry: false })?.isFile()) return null;
    try {
      return readFileSync(path, "utf8").slice(0, 256 * 1024);
    } catch {
      return null;
    }
  };
  const found: string[] = [];
  const pkg = text("package.json");
  if (pkg !== null)
    try {
      const test = (JSON.parse(pkg) as { scripts?: { test?: unknown } }).scripts?.test;
      if (typeof test === "string" && !NPM_PLACEHOLDER.test(test)) found.push("npm test");
    } catch {
      // Not JSON: no hint.
    }
  if (/^test\s*:/m.test(text("Makefile") ?? "")) found.push("make test");
  const py = [text("pyproject.toml"), text("setup.cfg"), text("pytest.ini"), text("tox.ini")].join("\n");
  if (/pytest/.test(py)) found.push("python3 -m pytest");
  if (text("Cargo.toml") !== null) found.push("cargo test");
  if (text("go.mod") !== null) found.push("go test ./...");
  return found;
}
