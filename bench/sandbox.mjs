// Sandboxed agents (issue 25): what the sandbox costs per task, against the same run without it
// in the same benchmark (interleaved), and the memory of the network relay (the allowlist's
// perl processes, outside and inside the sandbox) while an agent runs.
//   (a) 40 × `true` in a git workspace (a worktree each), max_parallel 4, no sandbox;
//   (b) the same with "sandbox": {"network": "none"};
//   (c) the same with an allowlist, so each task also runs the relay.
import { execFileSync } from "node:child_process";
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import {
  makeWorkspace,
  median,
  removeTemp,
  row,
  tempDir,
  termorchRun,
  uniqueSocket,
  writeAssignments,
} from "./lib.mjs";

const TRUE = execFileSync("bash", ["-c", "command -v true"], { encoding: "utf8" }).trim() || "/bin/true";
/** Tasks of each run and max_parallel; --smoke: 4 at 2. */
const sizesOf = (opts) => (opts.smoke ? { N: 4, P: 2 } : { N: 40, P: 4 });

async function once(sandbox, N, P) {
  const dir = tempDir("sandbox");
  makeWorkspace(dir, { git: true });
  const tasks = Array.from({ length: N }, (_, i) => ({
    id: `t${i}`,
    command: [TRUE],
    ...(sandbox ? { sandbox } : {}),
  }));
  const file = writeAssignments(dir, "sbx", tasks);
  const r = await termorchRun(file, uniqueSocket("sandbox"), ["--max-parallel", String(P)]);
  const ok = readdirSync(join(dir, "status")).filter((f) => f.endsWith(".success")).length;
  removeTemp(dir);
  if (ok !== N) throw new Error(`${ok} of ${N} tasks succeeded`);
  return r;
}

/** Resident memory (KiB) of every process running sandbox.pl, found while one agent waits. */
async function relayMemory() {
  const dir = tempDir("sandbox-mem");
  makeWorkspace(dir, { git: true });
  const file = writeAssignments(dir, "sbxmem", [
    {
      id: "wait",
      command: ["bash", "-c", 'while [ ! -e "$TERMORCH_ARTIFACTS_DIR/release" ]; do sleep 0.05; done'],
      sandbox: { network: ["127.0.0.1:9", "api.example.com"] },
    },
  ]);
  const runP = termorchRun(file, uniqueSocket("sandbox-mem"));
  let kib = null;
  const deadline = Date.now() + 20_000;
  while (kib === null && Date.now() < deadline) {
    const shims = [];
    for (const pid of readdirSync("/proc").filter((p) => /^\d+$/.test(p))) {
      try {
        // perl running the shim (bwrap's own command line names it too).
        const argv = readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0");
        if (argv[1]?.endsWith("sandbox.pl")) shims.push(pid);
      } catch {}
    }
    // Outside and inside, each with its accept loop: both ends are up.
    if (shims.length >= 2)
      kib = shims.reduce((sum, pid) => {
        const m = /VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
        return sum + (m ? Number(m[1]) : 0);
      }, 0);
    else await new Promise((r) => setTimeout(r, 50));
  }
  // The agent's artifacts folder, which the sandbox lets it see.
  mkdirSync(join(dir, "artifacts", "wait"), { recursive: true });
  writeFileSync(join(dir, "artifacts", "wait", "release"), "");
  await runP;
  removeTemp(dir);
  return kib;
}

export async function run(opts = {}) {
  const reps = opts.smoke || opts.quick ? 1 : 3;
  const { N, P } = sizesOf(opts);
  const plain = [];
  const none = [];
  const allow = [];
  // Interleaved, so a slow moment of the machine hits every variant alike.
  for (let i = 0; i < reps; i++) {
    plain.push(await once(null, N, P));
    none.push(await once({ network: "none" }, N, P));
    allow.push(await once({ network: ["127.0.0.1:9"] }, N, P));
  }
  const wall = (rs) => median(rs.map((r) => r.wall));
  const cpu = (rs) => median(rs.map((r) => r.cpu));
  const A = { wall: wall(plain), cpu: cpu(plain) };
  const B = { wall: wall(none), cpu: cpu(none) };
  const C = { wall: wall(allow), cpu: cpu(allow) };
  const perTask = (x) => ((x - A.wall) / N) * 1000;
  const kib = await relayMemory();
  const rows = [
    row(`sandbox ${N}×true P${P} git: (a) no sandbox, wall`, A.wall, "s"),
    row(`sandbox ${N}×true P${P} git: (b) network none, wall (b/a)`, B.wall, "s", { baseline: A.wall }),
    row(`sandbox ${N}×true P${P} git: (c) allowlist (relay), wall (c/a)`, C.wall, "s", { baseline: A.wall }),
    row("sandbox: CPU per task, (b) network none (b/a)", (B.cpu / N) * 1000, "ms", {
      baseline: (A.cpu / N) * 1000,
    }),
    row("sandbox: CPU per task, (c) allowlist (c/a)", (C.cpu / N) * 1000, "ms", {
      baseline: (A.cpu / N) * 1000,
    }),
    row("sandbox: launch overhead per task, (b) network none", perTask(B.wall), "ms"),
    row("sandbox: launch overhead per task, (c) allowlist", perTask(C.wall), "ms"),
    row(
      "sandbox: relay memory per task (outside + inside perl, RSS)",
      kib === null ? null : kib / 1024,
      "MiB",
    ),
  ];
  return { name: "sandbox", rows, notes: [] };
}
