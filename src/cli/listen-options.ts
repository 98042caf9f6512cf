import { isIP } from "node:net";
import { InvalidArgumentError } from "commander";

/** `--port`: a port number, 0 for a free one. */
export const port = (value: string): number => {
  const n = Number(value);
  if (!/^\d+$/.test(value) || n > 65535)
    throw new InvalidArgumentError("must be a port number (0: a free one)");
  return n;
};

/** `--host`: an IP address to listen on (no names: a name may resolve to anything). */
export const address = (value: string): string => {
  const bare = value.replace(/^\[(.*)\]$/, "$1");
  if (isIP(bare) === 0) throw new InvalidArgumentError("must be an IP address, e.g. 127.0.0.1 or 0.0.0.0");
  return bare;
};
