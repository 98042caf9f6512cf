import { type FSWatcher, watch } from "node:fs";
import { basename, dirname } from "node:path";
import { StringDecoder } from "node:string_decoder";
import { readPartsSync } from "./file-range.js";

/** How often a followed file is read again when no file event came. */
const POLL_MS = 1000;
/** The most of a file read at once. */
const CHUNK = 4 * 1024 * 1024;

export interface Following {
  dispose(): void;
}

/** How a file is followed. */
export interface FollowOptions {
  /** Hears why its folder cannot be watched (it is polled then). */
  cannotWatch?: (error: unknown) => void;
  /**
   * false: polled only, for a follower that can wait a poll (every file event of a shared folder,
   * a logs folder, would wake each of its followers).
   */
  events?: boolean;
}

/**
 * Calls `read` whenever the file at `path` may have changed: a change in its folder that names
 * it (the folder is watched, so the file may come later or be replaced by a rename), and every
 * POLL_MS besides, for file systems that tell nothing. Once at the start too.
 */
export function followFile(path: string, read: () => void, opts: FollowOptions = {}): Following {
  let watcher: FSWatcher | null = null;
  if (opts.events !== false)
    try {
      watcher = watch(dirname(path), (_event, name) => {
        if (name === null || name === basename(path)) read();
      });
      watcher.on("error", () => watcher?.close());
    } catch (error) {
      opts.cannotWatch?.(error);
    }
  const timer = setInterval(read, POLL_MS);
  timer.unref();
  read();
  return {
    dispose() {
      watcher?.close();
      clearInterval(timer);
    },
  };
}

/** Follows a file as it is written (a log): `onText` hears each new part once, whole characters only. */
export function tailFile(path: string, onText: (text: string) => void, opts: FollowOptions = {}): Following {
  const decoder = new StringDecoder("utf8");
  let offset = 0;
  return followFile(
    path,
    () => {
      for (;;) {
        const part = readPartsSync(path, [{ from: offset, bytes: CHUNK }])?.parts[0];
        if (!part || part.length === 0) return;
        offset += part.length;
        const text = decoder.write(part);
        if (text) onText(text);
      }
    },
    opts,
  );
}
