// The model the tab runs, kept in the browser (IndexedDB, which a page served over plain HTTP has too,
// unlike the Cache API), so a reload loads it again without a download. One model is kept: loading
// another replaces it. A record is { name, sha256, bytes (an ArrayBuffer), from: "server" | "disk", kept }.
import { objectStore } from "./idb.js";

const KEY = "current";
const run = objectStore("ferry-tab", "models");

/** The kept model, or undefined. */
export function keptModel() {
  return run("readonly", (s) => s.get(KEY));
}

/** Keeps `record` (a structured clone of it) in place of the kept model. */
export function keepModel(record) {
  return run("readwrite", (s) => s.put({ ...record, kept: Date.now() }, KEY));
}

/** Forgets the kept model. */
export function forgetModel() {
  return run("readwrite", (s) => s.delete(KEY));
}
