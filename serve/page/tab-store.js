// The model the tab runs, kept in the browser (IndexedDB, which a page served over plain HTTP has too,
// unlike the Cache API), so a reload loads it again without a download. One model is kept: loading
// another replaces it. Its description { name, sha256, from: "server" | "disk", length, kept } and its
// bytes (an ArrayBuffer) are two records, so the page reads what is kept without the bytes: only the
// tab's worker, which runs the model, reads and writes them.
import { objectStore } from "./idb.js";

const INFO = "model", BYTES = "model-bytes";
const OLD = "current"; // an earlier version's one record, bytes included: removed by the next keep or forget
const run = objectStore("ferry-tab", "models");

/** What is kept, without its bytes, or undefined. */
export function keptInfo() {
  return run("readonly", (s) => s.get(INFO));
}

/** The kept model, its bytes included, or undefined. */
export async function keptModel() {
  const info = await keptInfo();
  const bytes = info && await run("readonly", (s) => s.get(BYTES));
  return bytes ? { ...info, bytes } : undefined;
}

/** Keeps `{ name, sha256, from, bytes }` in place of the kept model, in one transaction. */
export function keepModel({ bytes, ...info }) {
  return run("readwrite", (s) => {
    s.delete(OLD);
    s.put(bytes, BYTES);
    return s.put({ ...info, length: bytes.byteLength, kept: Date.now() }, INFO);
  });
}

/** Forgets the kept model. */
export function forgetModel() {
  return run("readwrite", (s) => {
    s.delete(OLD);
    s.delete(BYTES);
    return s.delete(INFO);
  });
}
