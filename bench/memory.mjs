// 4. Memory: peak RSS of the termorch process with 100 tasks sleeping in parallel, and what
// the supervisor adds per running task: everything in the pane's process tree that is not the
// agent (RSS, and PSS, which shares the perl binary's pages fairly among the 100 wrappers).
import { spawn, spawnSync } from "node:child_process";
import { existsSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import {
  BIN,
  holdServer,
  killServer,
  makeWorkspace,
  removeTemp,
  row,
  runIdOf,
  TMUX_ENV,
  tempDir,
  termorchConf,
  uniqueSocket,
  writeAssignments,
} from "./lib.mjs";

function statusKb(pid, field) {
  try {
    const m = new RegExp(`^${field}:\\s+(\\d+) kB`, "m").exec(readFileSync(`/proc/${pid}/status`, "utf8"));
    return m ? Number(m[1]) : 0;
  } catch {
    return 0;
  }
}

function pssKb(pid) {
  try {
    const m = /^Pss:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/smaps_rollup`, "utf8"));
    return m ? Number(m[1]) : 0;
  } catch {
    return 0;
  }
}

/** pid → children pids, from /proc. */
function childrenMap() {
  const map = new Map();
  for (const e of readdirSync("/proc")) {
    if (!/^\d+$/.test(e)) continue;
    try {
      const st = readFileSync(`/proc/${e}/stat`, "utf8");
      const ppid = Number(st.slice(st.lastIndexOf(")") + 2).split(" ")[1]);
      if (!map.has(ppid)) map.set(ppid, []);
      map.get(ppid).push(Number(e));
    } catch {}
  }
  return map;
}

function tree(root, kids) {
  const out = [root];
  for (let i = 0; i < out.length; i++) out.push(...(kids.get(out[i]) ?? []));
  return out;
}

export async function run(opts = {}) {
  const n = opts.smoke ? 8 : 100;
  const dir = tempDir("memory");
  const ws = makeWorkspace(dir);
  // Each agent sleeps until the bench has measured, then ends (a second-granularity poll: cheap).
  const tasks = Array.from({ length: n }, (_, i) => ({
    id: `t${i}`,
    command: ["perl", "-e", 'sleep 1 until -e "release"'],
  }));
  const file = writeAssignments(dir, "mem", tasks);
  const socket = uniqueSocket("memory");
  const hold = holdServer(socket, await termorchConf());
  const serverRss0 = statusKb(hold.pid, "VmRSS");
  const child = spawn(process.execPath, [BIN, "run", file, "--max-parallel", String(n)], {
    env: { ...TMUX_ENV, TERMORCH_TMUX_SOCKET: socket },
    stdio: "ignore",
  });
  const closed = new Promise((r) => child.on("close", r));
  let peak = 0;
  let sampled = null;
  const sampler = setInterval(() => {
    peak = Math.max(peak, statusKb(child.pid, "VmHWM"), statusKb(child.pid, "VmRSS"));
  }, 100);
  const statusDir = join(dir, "status");
  const deadline = Date.now() + 120_000;
  while (!sampled && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 200));
    const running = existsSync(statusDir) ? readdirSync(statusDir).filter((f) => f.endsWith(".running")) : [];
    if (running.length < n) continue;
    // Every task runs: measure each pane's tree minus its agent.
    const panes = spawnSync(
      "tmux",
      ["-L", socket, "list-panes", "-a", "-F", "#{@termorch_task} #{pane_pid}"],
      {
        encoding: "utf8",
        env: TMUX_ENV,
      },
    )
      .stdout.split("\n")
      .map((l) => l.split(" "))
      .filter(([task, pid]) => task && pid);
    // A wrapper records its agent's pid a moment after the status says running.
    const pidFile = (task) => join(dir, ".termorch", runIdOf(file), "tasks", task, "1", "pid");
    if (panes.length < n || !panes.every(([task]) => existsSync(pidFile(task)))) continue;
    const kids = childrenMap();
    let rss = 0;
    let pss = 0;
    let agents = 0;
    for (const [task, pid] of panes) {
      const agentPid = Number(readFileSync(pidFile(task), "utf8").trim());
      for (const p of tree(Number(pid), kids)) {
        if (tree(agentPid, kids).includes(p)) {
          agents += 1;
          continue;
        }
        rss += statusKb(p, "VmRSS");
        pss += pssKb(p);
      }
    }
    sampled = {
      panes: panes.length,
      agents,
      rssPerTask: rss / panes.length / 1024,
      pssPerTask: pss / panes.length / 1024,
      serverPerTask: (statusKb(hold.pid, "VmRSS") - serverRss0) / panes.length / 1024,
      termorchNow: statusKb(child.pid, "VmRSS") / 1024,
    };
  }
  writeFileSync(join(ws, "release"), "");
  const code = await closed;
  clearInterval(sampler);
  killServer(socket);
  removeTemp(dir);
  if (code !== 0 || !sampled) throw new Error(`memory: termorch exited ${code}, sampled=${!!sampled}`);
  return {
    name: "memory",
    rows: [
      row(`memory: termorch peak RSS (VmHWM), ${n} tasks running`, peak / 1024, "MB", {
        target: { value: 150, text: "< 150 MB" },
      }),
      row(`memory: termorch RSS while all ${sampled.panes} run`, sampled.termorchNow, "MB"),
      row("memory: supervisor per running task, RSS (pane tree − agent)", sampled.rssPerTask, "MB", {
        target: { value: 10, text: "< 10 MB" },
      }),
      row("memory: supervisor per running task, PSS", sampled.pssPerTask, "MB"),
      row("memory: tmux server growth per session (not in the pane)", sampled.serverPerTask, "MB"),
    ],
    notes: [
      "memory: agents are `perl -e 'sleep 1 until -e \"release\"'`; peak = max of VmHWM sampled every 100 ms; per task = processes of each pane's tree except the agent's own tree, measured once all tasks run (RSS counts shared pages of perl in every supervisor; PSS divides them).",
    ],
  };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const { main } = await import("./run.js");
  await main(["memory", ...process.argv.slice(2)]);
}
