// IndexedDB for the page's stores (store.js: the conversations; tab-store.js: the tab's model): one
// database with one object store, opened once, and a transaction per call. A call settles when its
// transaction does: with the request's result when it commits, and rejected when it fails or is aborted
// (a request's error aborts the transaction; the browser aborts one that runs out of quota, with no
// request to blame), so no caller waits for an event that never comes.

/**
 * The runner of the object store `store` in the database `name` (version 1; `options` for
 * `createObjectStore` when the database is made): `run(mode, act)` opens a transaction in `mode`
 * ("readonly" or "readwrite"), calls `act` with the object store, and resolves to the `result` of the
 * request `act` returns once the transaction commits.
 */
export function objectStore(name, store, options) {
  let opened = null;
  const db = () =>
    opened ??= new Promise((resolve, reject) => {
      const req = indexedDB.open(name, 1);
      req.onupgradeneeded = () => req.result.createObjectStore(store, options);
      req.onsuccess = () => resolve(req.result);
      req.onerror = () => reject(req.error);
    });
  return async (mode, act) => {
    const tx = (await db()).transaction(store, mode);
    const req = act(tx.objectStore(store));
    return new Promise((resolve, reject) => {
      tx.oncomplete = () => resolve(req.result);
      // A request's error reaches the transaction before it aborts (`tx.error` is still null then).
      tx.onerror = (e) => reject(e.target.error);
      // An abort with no failed request: the browser's reason, or none when the page called abort().
      tx.onabort = () =>
        reject(tx.error ?? new DOMException(`${name}: the transaction was aborted`, "AbortError"));
    });
  };
}
