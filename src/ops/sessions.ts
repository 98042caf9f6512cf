import { type PaneRow, TmuxServer } from "../tmux/server.js";

/** A session on one of termorch's tmux servers, as far as the operator commands care. */
export interface SessionInfo {
  name: string;
  /** `@termorch_run` of the session; null when termorch did not tag it. */
  run: string | null;
  /** Some pane of it still runs its program (the agent's supervisor). */
  live: boolean;
}

/** The server of a socket name, reached with the operator's environment (TMUX is never passed on). */
export function serverFor(socket: string, env: Readonly<Record<string, string | undefined>>): TmuxServer {
  return new TmuxServer({ socket, baseEnv: { ...env } });
}

/** The servers a live view asks again and again, one per socket and environment (each writes its config once). */
const asked = new WeakMap<object, Map<string, TmuxServer>>();

function askedServer(socket: string, env: Readonly<Record<string, string | undefined>>): TmuxServer {
  let servers = asked.get(env);
  if (!servers) {
    servers = new Map();
    asked.set(env, servers);
  }
  let server = servers.get(socket);
  if (!server) {
    server = serverFor(socket, env);
    servers.set(socket, server);
  }
  return server;
}

/**
 * Sessions per socket, each server asked once. A server that is not running has none; one that
 * cannot be asked (tmux missing) counts as having none too: status still shows the files.
 */
export async function sessionsBySocket(
  sockets: Iterable<string>,
  env: Readonly<Record<string, string | undefined>>,
): Promise<Map<string, Map<string, SessionInfo>>> {
  const out = new Map<string, Map<string, SessionInfo>>();
  for (const socket of new Set(sockets)) {
    let panes: PaneRow[] = [];
    try {
      panes = await askedServer(socket, env).listPanes();
    } catch {
      panes = [];
    }
    const sessions = new Map<string, SessionInfo>();
    for (const p of panes) {
      const s = sessions.get(p.session) ?? { name: p.session, run: p.run, live: false };
      s.live ||= !p.dead;
      sessions.set(p.session, s);
    }
    out.set(socket, sessions);
  }
  return out;
}
