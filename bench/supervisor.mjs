// 7. The pane supervisor: C or a script (issue 10, item 1). The perl supervisor termorch ships
// (dist/tmux/supervisor.pl, or wrapper.pl before the rewrite) against a C prototype of its
// hot path (bench/supervisor-c/supervisor.c, compiled here with `cc -O2`), both run outside tmux
// on launch files this benchmark writes, their pane output (stdout) to /dev/null:
// - per task: CPU (user+sys of the supervisor and its children, bash's `times`) of N sequential
//   runs whose agent is /bin/true, against `sh -c true` and /bin/true exec'ed directly;
// - per MB: 200 MB from `dd bs=256K` of a page-cached file through each supervisor with no
//   pattern, the 10 built-in token patterns, and those plus a secret literal and a configured
//   `(?i)password=\S+`, against dd straight to a file; no byte may be lost;
// - the C program's compile time and size, which patterns POSIX ERE cannot express, and a check
//   that on known inputs it writes the same logs and exit record as the perl supervisor.
import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import {
  createReadStream,
  existsSync,
  constants as fsConstants,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { constants as osConstants } from "node:os";
import { join } from "node:path";
import { median, ROOT, removeTemp, row, tempDir, timed } from "./lib.mjs";

const MB = 1024 * 1024;
const C_SOURCE = join(ROOT, "bench", "supervisor-c", "supervisor.c");
const SECRET = "s3cr3t-value-1234";
const CONFIGURED = "(?i)password=\\S+";

/** The perl supervisor after `npm run build`, whichever name it has now. */
function perlSupervisor() {
  for (const name of ["supervisor.pl", "wrapper.pl"]) {
    const path = join(ROOT, "dist", "tmux", name);
    if (existsSync(path)) return { path, name: `dist/tmux/${name}` };
  }
  throw new Error("no dist/tmux/supervisor.pl or wrapper.pl: run `npm run build`");
}

/** The perl termorch runs (its findPerl). */
async function perlPath() {
  const { findPerl } = await import(join(ROOT, "dist", "fs", "executable.js"));
  return findPerl();
}

/**
 * The OS constants termorch sends the perl wrapper (k_*=, session.ts) so that it loads no module
 * on its hot path; a supervisor that does not read them ignores them.
 */
function osLines() {
  const { O_WRONLY, O_CREAT, O_APPEND, O_TRUNC, O_RDONLY, O_NONBLOCK } = fsConstants;
  const { EINTR, EAGAIN, ENOENT } = osConstants.errno;
  const k = {
    o_wronly: O_WRONLY,
    o_creat: O_CREAT,
    o_append: O_APPEND,
    o_trunc: O_TRUNC,
    o_rdonly: O_RDONLY,
    o_nonblock: O_NONBLOCK,
    e_intr: EINTR,
    e_again: EAGAIN,
    e_noent: ENOENT,
    wnohang: 1,
  };
  const sys = {
    x64: { setsid: 112, gettimeofday: 96, prctl: 157 },
    arm64: { setsid: 157, gettimeofday: 169, prctl: 167 },
  }[process.arch];
  if (process.platform === "linux" && sys) {
    k.sys_setsid = sys.setsid;
    k.sys_gettimeofday = sys.gettimeofday;
    k.sys_prctl = sys.prctl;
  }
  return Object.entries(k).map(([key, v]) => `k_${key}=${v}`);
}

const enc = (v) => v.replace(/[%\n\r\0]/g, (c) => `%${c.charCodeAt(0).toString(16).padStart(2, "0")}`);

/** Writes ATTEMPT_DIR/launch with the keys of the supervisor's contract (tty=0). */
function writeLaunch(
  dir,
  { argv, redact = [], maxLogBytes = 0, env = { PATH: process.env.PATH ?? "/bin" } },
) {
  mkdirSync(dir, { recursive: true });
  const lines = [
    "version=2",
    `stdout_log=${enc(join(dir, "out.log"))}`,
    `stderr_log=${enc(join(dir, "err.log"))}`,
    "tty=0",
    `max_log_bytes=${maxLogBytes}`,
    "token=0123456789abcdef",
    ...osLines(),
    `cwd=${enc(dir)}`,
    "kill_grace_ms=2000",
    "cgroup=0",
    ...argv.map((a) => `arg=${enc(a)}`),
    ...Object.entries(env).map(([k, v]) => `env=${enc(`${k}=${v}`)}`),
    ...redact.map((p) => `redact=${enc(p)}`),
  ];
  writeFileSync(join(dir, "launch"), `${lines.join("\n")}\n`, { mode: 0o600 });
}

/** `cc -O2` of the prototype: its binary, or null and why. */
async function compile(dir, reps) {
  if (spawnSync("cc", ["--version"], { stdio: "ignore" }).status !== 0) return { bin: null, why: "no cc" };
  const bin = join(dir, "supervisor");
  const walls = [];
  const cpus = [];
  for (let i = 0; i < reps; i++) {
    rmSync(bin, { force: true });
    const r = await timed("cc", ["-O2", "-o", bin, C_SOURCE]);
    if (r.code !== 0) return { bin: null, why: `cc failed: ${r.stderr.slice(0, 200)}` };
    walls.push(r.wall);
    cpus.push(r.cpu);
  }
  return { bin, wall: median(walls), cpu: median(cpus), size: statSync(bin).size };
}

/** CPU per run of `cmd... DIR` over fresh attempt dirs (the bash loop's children, `times`). */
async function perTask(dir, tag, cmd, n, launch) {
  const dirs = [];
  for (let i = 0; i < n; i++) {
    const d = join(dir, `${tag}-${i}`);
    if (launch) writeLaunch(d, launch);
    else mkdirSync(d, { recursive: true });
    dirs.push(d);
  }
  const loop = `k=$1; shift; cmd=("\${@:1:k}"); shift "$k"; for d; do "\${cmd[@]}" "$d" >/dev/null; done`;
  const r = await timed("bash", ["-c", loop, "loop", String(cmd.length), ...cmd, ...dirs]);
  if (r.code !== 0) throw new Error(`${tag}: the loop failed: ${r.stderr.slice(-500)}`);
  if (launch) {
    for (const d of dirs) {
      const exit = JSON.parse(readFileSync(join(d, "exit.json"), "utf8"));
      if (exit.exit_code !== 0) throw new Error(`${tag}: the agent failed: ${JSON.stringify(exit)}`);
    }
  }
  // Removed only after every run: on ext4 each file created soon after many deletions costs
  // extra system time (its inode allocator skips recently deleted inodes), which would bill one
  // supervisor for the files of the one measured before it.
  return r.cpu / n;
}

/** Writes `bytes` of log-like lines (timestamps, levels, ids, paths: no secrets), as the logs bench. */
function writeLogFile(path, bytes) {
  const levels = ["INFO", "DEBUG", "WARN", "ERROR"];
  const lines = [];
  let size = 0;
  for (let i = 0; size < 256 * 1024; i++) {
    const id = ((i * 2654435761) >>> 0).toString(16).padStart(8, "0");
    const l = `2026-11-22T12:${String(i % 60).padStart(2, "0")}:${String(i % 60).padStart(2, "0")}.${String(i % 1000).padStart(3, "0")}Z ${levels[i % 4]} worker-${i % 8} processed request id=${id} path=/api/v1/items/${i} status=${200 + (i % 3) * 100} took=${i % 500}ms user=alice@example.com\n`;
    lines.push(l);
    size += l.length;
  }
  const block = Buffer.from(lines.join(""));
  const out = Buffer.alloc(bytes);
  for (let at = 0; at < bytes; at += block.length) block.copy(out, at, 0, Math.min(block.length, bytes - at));
  writeFileSync(path, out);
}

async function sha256(path) {
  const h = createHash("sha256");
  for await (const chunk of createReadStream(path)) h.update(chunk);
  return h.digest("hex");
}

/** The known inputs of the equality check: secrets of every kind, a key over lines, NUL, no final newline. */
const KNOWN_OUT = [
  "plain line\n",
  "aws AKIA1234567890ABCDEF and ghp_abcdefghijklmnopqrstuvwxyz0123456789 end\n",
  "Authorization: Bearer abcdefgh.ijkl+mn== short: bearer abc\n",
  "password=hunter2 PASSWORD=Foo&bar next\n",
  `${SECRET} twice ${SECRET}\n`,
  "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAxyz\nabcdef\n-----END RSA PRIVATE KEY----- after\n",
  "inline -----BEGIN EC PRIVATE KEY-----abc-----END EC PRIVATE KEY----- tail\n",
  "jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N\n",
  "nul \0 AKIA1234567890ABCDEF\n",
  "non-ascii é ü sk-ant-abcdefghijklmnopqrstuvwxyz\n",
  "no final newline",
].join("");
const KNOWN_ERR = "err xoxb-1234567890-abcdef\nerr glpat-abcdefghijklmnopqrstu\n";

/** Runs both supervisors on the same launch; returns where their logs or exit records differ. */
function compareOn(dir, tag, perl, script, bin, launch) {
  const results = [];
  for (const [who, cmd] of [
    ["perl", [perl, script]],
    ["c", [bin]],
  ]) {
    const d = join(dir, `${tag}-${who}`);
    rmSync(d, { recursive: true, force: true });
    writeLaunch(d, launch);
    spawnSync(cmd[0], [...cmd.slice(1), d], { stdio: "ignore", timeout: 30_000 });
    const read = (name) =>
      existsSync(join(d, name)) ? readFileSync(join(d, name)) : Buffer.from("(missing)");
    const exit = JSON.parse(existsSync(join(d, "exit.json")) ? read("exit.json").toString() : "{}");
    results.push({
      out: read("out.log"),
      err: read("err.log"),
      // Times and pids differ from run to run; whether they are set must not.
      exit: {
        ...exit,
        pid: exit.pid ? 0 : null,
        started_at: exit.started_at ? "" : null,
        finished_at: exit.finished_at ? "" : null,
      },
      launchLeft: existsSync(join(d, "launch")),
      pid: existsSync(join(d, "pid")),
    });
  }
  const [p, c] = results;
  const diffs = [];
  if (!p.out.equals(c.out)) diffs.push(`${tag}: stdout logs differ:\n${p.out}\n---\n${c.out}`);
  if (!p.err.equals(c.err)) diffs.push(`${tag}: stderr logs differ:\n${p.err}\n---\n${c.err}`);
  if (JSON.stringify(p.exit) !== JSON.stringify(c.exit))
    diffs.push(`${tag}: exit records differ: ${JSON.stringify(p.exit)} / ${JSON.stringify(c.exit)}`);
  if (p.launchLeft || c.launchLeft || p.pid !== c.pid) diffs.push(`${tag}: launch or pid files differ`);
  return diffs;
}

function equalityCheck(dir, perl, script, bin, redactAll) {
  writeFileSync(join(dir, "known.out"), KNOWN_OUT);
  writeFileSync(join(dir, "known.err"), KNOWN_ERR);
  const agent = ["sh", "-c", 'cat "$0"/known.out; cat "$0"/known.err >&2; exit 3', dir];
  const cases = [
    ["known", { argv: agent, redact: [...redactAll, "q*"] }],
    ["capped", { argv: agent, redact: redactAll, maxLogBytes: 150 }],
    ["unredacted", { argv: agent }],
    ["signal", { argv: ["sh", "-c", "echo bye; kill -TERM $$"] }],
    ["no-such-agent", { argv: [`/nonexistent/${SECRET}`], redact: redactAll }],
  ];
  const diffs = [];
  for (const [tag, launch] of cases) {
    diffs.push(...compareOn(dir, tag, perl, script, bin, launch));
  }
  return { cases: cases.length, diffs };
}

/** Which patterns the C prototype can use: `supervisor --translate`. */
function translations(bin, sources) {
  const r = spawnSync(bin, ["--translate"], { input: `${sources.join("\n")}\n`, encoding: "utf8" });
  return r.stdout.trimEnd().split("\n");
}

export async function run(opts = {}) {
  const reps = opts.smoke || opts.quick ? 1 : 3;
  const n = opts.smoke ? 5 : opts.quick ? 50 : 200;
  const size = (opts.smoke ? 4 : opts.quick ? 50 : 200) * MB;
  const dir = tempDir("supervisor");
  const { TOKEN_PATTERNS, Redactor } = await import(join(ROOT, "dist", "redact", "redactor.js"));
  const builtIns = [...TOKEN_PATTERNS];
  const more = Redactor.from([CONFIGURED], [SECRET]).sources;
  const perl = await perlPath();
  const script = perlSupervisor();
  const c = await compile(dir, reps);
  const rows = [];
  const notes = [];
  const cLabel = "C prototype (cc -O2)";
  const noC = `${cLabel}: not measured (${c.why})`;

  // The C prototype must write what the perl supervisor writes before its figures mean anything.
  let checked = null;
  if (c.bin) {
    checked = equalityCheck(dir, perl, script.path, c.bin, more);
    for (const d of checked.diffs) console.error(`bench: supervisor: ${d}`);
  }

  // Per task: the agent is /bin/true; both supervisors get the 10 built-in patterns, as termorch always passes them.
  const launch = { argv: ["/bin/true"], redact: builtIns };
  const kinds = [
    ["sh", ["sh", "-c", "true"], null],
    ["perl0", [perl, "-e", "0"], null],
    ["true", ["/bin/true"], null],
    ["perl", [perl, script.path], launch],
    ...(c.bin ? [["c", [c.bin], launch]] : []),
  ];
  const cpu = Object.fromEntries(kinds.map(([k]) => [k, []]));
  // On tmpfs where there is one: the figure is the supervisor's, not the file system's.
  const shm = existsSync("/dev/shm") ? mkdtempSync("/dev/shm/termorch-bench-supervisor-") : null;
  try {
    for (let i = 0; i < reps; i++) {
      for (const [k, cmd, l] of kinds) cpu[k].push(await perTask(shm ?? dir, `${k}-${i}`, cmd, n, l));
    }
  } finally {
    if (shm) rmSync(shm, { recursive: true, force: true });
  }
  const ms = (k) => median(cpu[k]) * 1000;
  const floorTrue = ms("true");
  const label = `supervisor per task, ${n}× agent /bin/true, CPU/run`;
  rows.push(row(`${label}: sh -c true (fork+exec floor)`, ms("sh"), "ms"));
  rows.push(row(`${label}: /bin/true exec'ed directly`, floorTrue, "ms"));
  rows.push(row(`${label}: perl -e 0 (perl's start, no agent)`, ms("perl0"), "ms", { baseline: floorTrue }));
  rows.push(row(`${label}: perl ${script.name}`, ms("perl"), "ms", { baseline: floorTrue }));
  if (c.bin) rows.push(row(`${label}: ${cLabel}`, ms("c"), "ms", { baseline: floorTrue }));
  else rows.push(row(`${label}: ${noC}`, null, ""));

  // Per MB: dd of a page-cached file, through each supervisor or straight to a file.
  const src = join(dir, "full.log");
  writeLogFile(src, size);
  const srcHash = await sha256(src);
  const mb = size / MB;
  const cases = [
    ["no pattern", []],
    ["10 built-in patterns", builtIns],
    ["built-ins + secret + 1 configured", more],
  ];
  const sups = [["perl", [perl, script.path], `perl ${script.name}`]];
  if (c.bin) sups.push(["c", [c.bin], cLabel]);
  const direct = { wall: [], cpu: [] };
  const via = {};
  let lost = 0;
  let equal = true;
  const dd = ["dd", `if=${src}`, "bs=256K", "status=none"];
  for (let i = 0; i < reps; i++) {
    spawnSync("sync");
    const out = join(dir, "direct.out");
    const r = await timed(dd[0], [...dd.slice(1), `of=${out}`]);
    if (r.code !== 0) throw new Error(`dd failed: ${r.stderr}`);
    direct.wall.push(r.wall);
    direct.cpu.push(r.cpu);
    rmSync(out, { force: true });
    for (const [caseName, redact] of cases) {
      for (const [k, cmd] of sups) {
        spawnSync("sync");
        const d = join(dir, `mb-${k}`);
        rmSync(d, { recursive: true, force: true });
        writeLaunch(d, { argv: dd, redact });
        const t = await timed(cmd[0], [...cmd.slice(1), d]);
        if (t.code !== 0) throw new Error(`${k} ${caseName}: exit ${t.code}: ${t.stderr.slice(-500)}`);
        const key = `${k}|${caseName}`;
        via[key] ??= { wall: [], cpu: [] };
        via[key].wall.push(t.wall);
        via[key].cpu.push(t.cpu);
        // The source has no secret: every case must log it byte for byte.
        const log = join(d, "out.log");
        lost += Math.abs(size - statSync(log).size);
        equal &&= statSync(log).size === size && (await sha256(log)) === srcHash;
        rmSync(d, { recursive: true, force: true });
      }
    }
  }
  const perMb = (xs) => (median(xs) * 1000) / mb;
  const dWall = perMb(direct.wall);
  const dCpu = perMb(direct.cpu);
  const mbLabel = `supervisor per MB, ${mb} MB dd bs=256K`;
  rows.push(row(`${mbLabel}: direct to a file, CPU`, dCpu, "ms/MB"));
  rows.push(row(`${mbLabel}: direct to a file, wall`, dWall, "ms/MB"));
  for (const [caseName] of cases) {
    for (const [k, , name] of sups) {
      const v = via[`${k}|${caseName}`];
      rows.push(row(`${mbLabel}: ${name}, ${caseName}, CPU`, perMb(v.cpu), "ms/MB", { baseline: dCpu }));
      rows.push(row(`${mbLabel}: ${name}, ${caseName}, wall`, perMb(v.wall), "ms/MB", { baseline: dWall }));
    }
    if (!c.bin) rows.push(row(`${mbLabel}: ${noC}`, null, ""));
  }
  rows.push(
    row("supervisor per MB: bytes lost (every run, size and SHA-256 compared)", lost, "B", {
      met: lost === 0 && equal,
      target: { value: 0, text: "0, checksums equal" },
      check: true,
    }),
  );

  if (c.bin) {
    rows.push(row("supervisor C: cc -O2 of supervisor.c, CPU", c.cpu, "s"));
    rows.push(row("supervisor C: cc -O2 of supervisor.c, wall", c.wall, "s"));
    rows.push(row("supervisor C: binary size (not stripped)", c.size / 1024, "KiB"));
    rows.push(
      row(
        `supervisor C: logs and exit record = perl's (${checked.cases} known inputs)`,
        `${checked.diffs.length} differ`,
        "",
        {
          met: checked.diffs.length === 0,
          target: { value: 0, text: "0 differ" },
          check: true,
        },
      ),
    );
    const typical = [
      CONFIGURED,
      "(?i)(?:api[_-]?key|secret|token)\\s*[:=]\\s*\\S+",
      Redactor.from([], ["pä ss/wörd"]).sources[0],
      "(?<=token=)\\w+",
      "secret=.*?&",
      "\\bAKIA\\w+",
      "([a-f0-9]{8})\\1",
      "\\p{L}+@corp",
    ];
    const all = [...builtIns, ...typical];
    const verdicts = translations(c.bin, all);
    const no = all.map((p, i) => [p, verdicts[i] ?? "NO ?"]).filter(([, v]) => !v.startsWith("OK"));
    const builtInSpan = builtIns.filter((p) => p.includes("[\\s\\S]*?"));
    notes.push(
      `supervisor: ERE translation (supervisor --translate): all ${builtIns.length} built-in TOKEN_PATTERNS translate; ${builtInSpan.length} of them (the private key, a lazy [\\s\\S]*?) only as a special form, a BEGIN regex and an END regex with state across lines, like the perl wrapper's key blocks. Of ${typical.length} typical configured patterns (a configured password=, an api-key assignment, a non-ASCII secret literal, and five that need Perl features) these cannot be expressed: ${no.map(([p, v]) => `${JSON.stringify(p)} (${v.slice(3)})`).join("; ")}.`,
    );
  }
  notes.push(
    `supervisor: median of ${reps}; per task = CPU (user+sys) of a bash loop's children (bash \`times\`) over ${n} sequential runs / ${n}, each supervisor on its own fresh launch file (written before the loop, not counted) in an attempt folder ${shm ? "on tmpfs (/dev/shm)" : "in the temp folder"} with the 10 built-in patterns and agent /bin/true, stdout to /dev/null, no tmux; so a supervisor's own cost is its figure minus the /bin/true row. Per MB = the whole tree (supervisor + dd) / MB, stdout (the pane) to /dev/null; both supervisors show at most 2 MB/s there. Perl is ${perl} (the one termorch finds); the launch file carries the k_* constants termorch sends, and cgroup=0 (the prototype has no cgroups).`,
  );
  removeTemp(dir);
  return { name: "supervisor", rows, notes };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const { main } = await import("./run.js");
  await main(["supervisor", ...process.argv.slice(2)]);
}
