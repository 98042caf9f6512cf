import { createHash, randomBytes, timingSafeEqual } from "node:crypto";
import { isIP } from "node:net";

/** A fresh access token: 192 random bits, base64url (safe in a URL as it is). */
export function newToken(): string {
  return randomBytes(24).toString("base64url");
}

/**
 * Whether `given` is the token, in time that does not depend on where they differ. Both are
 * hashed first: timingSafeEqual needs equal lengths, and comparing lengths would tell a length.
 */
export function tokenMatches(given: string | null | undefined, token: string): boolean {
  if (typeof given !== "string" || given.length === 0) return false;
  const a = createHash("sha256").update(given).digest();
  const b = createHash("sha256").update(token).digest();
  return timingSafeEqual(a, b);
}

/** The token of a request: its `token` query parameter, or an `Authorization: Bearer` header. */
export function tokenOf(url: URL, authorization: string | undefined): string | null {
  const query = url.searchParams.get("token");
  if (query !== null) return query;
  const bearer = /^Bearer\s+(\S+)\s*$/i.exec(authorization ?? "");
  return bearer?.[1] ?? null;
}

const WILDCARD = new Set(["0.0.0.0", "::", "[::]"]);

/**
 * Whether a request's Host header names the address the server is bound to. A page on another
 * site whose DNS name was re-pointed at 127.0.0.1 (DNS rebinding) reaches the server with its own
 * name in Host, and is refused here even before the token is checked. The port is not compared:
 * an SSH tunnel (`ssh -L 8080:127.0.0.1:PORT`) or a proxy changes it. A loopback server also
 * answers to `localhost` and to loopback addresses, names no other site can claim; a server bound to every address (an
 * explicit `--host 0.0.0.0`) answers to any IP address, never to a DNS name.
 */
export function hostAllowed(hostHeader: string | undefined, bound: string): boolean {
  if (!hostHeader) return false;
  const name = hostnameOf(hostHeader);
  if (name === null) return false;
  const boundName = bound.toLowerCase().replace(/^\[(.*)\]$/, "$1");
  if (name === boundName) return true;
  // A loopback server also answers to any loopback address: through an SSH tunnel the browser
  // names the tunnel's end (127.0.0.1:8080) whatever address the server is bound to.
  if ((name === "localhost" || isLoopback(name)) && isLoopback(boundName)) return true;
  return WILDCARD.has(boundName) && isIP(name) !== 0;
}

/** `127.0.0.1:8080` → `127.0.0.1`, `[::1]:8080` → `::1`; null when it is not a host[:port]. */
function hostnameOf(host: string): string | null {
  const m = /^(?:\[([0-9a-f:.]+)\]|([^:[\]/\s@]+))(?::(\d{1,5}))?$/i.exec(host.trim());
  if (!m) return null;
  return (m[1] ?? m[2] ?? "").toLowerCase().replace(/\.$/, "");
}

export function isLoopback(address: string): boolean {
  return address === "::1" || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(address);
}
