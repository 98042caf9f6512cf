// Completes package-lock.json with the platform packages a registry mirror did not serve.
//
// npm 11 leaves optional platform packages (other OSes' and CPUs' builds of biome, rollup...)
// out of the lockfile when the registry it installs from does not have them, and `npm ci`
// then refuses the lockfile ("Missing: ... from lock file"; npm/cli#8320, #9342). Each missing
// package gets an entry with its exact version and the os/cpu/libc it is for, so `npm ci`
// accepts the lockfile and skips it on every other platform, as it does with complete ones.
//   node scripts/complete-lockfile.js      (after any `npm install` that changed the lockfile)
//   node scripts/complete-lockfile.js test/agents-real/package-lock.json   (another lockfile)
import { readFileSync, writeFileSync } from "node:fs";

const OS = [
  "android",
  "darwin",
  "win32",
  "linux",
  "freebsd",
  "openbsd",
  "openharmony",
  "sunos",
  "aix",
  "netbsd",
];
const CPU = {
  arm64: "arm64",
  x64: "x64",
  ia32: "ia32",
  arm: "arm",
  ppc64: "ppc64",
  riscv64: "riscv64",
  s390x: "s390x",
  loong64: "loong64",
};

// Names some packages use for an OS instead of Node's (opencode's "windows").
const OS_ALIAS = { windows: "win32" };

function platformOf(name) {
  const parts = name
    .split("/")
    .pop()
    .split("-")
    .map((p) => OS_ALIAS[p] ?? p);
  const os = parts.find((p) => OS.includes(p));
  const cpu = parts.map((p) => CPU[p]).find(Boolean);
  if (!os || !cpu) return null;
  const libc = parts.some((p) => p.startsWith("musl"))
    ? "musl"
    : os === "linux" && parts.some((p) => p.startsWith("gnu"))
      ? "glibc"
      : null;
  return { os: [os], cpu: [cpu], ...(libc ? { libc: [libc] } : {}) };
}

const path = process.argv[2] ?? new URL("../package-lock.json", import.meta.url);
const lock = JSON.parse(readFileSync(path, "utf8"));
let added = 0;
for (const [key, entry] of Object.entries(lock.packages)) {
  for (const [name, range] of Object.entries(entry.optionalDependencies ?? {})) {
    const nested = `${key ? `${key}/` : ""}node_modules/${name}`;
    const hoisted = `node_modules/${name}`;
    if (lock.packages[nested] || lock.packages[hoisted]) continue;
    const platform = platformOf(name);
    const version = String(range).replace(/^[\^~=]/, "");
    if (!platform || !/^\d+\.\d+\.\d+/.test(version)) continue;
    lock.packages[hoisted] = { version, ...(entry.dev ? { dev: true } : {}), optional: true, ...platform };
    added++;
  }
}
lock.packages = Object.fromEntries(
  Object.entries(lock.packages).sort(([a], [b]) => (a === "" ? -1 : b === "" ? 1 : a.localeCompare(b))),
);
writeFileSync(path, `${JSON.stringify(lock, null, 2)}\n`);
console.log(`complete-lockfile: added ${added} platform package entries`);
