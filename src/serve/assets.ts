import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

/** A file the dashboard serves, read once at start. */
export interface Asset {
  type: string;
  body: Buffer;
}

/**
 * The page's own files (src/serve/static/, copied next to the compiled modules by
 * scripts/copy-assets.js) and xterm.js with its stylesheet from the installed @xterm/xterm
 * package: nothing comes from a CDN. Paths are taken relative to this module, which sits in
 * dist/serve/ or is the CLI's bundle in dist/cli/: `../serve/static/` is the same folder from both.
 */
export function loadAssets(): { index: string; files: Map<string, Asset> } {
  const here = dirname(fileURLToPath(import.meta.url));
  const staticDir = join(here, "..", "serve", "static");
  const xtermMain = createRequire(import.meta.url).resolve("@xterm/xterm");
  const xtermRoot = join(dirname(xtermMain), "..");
  const files = new Map<string, Asset>([
    [
      "/assets/app.js",
      { type: "text/javascript; charset=utf-8", body: readFileSync(join(staticDir, "app.js")) },
    ],
    ["/assets/app.css", { type: "text/css; charset=utf-8", body: readFileSync(join(staticDir, "app.css")) }],
    ["/assets/xterm.js", { type: "text/javascript; charset=utf-8", body: readFileSync(xtermMain) }],
    [
      "/assets/xterm.css",
      { type: "text/css; charset=utf-8", body: readFileSync(join(xtermRoot, "css", "xterm.css")) },
    ],
  ]);
  return { index: readFileSync(join(staticDir, "index.html"), "utf8"), files };
}
