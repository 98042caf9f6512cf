import { copyFileSync, existsSync, mkdirSync } from "node:fs";
import { join } from "node:path";
import puppeteer, { type Browser, type Page } from "puppeteer-core";
import { ROOT } from "../integration/harness.js";
import { CHROMIUM } from "../needs.js";

/**
 * Debian's `chromium` (test/needs.ts: CI installs it, `$CHROMIUM` names another binary), started
 * headless the way the project's tests must start it.
 */

export const CHROMIUM_FLAGS = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--no-first-run",
  "--disable-background-networking",
];

/** Where tests put their screenshots: part of the test's output, kept after the run. */
export const SCREENSHOTS = join(ROOT, "test-output", "screenshots");

export async function launchChromium(): Promise<Browser> {
  return puppeteer.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: CHROMIUM_FLAGS,
    // A test's own user-data folder: nothing shared with another test file or a user's profile.
    timeout: 60_000,
  });
}

/** Everything a page said on its console at level error, and every uncaught error and failed request. */
export function collectPageErrors(page: Page): string[] {
  const errors: string[] = [];
  page.on("console", (m) => {
    if (m.type() === "error") errors.push(`console: ${m.text()}`);
  });
  page.on("pageerror", (e) => errors.push(`pageerror: ${e instanceof Error ? e.message : String(e)}`));
  page.on("requestfailed", (r) => errors.push(`requestfailed: ${r.url()} ${r.failure()?.errorText ?? ""}`));
  return errors;
}

/** Saves a full-page screenshot under test-output/screenshots/ and returns its path. */
export async function screenshot(page: Page, name: string): Promise<string> {
  mkdirSync(SCREENSHOTS, { recursive: true });
  const path = join(SCREENSHOTS, `${name}.png`);
  await page.screenshot({ path, fullPage: true });
  return path;
}

/**
 * The picture of a view in the README and docs/guides/operators.md (docs/img/<name>.png, checked in) comes from a test's
 * screenshot: refreshed on request only (`UPDATE_DOCS_IMG=1`), so a test run leaves tracked files alone.
 */
export function keepForDocs(shot: string, name: string): void {
  const docsImg = join(ROOT, "docs", "img", `${name}.png`);
  if (process.env.UPDATE_DOCS_IMG !== "1" && existsSync(docsImg)) return;
  mkdirSync(join(ROOT, "docs", "img"), { recursive: true });
  copyFileSync(shot, docsImg);
}
