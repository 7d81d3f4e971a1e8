/**
 * Saved sessions on disk, one file per session in one folder, named by an opaque random id. An id is
 * checked against `^[0-9a-f]{32}$` before it comes near a path, so no request can name a file outside
 * the store; files are written to a temporary name and renamed, so a half-written session never looks
 * saved. The store keeps the newest sessions within a count and a byte bound (`SessionStoreLimits`) and
 * deletes older ones: at Qwen3-0.6B's shape a session costs about 115 KB per position, so 256 sessions
 * could otherwise take tens of gigabytes.
 *
 * @example
 * ```ts
 * import { createSessionStore } from "./session-store.ts";
 * import type { EngineSession } from "../../model/engine.ts";
 * declare const session: EngineSession;
 * const store = await createSessionStore("out/sessions");
 * const id = await store.put(session.save!());
 * const bytes = await store.get(id); // undefined for an unknown or malformed id
 * ```
 * @module
 */
import { mkdir, readdir, readFile, rename, rm, stat, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { DEFAULT_SESSION_LIMITS, overLimits, type SessionStoreLimits } from "./session-limits.ts";

/** Saved session bytes by id. */
export interface SessionStore {
  readonly dir: string;
  /** Stores bytes under a new id and returns it. */
  put(bytes: Uint8Array): Promise<string>;
  /** The bytes stored under `id`, or undefined when there are none (or `id` is not an id). */
  get(id: string): Promise<Uint8Array<ArrayBuffer> | undefined>;
}

const ID = /^[0-9a-f]{32}$/;
const SUFFIX = ".session";

/** Whether `id` has the shape of a session id. */
export function isSessionId(id: string): boolean {
  return ID.test(id);
}

/** Opens (creating) the store folder `dir`, keeping the newest sessions within `limits`. */
export async function createSessionStore(
  dir: string,
  limits: Partial<SessionStoreLimits> = {},
): Promise<SessionStore> {
  const within = { ...DEFAULT_SESSION_LIMITS, ...limits };
  await mkdir(dir, { recursive: true });
  const pathOf = (id: string) => join(dir, id + SUFFIX);
  const prune = async () => {
    const names = (await readdir(dir)).filter((n) =>
      ID.test(n.slice(0, -SUFFIX.length)) && n.endsWith(SUFFIX)
    );
    const saved = await Promise.all(names.map(async (name) => {
      const s = await stat(join(dir, name));
      return { name, time: s.mtimeMs, bytes: s.size };
    }));
    for (const { name } of overLimits(saved, within)) await rm(join(dir, name), { force: true });
  };
  return {
    dir,
    async put(bytes) {
      const id = crypto.randomUUID().replaceAll("-", "");
      const tmp = join(dir, `.${id}.tmp`);
      await writeFile(tmp, bytes);
      await rename(tmp, pathOf(id));
      await prune();
      return id;
    },
    async get(id) {
      if (!ID.test(id)) return undefined;
      try {
        return new Uint8Array(await readFile(pathOf(id)));
      } catch {
        return undefined;
      }
    },
  };
}
