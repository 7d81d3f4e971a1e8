// The model the tab runs, kept in the browser (IndexedDB, which a page served over plain HTTP has too,
// unlike the Cache API), so a reload loads it again without a download. One model is kept: loading
// another replaces it. A record is { name, sha256, bytes (an ArrayBuffer), from: "server" | "disk", kept }.

const DB = "ferry-tab", STORE = "models", KEY = "current";
let opened = null;

function db() {
  opened ??= new Promise((resolve, reject) => {
    const req = indexedDB.open(DB, 1);
    req.onupgradeneeded = () => req.result.createObjectStore(STORE);
    req.onsuccess = () => resolve(req.result);
    req.onerror = () => reject(req.error);
  });
  return opened;
}

async function run(mode, act) {
  const tx = (await db()).transaction(STORE, mode);
  const req = act(tx.objectStore(STORE));
  return new Promise((resolve, reject) => {
    tx.oncomplete = () => resolve(req.result);
    tx.onerror = () => reject(tx.error);
    tx.onabort = () => reject(tx.error);
  });
}

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
