// Copies non-TypeScript runtime assets (the pane supervisor, the gate watchdog) next to the compiled modules.
import { cpSync, readdirSync, statSync } from "node:fs";
import { join, relative } from "node:path";

const ASSET = /\.(pl|sh)$/;
function walk(dir) {
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) walk(path);
    else if (ASSET.test(name)) cpSync(path, join("dist", relative("src", path)));
  }
}
walk("src");
