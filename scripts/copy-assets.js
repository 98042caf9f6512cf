// Copies non-TypeScript runtime assets (the pane supervisor, the gate watchdog, serve's page) next to the compiled modules.
import { cpSync, readdirSync, statSync } from "node:fs";
import { join, relative } from "node:path";

const ASSET = /\.(pl|sh)$/;
/** `termorch serve`'s page: browser files, served as they are. */
const STATIC = join("src", "serve", "static");
function walk(dir) {
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) walk(path);
    else if (ASSET.test(name) || dir === STATIC) cpSync(path, join("dist", relative("src", path)));
  }
}
walk("src");
