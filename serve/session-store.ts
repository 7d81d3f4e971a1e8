/**
 * Saved sessions on disk, one file per session in one folder, named by an opaque random id. An id is
 * checked against `^[0-9a-f]{32}$` before it comes near a path, so no request can name a file outside
 * the store; files are written to a temporary name and renamed, so a half-written session never looks
 * saved. The store keeps the newest `capacity` sessions and deletes older ones.
 *
 * @example
 * ```ts
 * const store = await createSessionStore("out/sessions");
 * const id = await store.put(session.save!());
 * const bytes = await store.get(id); // undefined for an unknown or malformed id
 * ```
 * @module
 */
import { mkdir, readdir, readFile, rename, rm, stat, writeFile } from "node:fs/promises";
import { join } from "node:path";

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

/** Opens (creating) the store folder `dir`, keeping at most `capacity` sessions. */
export async function createSessionStore(dir: string, capacity = 256): Promise<SessionStore> {
  await mkdir(dir, { recursive: true });
  const pathOf = (id: string) => join(dir, id + SUFFIX);
  const prune = async () => {
    const names = (await readdir(dir)).filter((n) =>
      ID.test(n.slice(0, -SUFFIX.length)) && n.endsWith(SUFFIX)
    );
    if (names.length <= capacity) return;
    const dated = await Promise.all(names.map(async (n) => ({ n, t: (await stat(join(dir, n))).mtimeMs })));
    dated.sort((a, b) => a.t - b.t);
    for (const { n } of dated.slice(0, names.length - capacity)) await rm(join(dir, n), { force: true });
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
